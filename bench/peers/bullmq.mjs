/**
 * The fastest durable peer, measured the way bench/run.ts measures leasehold,
 * so that both figures come from the same machine on the same day:
 * BullMQ 5 on a Redis started here with `appendonly yes` and
 * `appendfsync always` (every write is fsynced before Redis answers).
 *
 *   enqueue single  Queue.add with 64 in flight, after 2,000 untimed adds
 *   end-to-end      N jobs added in bulk behind 2,000 warm-up jobs; 2 worker
 *                   processes with concurrency 16 each (32 handlers in all)
 *                   run no-op jobs; from the first job's processedOn to the
 *                   last one's finishedOn
 *   latency         500 jobs added 5 ms apart onto an idle queue, 1 worker
 *                   process with concurrency 8; add to handler start
 *
 * Not part of the project's dependencies: `npm run bench:peers` installs it
 * into bench/peers/node_modules with `npm install --no-save` and runs it beside
 * the library (bench/compare.ts). By hand:
 *   npm install --no-save --prefix bench/peers bullmq@5
 *   node bench/peers/bullmq.mjs [--jobs 20000] [--runs 3] [--port 6390]
 * It needs `redis-server` on the PATH and starts its own on --port, in a
 * fresh temporary directory per scenario.
 */

import { fork, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { hostClockMs, percentile, runFigures } from './figures.mjs';

const role = process.argv[2];

if (role === 'worker') {
  const { Worker } = await import('bullmq');
  const [port, concurrency] = process.argv.slice(3).map(Number);
  const worker = new Worker('bench', async (job) => (job.name === 'stamp' ? { handlerStartedAt: hostClockMs() } : undefined), {
    connection: { host: '127.0.0.1', port },
    concurrency,
    removeOnComplete: { count: 1e9 },
    removeOnFail: { count: 1e9 },
  });
  await worker.waitUntilReady();
  process.send?.('ready');
  process.on('SIGTERM', () => void worker.close().then(() => process.exit(0)));
} else {
  const { Queue, QueueEvents } = await import('bullmq');
  const { values } = parseArgs({
    options: { jobs: { type: 'string', default: '20000' }, runs: { type: 'string', default: '3' }, port: { type: 'string', default: '6390' } },
  });
  const JOBS = Number(values.jobs);
  const RUNS = Number(values.runs);
  const PORT = Number(values.port);
  const connection = { host: '127.0.0.1', port: PORT };
  const self = fileURLToPath(import.meta.url);

  const startRedis = async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bullmq-peer-'));
    const redis = spawn(
      'redis-server',
      ['--port', String(PORT), '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '', '--logfile', join(dir, 'log')],
      { stdio: 'ignore' },
    );
    for (;;) {
      const probe = new Queue('probe', { connection: { ...connection, maxRetriesPerRequest: 1, retryStrategy: () => null } });
      try {
        await probe.waitUntilReady();
        await probe.close();
        break;
      } catch {
        await probe.close().catch(() => undefined);
        await sleep(50);
      }
    }
    return async () => {
      redis.kill('SIGTERM');
      await new Promise((resolve) => redis.once('exit', resolve));
      rmSync(dir, { recursive: true, force: true });
    };
  };
  const startWorkers = (count, concurrency) =>
    Promise.all(
      Array.from(
        { length: count },
        () =>
          new Promise((resolve) => {
            const child = fork(self, ['worker', String(PORT), String(concurrency)]);
            child.once('message', () => resolve(child));
          }),
      ),
    );
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

  const enqueueSingle = async () => {
    const queue = new Queue('bench', { connection });
    const run = async (count, prefix) => {
      let next = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (next < count) {
            const i = next++;
            // A job id makes the add idempotent, as leasehold's Idempotency-Key does.
            await queue.add('noop', { i }, { jobId: `${prefix}-${i}` });
          }
        }),
      );
      return count / ((performance.now() - started) / 1000);
    };
    await run(2000, 'warm-up');
    const rate = await run(JOBS, 'single');
    await queue.close();
    return rate;
  };

  const endToEnd = async () => {
    const queue = new Queue('bench', { connection });
    const addBulk = async (name, count) => {
      for (let from = 0; from < count; from += 500) {
        await queue.addBulk(Array.from({ length: Math.min(500, count - from) }, (_, k) => ({ name, data: { i: from + k } })));
      }
    };
    // FIFO: the warm-up jobs run first and are not timed.
    await addBulk('warm', 2000);
    await addBulk('noop', JOBS);
    const workers = await startWorkers(2, 16);
    while ((await queue.getJobCounts('completed')).completed < JOBS + 2000) await sleep(100);
    await stopWorkers(workers);
    let firstStart = Infinity;
    let lastFinish = -Infinity;
    for (let from = 0; ; from += 1000) {
      const jobs = await queue.getJobs(['completed'], from, from + 999);
      if (jobs.length === 0) break;
      for (const job of jobs) {
        if (job.name !== 'noop') continue;
        firstStart = Math.min(firstStart, job.processedOn);
        lastFinish = Math.max(lastFinish, job.finishedOn);
      }
    }
    await queue.close();
    return JOBS / ((lastFinish - firstStart + 1) / 1000);
  };

  const latency = async () => {
    const workers = await startWorkers(1, 8);
    const queue = new Queue('bench', { connection });
    const events = new QueueEvents('bench', { connection });
    await events.waitUntilReady();
    await (await queue.add('stamp', {})).waitUntilFinished(events);
    const sent = [];
    const pending = [];
    for (let i = 0; i < 500; i++) {
      const at = hostClockMs();
      pending.push(queue.add('stamp', { i }).then((job) => sent.push([job, at])));
      await sleep(5);
    }
    await Promise.all(pending);
    const latencies = [];
    for (const [job, at] of sent) {
      await job.waitUntilFinished(events);
      latencies.push((await queue.getJob(job.id)).returnvalue.handlerStartedAt - at);
    }
    await events.close();
    await queue.close();
    await stopWorkers(workers);
    return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
  };

  const { record, printMedians } = runFigures();
  console.log(
    `bullmq peer: redis appendfsync always, jobs=${JOBS}, runs=${RUNS}, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  for (let run = 1; run <= RUNS; run++) {
    console.log(`run ${run}`);
    for (const scenario of ['enqueue-single', 'end-to-end', 'latency']) {
      const stopRedis = await startRedis();
      try {
        if (scenario === 'enqueue-single') record('enqueue single jobs/s', await enqueueSingle());
        if (scenario === 'end-to-end') record('end-to-end jobs/s', await endToEnd());
        if (scenario === 'latency') {
          const figure = await latency();
          record('latency p50 ms', figure.p50);
          record('latency p99 ms', figure.p99);
        }
      } finally {
        await stopRedis();
      }
    }
  }
  printMedians(`medians of ${RUNS} runs (BullMQ, Redis appendfsync always):`);
  process.exit(0);
}
