/**
 * What an idle library worker costs: `node dist/bench/embedded-idle.js [--seconds 10] [--concurrency 16]`.
 * Opens a Queue on a fresh SQLite file, starts a Worker that finds nothing to do (its lease parks, and the
 * store watches the file for other processes' commits), and prints the process's CPU time over the window
 * as a share of one core (process.cpuUsage, user + system).
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openQueue, Worker } from '../src/index.js';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, concurrency: { type: 'string', default: '16' } } });
const seconds = Number(values.seconds);
const dir = mkdtempSync(join(tmpdir(), 'leasehold-idle-'));
const queue = await openQueue({ db: join(dir, 'idle.db'), tenant: 'bench' });
const worker = new Worker({ queue, concurrency: Number(values.concurrency), workerId: 'idle', waitMs: 5_000, handlers: { noop: () => null } });
const running = worker.run();
// Let the worker park its first lease before the window opens.
await new Promise((resolve) => setTimeout(resolve, 1_000));
const cpuBefore = process.cpuUsage();
const startedAt = performance.now();
await new Promise((resolve) => setTimeout(resolve, seconds * 1_000));
const cpu = process.cpuUsage(cpuBefore);
const share = (cpu.user + cpu.system) / 1_000 / (performance.now() - startedAt);
console.log(`idle library worker (concurrency ${values.concurrency}) over ${seconds} s: ${(share * 100).toFixed(2)}% of one core`);
await worker.stop({ graceMs: 100 });
await running;
await queue.close();
rmSync(dir, { recursive: true, force: true });
