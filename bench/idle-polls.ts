/**
 * The CPU an idle coordinator spends on parked long polls (docs/SCALING.md):
 * a coordinator in this process, listening on a random port, and a child
 * process that opens `--polls` long polls (POST /lease, waitMs 60 s, ten kinds
 * filters) over keep-alive connections. Once every poll has parked (its
 * jobNextDue read resolved), this process's CPU time is read from
 * process.cpuUsage() and /proc/self/stat over `--seconds`, and the lease
 * queries issued meanwhile are counted. The clients' CPU is the child's, not
 * counted. One delayed job an hour ahead keeps a due timer set in one group.
 *
 * `--recheck-ms N` sets leaseRecheckMs, the optional periodic re-check, for comparison.
 *
 *   node dist/bench/idle-polls.js [--db sqlite|postgres://…] [--polls 1000] [--seconds 30] [--recheck-ms N]
 */

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { openStore } from '../src/cli/open-store.js';
import { buildCoordinator } from '../src/coordinator/app.js';
import { hashApiKey, newApiKey } from '../src/core/ids.js';
import type { Store } from '../src/store/store.js';
import { freshDatabase } from './fresh-db.js';

const CHILD = `
const http = require('node:http');
const [port, key, polls] = process.argv.slice(1);
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(polls) });
for (let i = 0; i < Number(polls); i++) {
  const body = JSON.stringify({ workerId: 'idle-' + i, kinds: ['k-' + (i % 10)], waitMs: 60000 });
  const req = http.request({ port, method: 'POST', path: '/lease', agent,
    headers: { authorization: 'Bearer ' + key, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
  req.on('response', (res) => res.resume());
  req.on('error', () => undefined);
  req.end(body);
}
process.on('message', () => process.exit(0));
`;

/** utime + stime of this process, in clock ticks (USER_HZ, 100 on Linux). */
function procTicks(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      db: { type: 'string', default: 'sqlite' },
      polls: { type: 'string', default: '1000' },
      seconds: { type: 'string', default: '30' },
      'recheck-ms': { type: 'string' },
    },
  });
  const polls = Number(values.polls);
  const seconds = Number(values.seconds);
  const fresh = await freshDatabase(values.db, 'idle-polls');
  const inner = await openStore(fresh.db);
  let leases = 0;
  let parks = 0;
  const store = new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'jobLease') return (...args: Parameters<Store['jobLease']>) => (leases++, target.jobLease(...args));
      if (property === 'jobNextDue')
        return async (...args: Parameters<Store['jobNextDue']>) => {
          const due = await target.jobNextDue(...args);
          parks++;
          return due;
        };
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  const key = newApiKey();
  await inner.apiKeyInsert({ id: 'idle-worker', tenant: 't1', user: 'idle', role: 'worker', keyHash: hashApiKey(key) });
  await inner.jobEnqueue({
    tenant: 't1',
    owner: 'idle',
    idempotencyKey: 'later',
    requestHash: 'x',
    kind: 'k-0',
    payload: {},
    maxAttempts: 1,
    priority: 0,
    runAfter: (await inner.now()) + 3_600_000,
    deadlineMs: null,
    payloadBytes: 2,
  });
  const recheck = values['recheck-ms'] === undefined ? {} : { leaseRecheckMs: Number(values['recheck-ms']) };
  const app = await buildCoordinator({ store, logger: false, config: { reaperIntervalMs: 0, ...recheck } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  const child = spawn(process.execPath, ['-e', CHILD, String(port), key, String(polls)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const parkedBy = Date.now() + 60_000;
  while (parks < polls) {
    if (Date.now() > parkedBy) throw new Error(`only ${parks} of ${polls} polls parked`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  // Let the parking settle (keep-alive sockets, GC of the burst) before measuring.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const leasesBefore = leases;
  const cpuBefore = process.cpuUsage();
  const ticksBefore = procTicks();
  const t0 = process.hrtime.bigint();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1_000));
  const wallUs = Number(process.hrtime.bigint() - t0) / 1_000;
  const cpu = process.cpuUsage(cpuBefore);
  const ticks = procTicks() - ticksBefore;
  const percent = ((cpu.user + cpu.system) / wallUs) * 100;
  const procPercent = ((ticks * 10_000) / wallUs) * 100;
  console.log(
    JSON.stringify({
      backend: inner.backend,
      polls,
      leaseRecheckMs: recheck.leaseRecheckMs ?? null,
      seconds: Math.round(wallUs / 1e6),
      leaseQueries: leases - leasesBefore,
      cpuPercentOfCore: Number(percent.toFixed(3)),
      procStatPercentOfCore: Number(procPercent.toFixed(3)),
      userMs: Math.round(cpu.user / 1000),
      systemMs: Math.round(cpu.system / 1000),
    }),
  );
  child.send('done');
  await app.close();
  await inner.close();
  await fresh.cleanup();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
