/**
 * `npm run bench -- --mode embedded`: the library mode, measured the way
 * bench/run.ts measures the coordinator, each scenario on a fresh database and
 * reported as the median of several runs, every commit durable (SQLite
 * `synchronous=FULL`, PostgreSQL `synchronous_commit=on`).
 *
 *   enqueue-single  N queue.enqueue() calls with 64 in flight in this process (after 2,000 untimed ones)
 *   end-to-end      N no-op jobs already enqueued (behind 2,000 warm-up jobs of higher priority);
 *                   --workers worker processes (openQueue + Worker) with 32 handlers in all; from the
 *                   first job's start to the last one's finish, by the jobs' own timestamps
 *   latency         500 jobs enqueued 5 ms apart from this process onto an idle queue, one worker
 *                   process with 8 handlers waiting; from the enqueue call to the handler's start
 *                   (both read the host's monotonic clock, host-clock.ts), p50 and p99
 *
 * Options: --db sqlite|postgres://… (default: a fresh SQLite file per run), --runs 3, --jobs 20000,
 * --workers 2, --only a,b. BENCH_WORKER_PROF=<dir> writes a CPU profile of each worker process there.
 * The peers, measured the same way: bench/peers/.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { openQueue, type Queue } from '../src/index.js';
import { freshDatabase } from './fresh-db.js';
import { hostClockMs } from './host-clock.js';
import { median, percentile, ROOT } from './processes.js';

const { values: args } = parseArgs({
  options: {
    mode: { type: 'string' },
    db: { type: 'string', default: 'sqlite' },
    runs: { type: 'string', default: '3' },
    jobs: { type: 'string', default: '20000' },
    workers: { type: 'string', default: '2' },
    only: { type: 'string' },
  },
  strict: false,
});

const RUNS = Number(args.runs);
const JOBS = Number(args.jobs);
const WORKER_PROCESSES = Number(args.workers);
const selected = new Set(String(args.only ?? 'enqueue-single,end-to-end,latency').split(','));
const WARM_UP = 2_000;
const WORKER_SCRIPT = join(ROOT, 'dist', 'bench', 'embedded-worker.js');

async function withQueue<T>(name: string, work: (queue: Queue, db: string) => Promise<T>): Promise<T> {
  const { db, cleanup } = await freshDatabase(String(args.db), name);
  const queue = await openQueue({ db, tenant: 'bench' });
  try {
    return await work(queue, db);
  } finally {
    await queue.close();
    await cleanup();
  }
}

/** Node's CPU profiler for the worker processes, when BENCH_WORKER_PROF names a directory. */
function workerProfileFlags(): string[] {
  const dir = process.env['BENCH_WORKER_PROF'];
  return dir === undefined || dir === '' ? [] : ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

async function startWorkers(db: string, count: number, concurrency: number): Promise<ChildProcess[]> {
  const children = Array.from({ length: count }, (_, i) =>
    spawn(process.execPath, [...workerProfileFlags(), WORKER_SCRIPT, db, String(concurrency), `embedded-${i}`], { stdio: ['ignore', 'pipe', 'inherit'] }),
  );
  await Promise.all(
    children.map(async (child) => {
      const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
      for await (const line of lines) if (line === 'ready') return;
      throw new Error('a worker process ended before it was ready');
    }),
  );
  return children;
}

async function stopWorkers(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    }),
  );
}

async function enqueueSingle(queue: Queue, count: number, prefix: string): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < count) {
        const i = next++;
        await queue.enqueue({ kind: 'noop', payload: { i }, idempotencyKey: `${prefix}-${i}` });
      }
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

async function enqueueBatches(queue: Queue, kind: string, count: number, prefix: string, priority = 0): Promise<void> {
  for (let from = 0; from < count; from += 500) {
    const jobs = Array.from({ length: Math.min(500, count - from) }, (_, k) => ({
      kind,
      payload: { i: from + k },
      idempotencyKey: `${prefix}-${from + k}`,
      priority,
    }));
    const results = await queue.enqueueMany(jobs);
    if (results.some((r) => r.status !== 202)) throw new Error('a batch item was refused');
  }
}

