/**
 * `npm run haul -- --scenario sustained`: kind A at a steady share of
 * capacity for --minutes, on a coordinator that deletes finished jobs after
 * --retention-minutes: does the database stop growing, and does latency stay
 * flat?
 *
 * One coordinator on a fresh database, --workers worker processes (32
 * handlers in all) for kind A. Capacity is measured first, unless --rate
 * gives the rate: single POST /jobs closed loop (64 in flight) for
 * --capacity-seconds with the workers running, divided by the time until
 * the last of those jobs started. Then open-loop single enqueues
 * (bench/open-loop.ts, Poisson arrivals) at --share of it, one minute at a
 * time. Each job carries its scheduled send time and its handler appends
 * "scheduled started" to a file (bench/haul-handlers.ts), so enqueue-to-start
 * is measured from the scheduled send time without reading jobs back.
 * Per minute: the admitted rate, the enqueue answer's p99, enqueue-to-start
 * p50 and p99, and the database's size (SQLite: file plus WAL; PostgreSQL:
 * pg_total_relation_size of the schema's tables, indexes and TOAST
 * included).
 *
 * Done-when (issue 14): the size at the end within 10% of the size after
 * minute 5, and p99 not trending upward: the Theil–Sen line (the median of
 * the slopes between every two minutes) through the p99 of minutes 5..N
 * rises over that span by less than 20% of the span's median p99, or by less
 * than 1 ms. Theil–Sen rather than least squares, because on a shared
 * machine one minute's p99 can jump several-fold, and a least-squares line
 * tilts with a single such minute near either end; the least-squares slope
 * is printed beside it. Both checks need --minutes 7 or more.
 *
 * Retention: registerKindA is the one place it is set (the kind's
 * `retention` periods, PUT /kinds/A). How often the coordinator purges is
 * its own setting: pass it with --serve-arg (e.g.
 * --serve-arg=--retention-interval-ms=10000 where serve has that flag).
 */

