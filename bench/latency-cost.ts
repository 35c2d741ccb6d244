/**
 * `npm run bench:latency-cost`: what the HTTP latency scenario of `npm run
 * bench` costs, per job and per process, and where its latency goes. Jobs
 * are enqueued 5 ms apart onto an idle queue, and a worker process with 8
 * slots long-polls for them, as in the bench; then:
 *
 *   CPU per job   of the coordinator, the worker, the bench's own client and
 *                 (with a PostgreSQL database on this machine) every
 *                 `postgres` process, from /proc (Linux only);
 *   latency       medians of enqueue to handler start and of the enqueue's
 *                 answer (the host's monotonic clock), and from the job's
 *                 creation to its lease (the store's clock, in whole ms).
 *                 The lease's time and the handler's start are read on
 *                 different clocks, so the time between them is not shown.
 *
 * On two cores the scenario keeps most of both busy, so latency is mostly
 * queueing for a CPU: two builds differ in latency by much more than in CPU
 * per job, and the CPU figures are the ones to compare them by (alternate
 * the builds in one sitting).
 *
 * Options: --db sqlite|postgres://… (default sqlite), --jobs 300, --runs 3.
 */

import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { LeaseholdClient } from '../src/client/index.js';
import { enqueuePaced, succeededJob } from './figures.js';
import { freshDatabase } from './fresh-db.js';
import { createKey, median, processCpuMs, processesCpuMs, ROOT, startCoordinator, startWorker } from './processes.js';

const { values: args } = parseArgs({
  options: { db: { type: 'string', default: 'sqlite' }, jobs: { type: 'string', default: '300' }, runs: { type: 'string', default: '3' } },
});
const JOBS = Number(args.jobs);
const RUNS = Number(args.runs);
const onPostgres = args.db.startsWith('postgres');

const PARTS = ['enqueue to start', 'enqueue answered', 'created to leased'] as const;

interface Run {
  readonly cpu: Record<'coordinator' | 'worker' | 'client' | 'postgres', number>;
  readonly latency: Record<(typeof PARTS)[number], number>;
}

async function once(run: number): Promise<Run> {
  const { db, cleanup } = await freshDatabase(args.db, `cost${run}`);
  const adminKey = createKey(db, 'bench', 'bench', 'admin');
  const workerKey = createKey(db, 'bench', 'bench-worker', 'worker');
  const coordinator = await startCoordinator(db);
  const worker = startWorker({ url: coordinator.url, key: workerKey, handlers: join(ROOT, 'dist', 'bench', 'handlers.js'), concurrency: 8, workerId: 'cost' });
  const client = new LeaseholdClient({ baseUrl: coordinator.url, apiKey: adminKey, connections: 64 });
  try {
    const warm = await client.enqueue({ kind: 'stamp', payload: {} }, { idempotencyKey: 'warm-up' });
    await succeededJob(client, warm.job.id);
    const coordinatorPid = coordinator.process.child.pid as number;
    const workerPid = worker.child.pid as number;
    const before = {
      coordinator: processCpuMs(coordinatorPid),
      worker: processCpuMs(workerPid),
      client: process.cpuUsage(),
      postgres: onPostgres ? processesCpuMs('postgres') : 0,
    };
    const sent = await enqueuePaced(client, 'stamp', JOBS, 'cost');
    // The CPU is taken when the last job has run, before the reads below (which cost every build the same).
    const last = sent.reduce((a, b) => (b.sentAt > a.sentAt ? b : a));
    await succeededJob(client, last.id, 5);
    const clientCpu = process.cpuUsage(before.client);
    const cpu = {
      coordinator: (processCpuMs(coordinatorPid) - before.coordinator) / JOBS,
      worker: (processCpuMs(workerPid) - before.worker) / JOBS,
      client: (clientCpu.user + clientCpu.system) / 1000 / JOBS,
      postgres: onPostgres ? (processesCpuMs('postgres') - before.postgres) / JOBS : Number.NaN,
    };
    const parts = Object.fromEntries(PARTS.map((part) => [part, [] as number[]])) as Record<(typeof PARTS)[number], number[]>;
    for (const job of sent) {
      const read = await succeededJob(client, job.id);
      const handlerAt = (read.result as { handlerStartedAt: number }).handlerStartedAt;
      const leasedAt = Date.parse(read.startedAt ?? '');
      parts['enqueue to start'].push(handlerAt - job.sentAt);
      parts['enqueue answered'].push(job.answeredAt - job.sentAt);
      parts['created to leased'].push(leasedAt - Date.parse(read.createdAt));
    }
    const latency = Object.fromEntries(PARTS.map((part) => [part, median(parts[part])])) as Run['latency'];
    return { cpu, latency };
  } finally {
    await worker.stop();
    await client.close();
    await coordinator.process.stop();
    await cleanup();
  }
}

process.stdout.write(`latency cost: db=${onPostgres ? 'postgres' : 'sqlite'}, ${JOBS} jobs 5 ms apart, ${RUNS} runs\n`);
const runs: Run[] = [];
for (let run = 1; run <= RUNS; run++) {
  const result = await once(run);
  runs.push(result);
  const cpu = Object.entries(result.cpu).map(([name, ms]) => `${name} ${Number.isNaN(ms) ? '-' : ms.toFixed(2)}`);
  const latency = Object.entries(result.latency).map(([name, ms]) => `${name} ${ms.toFixed(2)}`);
  process.stdout.write(`run ${run}: CPU ms per job: ${cpu.join(', ')}; latency p50 ms: ${latency.join(', ')}\n`);
}
const medianOf = (pick: (run: Run) => number): string => {
  const value = median(runs.map(pick));
  return Number.isNaN(value) ? '-' : value.toFixed(2);
};
process.stdout.write('medians:\n');
for (const name of Object.keys(runs[0]?.cpu ?? {}) as (keyof Run['cpu'])[])
  process.stdout.write(`  CPU ms per job, ${name.padEnd(12)} ${medianOf((r) => r.cpu[name])}\n`);
for (const name of PARTS) process.stdout.write(`  p50 ms, ${name.padEnd(20)} ${medianOf((r) => r.latency[name])}\n`);
