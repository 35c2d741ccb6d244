/**
 * `npm run bench`: throughput and latency of a real coordinator process with
 * durable writes, driven over HTTP, each scenario on a fresh database and
 * reported as the median of several runs.
 *
 *   enqueue-single  N single POST /jobs with 64 in flight (after 2,000 untimed ones)
 *   enqueue-batch   N jobs through POST /jobs/batch (500 per request, 4 in flight)
 *   end-to-end      N no-op jobs already enqueued (behind 2,000 untimed warm-up jobs of
 *                   higher priority); worker processes with 32 handlers
 *                   in flight in total run them all (timed from the first job's
 *                   start to the last one's finish, by the jobs' own timestamps);
 *                   with several coordinators the workers are spread over them
 *   latency         500 jobs enqueued 5 ms apart onto an idle queue; enqueue to
 *                   handler start, p50 and p99. The worker long-polls with a
 *                   kinds filter (its handlers' kinds). With several coordinators
 *                   the jobs go to the last one and the worker polls the first,
 *                   so every wake-up crosses coordinators (LISTEN/NOTIFY)
 *   latency-backlog the same beside 20,000 queued jobs of a kind no worker
 *                   asks for; printed with its p50's ratio to latency's
 *
 * Options: --db sqlite|postgres://… (default: a fresh SQLite file per run),
 * --runs 3, --jobs 20000, --coordinators 1, --workers 2, --only a,b.
 * --scenario haul|sustained runs bench/haul.ts with the rest of the options.
 */

import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LeaseholdClient } from '../src/client/index.js';
import { enqueueBatches, enqueueSingle, enqueueToStart, succeededRate, WARM_UP_REQUESTS } from './figures.js';
import { createKey, median, ROOT, startCoordinator, startWorker, type RunningProcess } from './processes.js';
import { freshDatabase } from './fresh-db.js';

// The library mode has a bench of its own, with the same scenarios and options.
if (process.argv.includes('--mode') && process.argv[process.argv.indexOf('--mode') + 1] === 'embedded') {
  await import('./embedded.js');
  process.exit(0);
}
// So do the long-haul scenarios (bench/haul.ts): `npm run bench -- --scenario haul|sustained` is `npm run haul -- …`.
if (process.argv.includes('--scenario')) {
  await import('./haul.js');
  process.exit(0);
}

const { values: args } = parseArgs({
  options: {
    mode: { type: 'string' },
    db: { type: 'string', default: 'sqlite' },
    runs: { type: 'string', default: '3' },
    jobs: { type: 'string', default: '20000' },
    coordinators: { type: 'string', default: '1' },
    workers: { type: 'string', default: '2' },
    only: { type: 'string' },
  },
});

const RUNS = Number(args.runs);
const JOBS = Number(args.jobs);
const COORDINATORS = Number(args.coordinators);
const WORKER_PROCESSES = Number(args.workers);
const HANDLERS = join(ROOT, 'dist', 'bench', 'handlers.js');
function usageError(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
}
for (const [name, value] of [
  ['runs', RUNS],
  ['jobs', JOBS],
  ['coordinators', COORDINATORS],
  ['workers', WORKER_PROCESSES],
] as const) {
  if (!Number.isInteger(value) || value < 1) usageError(`--${name} must be a positive integer`);
}
const SCENARIOS = ['enqueue-single', 'enqueue-batch', 'end-to-end', 'latency', 'latency-backlog'];
const selected = new Set((args.only ?? SCENARIOS.join(',')).split(','));

/** Queued jobs of another kind beside the latency-backlog scenario's. */
const BACKLOG = 20_000;

interface Deployment {
  readonly urls: string[];
  readonly adminKey: string;
  readonly workerKey: string;
  stop(): Promise<void>;
}

async function deploy(): Promise<Deployment> {
  const { db, cleanup } = await freshDatabase(args.db ?? 'sqlite', 'bench');
  const adminKey = createKey(db, 'bench', 'bench', 'admin');
  const workerKey = createKey(db, 'bench', 'bench-worker', 'worker');
  const coordinators: RunningProcess[] = [];
  const urls: string[] = [];
  for (let i = 0; i < COORDINATORS; i++) {
    const started = await startCoordinator(db);
    coordinators.push(started.process);
    urls.push(started.url);
  }
  return {
    urls,
    adminKey,
    workerKey,
    async stop() {
      await Promise.all(coordinators.map((c) => c.stop()));
      await cleanup();
    },
  };
}