import { closeSync, mkdtempSync, openSync, readdirSync, readSync, rmSync, statSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { LeaseholdApiError, LeaseholdClient } from '../src/client/index.js';
import { EnqueueGenerator, type PhaseResult } from './open-loop.js';
import { freshDatabase } from './fresh-db.js';
import { hostClockMs } from './host-clock.js';
import { createKey, median, percentile, startCoordinator, startWorker } from './processes.js';

export interface SustainedOptions {
  readonly db: string;
  readonly serveArgs: readonly string[];
  readonly workers: number;
  /** The haul handlers module (kind A). */
  readonly handlers: string;
  readonly tenant: string;
  readonly minutes: number;
  /** Share of the measured capacity to offer. */
  readonly share: number;
  /** Jobs per second to offer instead of measuring capacity; null to measure. */
  readonly rate: number | null;
  readonly capacitySeconds: number;
  readonly retentionMs: number;
}

interface Minute {
  readonly minute: number;
  readonly phase: PhaseResult;
  readonly started: number;
  readonly p50: number | null;
  readonly p99: number | null;
  /** Admitted jobs whose start was not seen within the wait. */
  readonly missing: number;
  readonly sizeBytes: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * RETENTION: the single place the sustained run sets how long kind A's
 * finished jobs are kept. A coordinator whose kinds carry no `retention`
 * refuses the field (400); the run then goes on without retention and says
 * so, and its size check is expected to fail.
 */
async function registerKindA(client: LeaseholdClient, retentionMs: number): Promise<string> {
  const definition = { maxAttempts: 5, retention: { succeededMs: retentionMs, cancelledMs: retentionMs, deadMs: retentionMs } };
  try {
    await client.putKind('A', definition);
    return `kind A keeps finished jobs ${retentionMs / 1000} s`;
  } catch (error) {
    if (error instanceof LeaseholdApiError && error.status === 400)
      return `WARNING: the coordinator refused kind A's retention (${error.message}); running without retention`;
    throw error;
  }
}

/** Reads the handlers' "scheduled started" lines as they are appended, whole lines only. */
class StampReader {
  private readonly offsets = new Map<string, number>();
  readonly scheduled: number[] = [];
  readonly started: number[] = [];

  constructor(private readonly dir: string) {}

  poll(): void {
    for (const name of readdirSync(this.dir)) {
      const path = join(this.dir, name);
      const from = this.offsets.get(path) ?? 0;
      const size = statSync(path).size;
      if (size <= from) continue;
      // Only what was appended since the last poll: the files grow by a line per job.
      const chunk = Buffer.alloc(size - from);
      const fd = openSync(path, 'r');
      try {
        readSync(fd, chunk, 0, chunk.length, from);
      } finally {
        closeSync(fd);
      }
      const text = chunk.toString('utf8');
      const end = text.lastIndexOf('\n') + 1;
      for (const line of text.slice(0, end).split('\n')) {
        const [at, started] = line.split(' ').map(Number);
        if (at !== undefined && started !== undefined && Number.isFinite(at) && Number.isFinite(started)) {
          this.scheduled.push(at);
          this.started.push(started);
        }
      }
      this.offsets.set(path, from + Buffer.byteLength(text.slice(0, end)));
    }
  }

  /** Enqueue-to-start of the jobs scheduled in [from, to). */
  between(from: number, to: number): number[] {
    const latencies: number[] = [];
    for (let i = 0; i < this.scheduled.length; i++) {
      const at = this.scheduled[i] as number;
      if (at >= from && at < to) latencies.push((this.started[i] as number) - at);
    }
    return latencies;
  }

  /** Waits until `expected` jobs scheduled in [from, to) have started, or `timeoutMs` passed. */
  async await(from: number, to: number, expected: number, timeoutMs: number): Promise<number[]> {
    const until = performance.now() + timeoutMs;
    for (;;) {
      this.poll();
      const latencies = this.between(from, to);
      if (latencies.length >= expected || performance.now() > until) return latencies;
      await sleep(100);
    }
  }
}

export async function runSustained(options: SustainedOptions): Promise<void> {
  const load = (): string =>
    loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
  process.stdout.write(
    `leasehold sustained: db=${options.db === 'sqlite' ? 'sqlite' : 'postgres'}, minutes=${options.minutes}, share=${options.share}, serve args: ${options.serveArgs.join(' ') || '(none)'}\n`,
  );
  process.stdout.write(`load average at start: ${load()} (${cpus().length} CPUs)\n`);
  const fresh = await freshDatabase(options.db, 'sustained');
  const stampsDir = mkdtempSync(join(tmpdir(), 'leasehold-stamps-'));
  const adminKey = createKey(fresh.db, options.tenant, 'bench', 'admin');
  const workerKey = createKey(fresh.db, options.tenant, 'bench-worker', 'worker');
  const { url, process: coordinator } = await startCoordinator(fresh.db, options.serveArgs);
  const client = new LeaseholdClient({ baseUrl: url, apiKey: adminKey, connections: 2 });
  const perWorker = Math.ceil(32 / options.workers);
  const workers = Array.from({ length: options.workers }, (_, i) =>
    startWorker({
      url,
      key: workerKey,
      handlers: options.handlers,
      concurrency: perWorker,
      workerId: `sustained-${i}`,
      env: { LEASEHOLD_BENCH_STAMPS: stampsDir },
    }),
  );
  const generator = new EnqueueGenerator(
    { url, key: adminKey, connections: 256, kind: 'A', stampPayload: true },
    `sustained-${Date.now()}`,
    coordinator.child.pid ?? null,
  );
  const stamps = new StampReader(stampsDir);
  try {
    process.stdout.write(`${await registerKindA(client, options.retentionMs)}\n`);
    if (await fresh.autovacuumOff()) {
      process.stdout.write('note: autovacuum is off on this PostgreSQL server; the coordinator vacuums the queue tables after each retention run\n');
    }
    await Promise.all(workers.map((w) => w.ready));
    const rate = options.rate ?? (await measureCapacity(generator, stamps, options.capacitySeconds)) * options.share;
    process.stdout.write(`offering ${rate.toFixed(0)} jobs/s, open loop\n`);
    process.stdout.write(
      `${'minute'.padStart(6)}${'admitted/s'.padStart(12)}${'enqueue p99'.padStart(13)}${'start p50'.padStart(11)}${'start p99'.padStart(11)}${'missing'.padStart(9)}${'size MB'.padStart(10)}\n`,
    );
    const minutes: Minute[] = [];
    let previous: { minute: number; phase: PhaseResult; from: number; to: number } | null = null;
    for (let minute = 1; minute <= options.minutes + 1; minute++) {
      // The next minute's load starts at once; the last one is summarized while it runs.
      const from = hostClockMs();
      const running = minute <= options.minutes ? generator.openLoop(`minute ${minute}`, rate, 60_000, 100 + minute) : null;
      if (previous !== null) {
        const latencies = await stamps.await(previous.from, previous.to, previous.phase.admitted, 30_000);
        const row: Minute = {
          minute: previous.minute,
          phase: previous.phase,
          started: latencies.length,
          p50: latencies.length === 0 ? null : percentile(latencies, 50),
          p99: latencies.length === 0 ? null : percentile(latencies, 99),
          missing: Math.max(0, previous.phase.admitted - latencies.length),
          sizeBytes: await fresh.sizeBytes(),
        };
        minutes.push(row);
        printMinute(row);
      }
      if (running !== null) previous = { minute, phase: await running, from, to: hostClockMs() };
    }
    printChecks(minutes);
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    await generator.close();
    await client.close();
    await coordinator.stop();
    await fresh.cleanup();
    rmSync(stampsDir, { recursive: true, force: true });
  }
  process.stdout.write(`load average at end: ${load()}\n`);
}

/** Jobs per second the queue carries end to end: a closed-loop burst, over the time until its last job started. */
async function measureCapacity(generator: EnqueueGenerator, stamps: StampReader, seconds: number): Promise<number> {
  await generator.closedLoop('warm-up', 64, 2_000);
  const from = hostClockMs();
  const burst = await generator.closedLoop('capacity', 64, seconds * 1000);
  const to = hostClockMs();
  const latencies = await stamps.await(from, to, burst.admitted, 120_000);
  stamps.poll();
  let lastStart = to;
  for (let i = 0; i < stamps.scheduled.length; i++) {
    const at = stamps.scheduled[i] as number;
    if (at >= from && at < to) lastStart = Math.max(lastStart, stamps.started[i] as number);
  }
  const capacity = latencies.length / ((lastStart - from) / 1000);
  process.stdout.write(
    `capacity: ${burst.admitted} enqueued in ${seconds} s (${burst.admittedPerSecond.toFixed(0)}/s), all started after ${((lastStart - from) / 1000).toFixed(1)} s: ${capacity.toFixed(0)} jobs/s end to end\n`,
  );
  return capacity;
}

function printMinute(row: Minute): void {
  const ms = (v: number | null): string => (v === null ? '-' : v.toFixed(1));
  process.stdout.write(
    `${String(row.minute).padStart(6)}${row.phase.admittedPerSecond.toFixed(0).padStart(12)}${ms(row.phase.admittedP99Ms).padStart(13)}` +
      `${ms(row.p50).padStart(11)}${ms(row.p99).padStart(11)}${String(row.missing).padStart(9)}${(row.sizeBytes / 1024 / 1024).toFixed(1).padStart(10)}\n`,
  );
}

/** Least-squares slope of y over x. */
function leastSquaresSlope(points: readonly (readonly [number, number])[]): number {
  const n = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const sxy = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const sxx = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : sxy / sxx;
}

/** Theil–Sen slope: the median of the slopes between every two points, which one outlying minute barely moves. */
function theilSenSlope(points: readonly (readonly [number, number])[]): number {
  const slopes: number[] = [];
  for (let i = 0; i < points.length; i++) {
    for (let j = i + 1; j < points.length; j++) {
      const [xi, yi] = points[i] as readonly [number, number];
      const [xj, yj] = points[j] as readonly [number, number];
      if (xj !== xi) slopes.push((yj - yi) / (xj - xi));
    }
  }
  return slopes.length === 0 ? 0 : median(slopes);
}

export interface SustainedVerdict {
  readonly sizeAtFiveBytes: number;
  readonly sizeAtEndBytes: number;
  /** (end - minute 5) / minute 5. */
  readonly growth: number;
  readonly sizeOk: boolean;
  readonly lastMinute: number;
  /** Theil–Sen slope of p99 over minutes 5..N, ms per minute: the one checked. */
  readonly p99PerMinute: number;
  /** Least-squares slope of the same points, for comparison. */
  readonly p99LeastSquaresPerMinute: number;
  /** That slope over the span 5..N, ms. */
  readonly p99Rise: number;
  readonly p99Median: number;
  readonly trendOk: boolean;
}

/** Issue 14's done-when for the sustained run; null with fewer than three minutes from minute 5 on. */
export function sustainedVerdict(minutes: readonly Pick<Minute, 'minute' | 'p99' | 'sizeBytes'>[]): SustainedVerdict | null {
  const fifth = minutes.find((m) => m.minute === 5);
  const last = minutes[minutes.length - 1];
  const points = minutes.filter((m) => m.minute >= 5 && m.p99 !== null).map((m) => [m.minute, m.p99 as number] as const);
  if (fifth === undefined || last === undefined || points.length < 3) return null;
  const growth = (last.sizeBytes - fifth.sizeBytes) / fifth.sizeBytes;
  const p99PerMinute = theilSenSlope(points);
  const p99Rise = p99PerMinute * (last.minute - 5);
  const p99Median = median(points.map(([, y]) => y));
  return {
    sizeAtFiveBytes: fifth.sizeBytes,
    sizeAtEndBytes: last.sizeBytes,
    growth,
    sizeOk: Math.abs(growth) <= 0.1,
    lastMinute: last.minute,
    p99PerMinute,
    p99LeastSquaresPerMinute: leastSquaresSlope(points),
    p99Rise,
    p99Median,
    trendOk: p99Rise < Math.max(1, 0.2 * p99Median),
  };
}

function printChecks(minutes: readonly Minute[]): void {
  const v = sustainedVerdict(minutes);
  if (v === null) {
    process.stdout.write('done-when: not checked (needs --minutes 7 or more)\n');
    return;
  }
  const mb = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);
  const missing = minutes.reduce((s, m) => s + m.missing, 0);
  process.stdout.write(
    `size: ${mb(v.sizeAtFiveBytes)} MB after minute 5, ${mb(v.sizeAtEndBytes)} MB at the end (${(v.growth * 100).toFixed(1)}%): ${v.sizeOk ? 'ok' : 'FAIL'} (within 10%)\n` +
      `p99 trend over minutes 5..${v.lastMinute}: ${v.p99PerMinute.toFixed(3)} ms/minute (Theil–Sen; least squares ${v.p99LeastSquaresPerMinute.toFixed(3)}), a rise of ${v.p99Rise.toFixed(2)} ms against a median p99 of ${v.p99Median.toFixed(2)} ms: ` +
      `${v.trendOk ? 'ok' : 'FAIL'} (under 20% of the median or under 1 ms)\n`,
  );
  if (missing > 0) process.stdout.write(`warning: ${missing} admitted jobs were not seen to start within 30 s of their minute\n`);
  process.stdout.write(`done-when: ${v.sizeOk && v.trendOk && missing === 0 ? 'PASS' : 'FAIL'}\n`);
}
