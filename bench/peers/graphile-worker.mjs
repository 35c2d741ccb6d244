/**
 * The PostgreSQL peer, measured the way bench/run.ts and bench/embedded.ts
 * measure leasehold, on the same machine on the same day: graphile-worker on
 * the machine's PostgreSQL (`synchronous_commit=on`), with its batching
 * options on (`localQueue`, `completeJobBatchDelay`).
 *
 *   enqueue single  addJob with 64 in flight, after 2,000 untimed adds
 *   end-to-end      N jobs added (32 in flight, untimed) behind 2,000 warm-up jobs of higher priority;
 *                   2 worker processes with concurrency 16 each (32 handlers) run no-op jobs;
 *                   from the first handler start to the last handler end (graphile-worker deletes
 *                   finished jobs, so the handlers report their own times)
 *   latency         500 jobs added 5 ms apart onto an idle queue, 1 worker process with concurrency 8;
 *                   add to handler start
 *
 * Not part of the project's dependencies: `npm run bench:peers` installs it
 * into bench/peers/node_modules with `npm install --no-save` and runs it beside
 * the library (bench/compare.ts). By hand:
 *   npm install --no-save --prefix bench/peers graphile-worker@0.16 pg
 *   node bench/peers/graphile-worker.mjs [--db postgres://postgres@127.0.0.1:5432/test] [--jobs 20000] [--runs 3]
 * Each scenario runs in a fresh schema of its own, dropped afterwards.
 */

import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { hostClockMs, percentile, runFigures } from './figures.mjs';

const role = process.argv[2];

/** graphile-worker's options for a schema: its batching on, as its docs recommend for throughput. */
function preset(connectionString, schema, concurrency) {
  return {
    worker: {
      connectionString,
      schema,
      concurrentJobs: concurrency,
      maxPoolSize: concurrency + 2,
      pollInterval: 2_000,
      localQueue: { size: 500 },
      completeJobBatchDelay: 1,
      failJobBatchDelay: 1,
    },
  };
}

if (role === 'worker') {
  const { run } = await import('graphile-worker');
  const [connectionString, schema, concurrencyText] = process.argv.slice(3);
  let firstStart = Infinity;
  let lastEnd = -Infinity;
  const starts = [];
  const runner = await run({
    preset: preset(connectionString, schema, Number(concurrencyText)),
    noHandleSignals: true,
    taskList: {
      warm: async () => undefined,
      noop: async () => {
        firstStart = Math.min(firstStart, hostClockMs());
        lastEnd = Math.max(lastEnd, hostClockMs());
      },
      stamp: async (payload) => {
        starts.push([payload.i, hostClockMs()]);
      },
    },
  });
  process.send?.('ready');
  process.on('message', (message) => {
    if (message !== 'report') return;
    process.send?.({ firstStart, lastEnd, starts });
  });
  process.on('SIGTERM', () => void runner.stop().then(() => process.exit(0)));
} else {
  const { makeWorkerUtils } = await import('graphile-worker');
  const pg = (await import('pg')).default;
  const { values } = parseArgs({
    options: {
      db: { type: 'string', default: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' },
      jobs: { type: 'string', default: '20000' },
      runs: { type: 'string', default: '3' },
    },
  });
  const DB = values.db;
  const JOBS = Number(values.jobs);
  const RUNS = Number(values.runs);
  const self = fileURLToPath(import.meta.url);

  const fresh = async () => {
    const schema = `gw_bench_${randomBytes(4).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: DB, max: 70 });
    const utils = await makeWorkerUtils({ pgPool: pool, schema });
    await utils.migrate();
    return {
      schema,
      pool,
      utils,
      async drop() {
        await utils.release();
        await pool.query(`DROP SCHEMA ${schema} CASCADE`);
        await pool.end();
      },
    };
  };
  const startWorkers = (schema, count, concurrency) =>
    Promise.all(
      Array.from(
        { length: count },
        () =>
          new Promise((resolve) => {
            const child = fork(self, ['worker', DB, schema, String(concurrency)]);
            child.once('message', () => resolve(child));
          }),
      ),
    );
  const report = (child) =>
    new Promise((resolve) => {
      child.once('message', resolve);
      child.send('report');
    });
  const stopWorkers = (children) =>
    Promise.all(
      children.map(
        (child) =>
          new Promise((resolve) => {
            child.once('exit', resolve);
            child.kill('SIGTERM');
          }),
      ),
    );
  const remaining = async (pool, schema) => Number((await pool.query(`SELECT count(*) AS n FROM ${schema}._private_jobs`)).rows[0].n);
  // graphile-worker 0.16's WorkerUtils adds one job a call: 32 adds in flight fill the queue before timing starts.
  const addBatches = async (utils, task, count, priority) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < count) {
          const i = next++;
          await utils.addJob(task, { i }, { priority });
        }
      }),
    );
  };

  const enqueueSingle = async () => {
    const db = await fresh();
    try {
      const run = async (count, prefix) => {
        let next = 0;
        const started = performance.now();
        await Promise.all(
          Array.from({ length: 64 }, async () => {
            while (next < count) {
              const i = next++;
              // A job key makes the add idempotent, as leasehold's Idempotency-Key does.
              await db.utils.addJob('noop', { i }, { jobKey: `${prefix}-${i}` });
            }
          }),
        );
        return count / ((performance.now() - started) / 1000);
      };
      await run(2000, 'warm-up');
      return await run(JOBS, 'single');
    } finally {
      await db.drop();
    }
  };

  const endToEnd = async () => {
    const db = await fresh();
    try {
      // graphile-worker runs lower numbers first: the warm-up jobs go first and are not timed.
      await addBatches(db.utils, 'warm', 2000, -1);
      await addBatches(db.utils, 'noop', JOBS, 0);
      const workers = await startWorkers(db.schema, 2, 16);
      while ((await remaining(db.pool, db.schema)) > 0) await sleep(50);
      const reports = await Promise.all(workers.map(report));
      await stopWorkers(workers);
      const first = Math.min(...reports.map((r) => r.firstStart));
      const last = Math.max(...reports.map((r) => r.lastEnd));
      return JOBS / ((last - first) / 1000);
    } finally {
      await db.drop();
    }
  };

  const latency = async () => {
    const db = await fresh();
    try {
      const workers = await startWorkers(db.schema, 1, 8);
      const sent = new Map();
      for (let i = 0; i < 500; i++) {
        sent.set(i, hostClockMs());
        await db.utils.addJob('stamp', { i });
        await sleep(5);
      }
      while ((await remaining(db.pool, db.schema)) > 0) await sleep(50);
      const [{ starts }] = await Promise.all(workers.map(report));
      await stopWorkers(workers);
      const latencies = starts.map(([i, at]) => at - sent.get(i));
      return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
    } finally {
      await db.drop();
    }
  };

  const { record, printMedians } = runFigures();
  console.log(
    `graphile-worker peer: localQueue 500, completeJobBatchDelay 1 ms, jobs=${JOBS}, runs=${RUNS}, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  for (let run = 1; run <= RUNS; run++) {
    console.log(`run ${run}`);
    record('enqueue single jobs/s', await enqueueSingle());
    record('end-to-end jobs/s', await endToEnd());
    const figure = await latency();
    record('latency p50 ms', figure.p50);
    record('latency p99 ms', figure.p99);
  }
  printMedians(`medians of ${RUNS} runs (graphile-worker):`);
  process.exit(0);
}