/** Every job of `kind`, through the listing's pages. */
async function jobsOf(queue: Queue, kind: string): Promise<{ createdAt: number; startedAt: number | null; finishedAt: number | null }[]> {
  const jobs: { createdAt: number; startedAt: number | null; finishedAt: number | null }[] = [];
  let cursor: string | undefined;
  do {
    const page = await queue.list({ kind, limit: 1_000, ...(cursor === undefined ? {} : { cursor }) });
    for (const job of page.jobs) {
      jobs.push({
        createdAt: Date.parse(job.createdAt),
        startedAt: job.startedAt === null ? null : Date.parse(job.startedAt),
        finishedAt: job.finishedAt === null ? null : Date.parse(job.finishedAt),
      });
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
  return jobs;
}

async function untilFinished(queue: Queue, total: number): Promise<void> {
  for (;;) {
    const stats = await queue.stats();
    if ((stats.counts.succeeded ?? 0) >= total) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const scenarios: Record<string, () => Promise<Record<string, number>>> = {
  'enqueue-single': () =>
    withQueue('embedded-single', async (queue) => {
      await enqueueSingle(queue, WARM_UP, 'warm-up');
      return { perSecond: await enqueueSingle(queue, JOBS, 'single') };
    }),
  'end-to-end': () =>
    withQueue('embedded-e2e', async (queue, db) => {
      await enqueueBatches(queue, 'warm', WARM_UP, 'warm-up', 1);
      await enqueueBatches(queue, 'noop', JOBS, 'e2e');
      const workers = await startWorkers(db, WORKER_PROCESSES, Math.ceil(32 / WORKER_PROCESSES));
      try {
        await untilFinished(queue, WARM_UP + JOBS);
      } finally {
        await stopWorkers(workers);
      }
      const jobs = await jobsOf(queue, 'noop');
      const first = Math.min(...jobs.map((j) => j.startedAt ?? Number.POSITIVE_INFINITY));
      const last = Math.max(...jobs.map((j) => j.finishedAt ?? 0));
      return { perSecond: JOBS / ((last - first) / 1000) };
    }),
  latency: () =>
    withQueue('embedded-latency', async (queue, db) => {
      const workers = await startWorkers(db, 1, 8);
      // Both readings are of the host's monotonic clock (host-clock.ts), sub-millisecond: taken here before the
      // enqueue call, and by the handler in its worker process as it starts (its result).
      const sentAt = new Map<string, number>();
      try {
        for (let i = 0; i < 500; i++) {
          const before = hostClockMs();
          const job = await queue.enqueue({ kind: 'stamp', payload: { i }, idempotencyKey: `latency-${i}` });
          sentAt.set(job.id, before);
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        await untilFinished(queue, 500);
      } finally {
        await stopWorkers(workers);
      }
      const waits: number[] = [];
      for (const [id, before] of sentAt) {
        const { value } = await queue.result(id);
        waits.push((value as { handlerStartedAt: number }).handlerStartedAt - before);
      }
      return { p50Ms: percentile(waits, 50), p99Ms: percentile(waits, 99) };
    }),
};

console.log(
  `bench (embedded): ${cpus().length} cores, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}; db ${String(args.db).startsWith('postgres') ? 'postgres' : 'sqlite'}, ${RUNS} runs, ${JOBS} jobs, ${WORKER_PROCESSES} worker processes`,
);
// The medians by `scenario.figure`, for bench/compare.ts, which reads the last line.
const medians: Record<string, number> = {};
for (const [name, run] of Object.entries(scenarios)) {
  if (!selected.has(name)) continue;
  const results: Record<string, number>[] = [];
  for (let i = 0; i < RUNS; i++) results.push(await run());
  const keys = Object.keys(results[0] ?? {});
  const line = keys.map((key) => {
    const values = results.map((r) => r[key] as number);
    medians[`${name}.${key}`] = median(values);
    return `${key} ${median(values).toFixed(key.endsWith('Ms') ? 2 : 0)} [${Math.min(...values).toFixed(key.endsWith('Ms') ? 2 : 0)}–${Math.max(...values).toFixed(key.endsWith('Ms') ? 2 : 0)}]`;
  });
  console.log(`${name.padEnd(16)} ${line.join(', ')}`);
}
console.log(`figures ${JSON.stringify(medians)}`);