async function endToEnd(d: Deployment): Promise<number> {
  // The warm-up jobs go first (higher priority) and are not timed: the figure is the steady state of
  // the 20,000, not the JIT compiling the coordinator and the freshly started workers.
  await enqueueBatches(d.urls, d.adminKey, 'warm', WARM_UP_REQUESTS, 'warm-up', 1);
  const { ids } = await enqueueBatches(d.urls, d.adminKey, 'noop', JOBS, 'e2e');
  const perWorker = Math.ceil(32 / WORKER_PROCESSES);
  const workers = Array.from({ length: WORKER_PROCESSES }, (_, i) =>
    startWorker({ url: d.urls[i % d.urls.length] as string, key: d.workerKey, handlers: HANDLERS, concurrency: perWorker, workerId: `bench-${i}` }),
  );
  const client = new LeaseholdClient({ baseUrl: d.urls[0] as string, apiKey: d.adminKey, connections: 2 });
  // Done when nothing is queued or running: two one-row index reads, where /stats would scan every job
  // and compete with the run it measures. The rate comes from the jobs' own timestamps.
  const unfinished = async (): Promise<boolean> =>
    (await client.listJobs({ status: 'queued', limit: 1 })).jobs.length > 0 || (await client.listJobs({ status: 'running', limit: 1 })).jobs.length > 0;
  while (await unfinished()) await new Promise((resolve) => setTimeout(resolve, 100));
  if (((await client.stats()).counts['succeeded'] ?? 0) !== JOBS + WARM_UP_REQUESTS) throw new Error('not every job succeeded');
  await Promise.all(workers.map((w) => w.stop()));
  const rate = await succeededRate(client, 'noop', ids);
  await client.close();
  return rate;
}

async function main(): Promise<void> {
  const figures: Record<string, number[]> = {};
  const record = (name: string, value: number): void => {
    (figures[name] ??= []).push(value);
    process.stdout.write(`  ${name}: ${value.toFixed(name.includes('latency') ? 2 : 0)}\n`);
  };
  // Figures from a shared or busy host mean little without it.
  const load = (): string =>
    loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
  process.stdout.write(
    `leasehold bench: db=${args.db === 'sqlite' ? 'sqlite (fresh file per run)' : 'postgres'}, coordinators=${COORDINATORS}, jobs=${JOBS}, runs=${RUNS}\n`,
  );
  process.stdout.write(`load average at start: ${load()} (${cpus().length} CPUs)\n`);
  for (let run = 1; run <= RUNS; run++) {
    process.stdout.write(`run ${run}\n`);
    for (const scenario of SCENARIOS) {
      if (!selected.has(scenario)) continue;
      const d = await deploy();
      try {
        if (scenario === 'enqueue-single') record('enqueue single jobs/s', await enqueueSingle(d.urls, d.adminKey, 'noop', JOBS, 'bench'));
        if (scenario === 'enqueue-batch') record('enqueue batch jobs/s', (await enqueueBatches(d.urls, d.adminKey, 'noop', JOBS, 'batch')).perSecond);
        if (scenario === 'end-to-end') record('end-to-end jobs/s', await endToEnd(d));
        if (scenario === 'latency' || scenario === 'latency-backlog') {
          if (scenario === 'latency-backlog') await enqueueBatches(d.urls, d.adminKey, 'other', BACKLOG, 'backlog');
          const l = await enqueueToStart({
            // With several coordinators the jobs go to the last one and the worker polls the first.
            enqueueUrl: d.urls[d.urls.length - 1] as string,
            workerUrl: d.urls[0] as string,
            adminKey: d.adminKey,
            workerKey: d.workerKey,
            handlers: HANDLERS,
            kind: 'stamp',
            prefix: 'bench',
          });
          const name = scenario === 'latency' ? 'latency' : 'latency beside backlog';
          record(`${name} p50 ms`, l.p50);
          record(`${name} p99 ms`, l.p99);
        }
      } finally {
        await d.stop();
      }
    }
  }
  process.stdout.write(`\nload average at end: ${load()}\n`);
  process.stdout.write(`medians of ${RUNS} runs (${args.db === 'sqlite' ? 'SQLite' : 'PostgreSQL'}, ${COORDINATORS} coordinator(s), durable commits):\n`);
  for (const [name, values] of Object.entries(figures)) {
    process.stdout.write(
      `  ${name.padEnd(30)} ${median(values).toFixed(name.includes('latency') ? 2 : 0)}   (runs: ${values.map((v) => v.toFixed(name.includes('latency') ? 2 : 0)).join(', ')})\n`,
    );
  }
  const empty = figures['latency p50 ms'];
  const beside = figures['latency beside backlog p50 ms'];
  if (empty !== undefined && beside !== undefined) {
    process.stdout.write(
      `  p50 beside ${BACKLOG.toLocaleString('en-US')} queued of another kind / empty queue: ${(median(beside) / median(empty)).toFixed(2)}\n`,
    );
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
