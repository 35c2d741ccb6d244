/**
 * The measurements bench/run.ts and bench/haul.ts share, each against
 * running coordinators over HTTP (LeaseholdClient, an undici pool):
 * single-enqueue rate (64 in flight), batch-enqueue rate (500 per request, 4
 * in flight), the end-to-end rate of a set of jobs from their own timestamps,
 * and enqueue-to-handler-start latency of jobs sent 5 ms apart onto an idle
 * queue. Idempotency keys start with a caller's prefix, so several
 * measurements can share one database.
 */

import { LeaseholdClient } from '../src/client/index.js';
import type { Job } from '../src/protocol/schemas.js';
import { hostClockMs } from './host-clock.js';
import { percentile, startWorker } from './processes.js';

/** Untimed requests first, so the figure is the steady state and not the JIT compiling the coordinator. */
export const WARM_UP_REQUESTS = 2_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Jobs per second of `count` single POST /jobs with 64 in flight, after WARM_UP_REQUESTS untimed ones of the same kind. */
export async function enqueueSingle(urls: readonly string[], key: string, kind: string, count: number, prefix: string): Promise<number> {
  const clients = urls.map((url) => new LeaseholdClient({ baseUrl: url, apiKey: key, connections: 64 }));
  const run = async (n: number, runPrefix: string): Promise<number> => {
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: 64 }, async (_, lane) => {
        const client = clients[lane % clients.length] as LeaseholdClient;
        while (next < n) {
          const i = next++;
          await client.enqueue({ kind, payload: { i } }, { idempotencyKey: `${runPrefix}-${i}` });
        }
      }),
    );
    return n / ((performance.now() - started) / 1000);
  };
  await run(WARM_UP_REQUESTS, `${prefix}-warm-up`);
  const rate = await run(count, `${prefix}-single`);
  await Promise.all(clients.map((c) => c.close()));
  return rate;
}

/** `count` jobs through POST /jobs/batch (500 per request, 4 in flight): their rate and ids. */
export async function enqueueBatches(
  urls: readonly string[],
  key: string,
  kind: string,
  count: number,
  prefix: string,
  priority = 0,
): Promise<{ readonly perSecond: number; readonly ids: readonly string[] }> {
  const clients = urls.map((url) => new LeaseholdClient({ baseUrl: url, apiKey: key, connections: 8 }));
  const batchSize = 500;
  const ids: string[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 4 }, async (_, lane) => {
      const client = clients[lane % clients.length] as LeaseholdClient;
      while (next < count) {
        const from = next;
        next = Math.min(count, next + batchSize);
        const jobs = Array.from({ length: next - from }, (_, k) => ({ idempotencyKey: `${prefix}-${from + k}`, kind, payload: { i: from + k }, priority }));
        const answer = await client.enqueueBatch(jobs);
        for (const r of answer.results) {
          if (r.status !== 202 || r.job === undefined) throw new Error('a batch item was refused');
          ids.push(r.job.id);
        }
      }
    }),
  );
  const perSecond = count / ((performance.now() - started) / 1000);
  await Promise.all(clients.map((c) => c.close()));
  return { perSecond, ids };
}

/**
 * Jobs per second of the succeeded jobs `ids` of `kind`, from the first one's
 * start to the last one's finish by their own timestamps. Listings are newest
 * first, so when these are the kind's most recent jobs the walk stops after
 * about their number of rows, however much history lies behind them.
 * Resolves once all of them have succeeded.
 */
export async function succeededRate(client: LeaseholdClient, kind: string, ids: readonly string[]): Promise<number> {
  const wanted = new Set(ids);
  for (;;) {
    let firstStart = Infinity;
    let lastFinish = -Infinity;
    let found = 0;
    let cursor: string | null = null;
    do {
      const page = await client.listJobs({ limit: 1000, status: 'succeeded', kind, ...(cursor === null ? {} : { cursor }) });
      let mine = 0;
      for (const job of page.jobs) {
        if (!wanted.has(job.id)) continue;
        mine++;
        firstStart = Math.min(firstStart, Date.parse(job.startedAt ?? job.createdAt));
        lastFinish = Math.max(lastFinish, Date.parse(job.finishedAt ?? job.createdAt));
      }
      found += mine;
      // A page without any of them is past them (older): stop before the history behind.
      cursor = mine === 0 || found === wanted.size ? null : page.nextCursor;
    } while (cursor !== null);
    // Millisecond timestamps: the span is rounded, so count it from the start of the first ms to the end of the last.
    if (found === wanted.size) return wanted.size / ((lastFinish - firstStart + 1) / 1000);
    await sleep(100);
  }
}

export interface LatencyTarget {
  /** Where the jobs are enqueued. */
  readonly enqueueUrl: string;
  /** Where the worker polls. */
  readonly workerUrl: string;
  readonly adminKey: string;
  readonly workerKey: string;
  /** A handlers module whose handler for `kind` returns `{ handlerStartedAt }` (hostClockMs). */
  readonly handlers: string;
  readonly kind: string;
  readonly prefix: string;
}

/** One job of a paced run: its id, and when its enqueue was sent and answered (wall-clock ms, as handlers stamp them). */
export interface PacedJob {
  readonly id: string;
  readonly sentAt: number;
  readonly answeredAt: number;
}

/** Enqueues `count` jobs of `kind` 5 ms apart, each without waiting for the one before, and answers them once all are answered. */
export async function enqueuePaced(client: LeaseholdClient, kind: string, count: number, prefix: string): Promise<PacedJob[]> {
  const sent: PacedJob[] = [];
  const pending: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const sentAt = hostClockMs();
    pending.push(
      client.enqueue({ kind, payload: { i } }, { idempotencyKey: `${prefix}-lat-${i}` }).then((r) => {
        sent.push({ id: r.job.id, sentAt, answeredAt: hostClockMs() });
      }),
    );
    await sleep(5);
  }
  await Promise.all(pending);
  return sent;
}

/** The job once it has succeeded, read every `intervalMs`. */
export async function succeededJob(client: LeaseholdClient, id: string, intervalMs = 20): Promise<Job> {
  let job = await client.getJob(id);
  while (job.status !== 'succeeded') {
    await sleep(intervalMs);
    job = await client.getJob(id);
  }
  return job;
}

/** 500 jobs enqueued 5 ms apart onto an idle queue with one worker (8 handlers): enqueue to handler start, p50 and p99 in ms. */
export async function enqueueToStart(target: LatencyTarget): Promise<{ p50: number; p99: number }> {
  const worker = startWorker({ url: target.workerUrl, key: target.workerKey, handlers: target.handlers, concurrency: 8, workerId: `${target.prefix}-latency` });
  // Enough connections that no enqueue waits for a free one: with 4, an enqueue slower than 20 ms
  // (a loaded host, a remote database) queued the next ones in the bench's own client, and the figure
  // measured that queue instead of the job queue.
  const client = new LeaseholdClient({ baseUrl: target.enqueueUrl, apiKey: target.adminKey, connections: 64 });
  // The worker is ready when it has run one job.
  const warm = await client.enqueue({ kind: target.kind, payload: {} }, { idempotencyKey: `${target.prefix}-lat-warm-up` });
  await succeededJob(client, warm.job.id);
  const sent = await enqueuePaced(client, target.kind, 500, target.prefix);
  const latencies: number[] = [];
  for (const { id, sentAt } of sent) {
    const job = await succeededJob(client, id);
    latencies.push((job.result as { handlerStartedAt: number }).handlerStartedAt - sentAt);
  }
  await worker.stop();
  await client.close();
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}
