/**
 * `node dist/bench/coordinator-cpu.js`: the coordinator process's own CPU
 * time (user + system, from /proc, so Linux only) per 1,000 jobs, for single
 * enqueues (64 in flight) and for a worker draining them; then how long
 * GET /metrics takes with those jobs in the database (median of 20 scrapes).
 * CPU time moves far less than throughput on a machine shared with other
 * work, so this is the figure to compare two builds by (the cost of metrics
 * and transition logging, for instance).
 *
 * Options: --jobs 10000, --serve-args "--log-level info", --metrics no (for a
 * build without GET /metrics).
 */

import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LeaseholdClient } from '../src/client/index.js';
import { freshDatabase } from './fresh-db.js';
import { createKey, median, processCpuMs, ROOT, startCoordinator, startWorker } from './processes.js';

const { values: args } = parseArgs({
  options: { jobs: { type: 'string', default: '10000' }, 'serve-args': { type: 'string', default: '' }, metrics: { type: 'string', default: 'yes' } },
});
const SCRAPE = args.metrics !== 'no';
const JOBS = Number(args.jobs);
const SCRAPE_TOKEN = 'bench-scrape-token-0123456789abcdefghij';

const { db, cleanup } = await freshDatabase('sqlite', 'cpu');
const adminKey = createKey(db, 'bench', 'bench', 'admin');
const workerKey = createKey(db, 'bench', 'bench-worker', 'worker');
const extraArgs = args['serve-args'].split(' ').filter(Boolean);
const serveArgs = SCRAPE ? [...extraArgs, '--metrics-token', SCRAPE_TOKEN] : extraArgs;
const { url, process: coordinator } = await startCoordinator(db, serveArgs);
const pid = coordinator.child.pid ?? 0;
const client = new LeaseholdClient({ baseUrl: url, apiKey: adminKey, connections: 64 });
try {
  const enqueue = async (count: number, prefix: string): Promise<void> => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next < count) {
          const i = next++;
          await client.enqueue({ kind: 'noop', payload: { i } }, { idempotencyKey: `${prefix}-${i}` });
        }
      }),
    );
  };
  await enqueue(2_000, 'warm'); // the JIT, untimed
  const beforeEnqueue = processCpuMs(pid);
  await enqueue(JOBS, 'timed');
  const enqueueCpu = processCpuMs(pid) - beforeEnqueue;

  const beforeDrain = processCpuMs(pid);
  const worker = startWorker({ url, key: workerKey, handlers: join(ROOT, 'dist', 'bench', 'handlers.js'), concurrency: 32 });
  await worker.ready;
  for (;;) {
    const stats = (await (await fetch(`${url}/stats`, { headers: { authorization: `Bearer ${adminKey}` } })).json()) as { counts: Record<string, number> };
    if ((stats.counts['succeeded'] ?? 0) >= JOBS + 2_000) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const drainCpu = processCpuMs(pid) - beforeDrain;
  await worker.stop();

  const scrapes: number[] = [];
  for (let i = 0; SCRAPE && i < 20; i++) {
    const started = performance.now();
    const answer = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${SCRAPE_TOKEN}` } });
    await answer.text();
    scrapes.push(performance.now() - started);
  }
  console.log(`serve ${extraArgs.join(' ') || '(defaults)'}; ${JOBS} jobs`);
  console.log(`  coordinator CPU per 1,000 single enqueues: ${((enqueueCpu * 1000) / JOBS).toFixed(0)} ms`);
  console.log(`  coordinator CPU per 1,000 jobs drained by a worker: ${((drainCpu * 1000) / (JOBS + 2_000)).toFixed(0)} ms`);
  if (SCRAPE) console.log(`  GET /metrics with ${JOBS + 2_000} jobs: median ${median(scrapes).toFixed(1)} ms`);
} finally {
  await client.close();
  await coordinator.stop();
  await cleanup();
}
