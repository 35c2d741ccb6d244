/**
 * Load generation for the overload benchmark and its short test: single
 * enqueues (POST /jobs) sent over an undici pool, either closed-loop (a fixed
 * number of lanes, each sending when its last answer came back: the capacity)
 * or open-loop (a fixed schedule of send times with Poisson gaps at a given
 * rate; a request goes out on schedule however many are still outstanding).
 *
 * Open-loop latency is measured from the scheduled send time, not from when
 * the request actually left, so queueing anywhere — in the generator, the
 * sockets or the coordinator — shows in it instead of being hidden by a
 * generator that slowed down with the server (coordinated omission). How
 * late the generator itself sent is reported apart (send lag), so a
 * generator short of CPU is visible.
 */

import { readFileSync } from 'node:fs';
import { Pool } from 'undici';
import { hostClockMs } from './host-clock.js';
import { percentile } from './processes.js';
import { seededRandom } from './seeded-random.js';

export interface EnqueueTarget {
  readonly url: string;
  /** A producer or admin key. */
  readonly key: string;
  /** Sockets to the coordinator; enough that requests do not queue in the generator. */
  readonly connections: number;
  /** Bytes of padding in each job's payload (a realistic payload costs the coordinator more than `{"i":1}`). */
  readonly payloadBytes?: number;
  /** The kind enqueued; default `noop`. */
  readonly kind?: string;
  /** Puts the scheduled send time (hostClockMs) in each payload as `at`, for handlers that measure enqueue-to-start. */
  readonly stampPayload?: boolean;
}

/** One answer to POST /jobs as the generator saw it. */
interface Outcome {
  /** From the scheduled send time. */
  readonly latencyMs: number;
  /** From when the generator actually made the request. */
  readonly sinceSentMs: number;
  readonly status: number;
  /** A 503 with Retry-After and the code `overloaded`. */
  readonly wellFormedRefusal: boolean;
  readonly jobId: string | null;
}

export interface PhaseResult {
  readonly label: string;
  /** The rate the schedule offered (open loop) or null (closed loop). */
  readonly offeredPerSecond: number | null;
  readonly durationMs: number;
  readonly sent: number;
  /** 202 answers. */
  readonly admitted: number;
  readonly admittedPerSecond: number;
  /** 503 answers. */
  readonly refused: number;
  /** 503s without Retry-After or without the code `overloaded`. */
  readonly malformedRefusals: number;
  /** Answers that were neither 202 nor 503, by status; 'error' for requests that got no answer. */
  readonly otherStatuses: Readonly<Record<string, number>>;
  readonly admittedP50Ms: number | null;
  readonly admittedP99Ms: number | null;
  readonly admittedMaxMs: number | null;
  /** Admitted p99 from when the request was actually made: without the generator's own lateness. */
  readonly admittedSinceSentP99Ms: number | null;
  readonly refusedP99Ms: number | null;
  /** How late the generator sent, p99 (open loop only). */
  readonly sendLagP99Ms: number | null;
  /** CPU the generator process used during the phase, as a share of one core. */
  readonly generatorCpuShare: number;
  /** CPU the coordinator process used during the phase, as a share of one core (null without a pid). */
  readonly coordinatorCpuShare: number | null;
  /** Largest coordinator RSS sampled during the phase (null without a pid). */
  readonly coordinatorPeakRssBytes: number | null;
  /** Ids of the admitted jobs. */
  readonly admittedIds: readonly string[];
}

export class EnqueueGenerator {
  private readonly pool: Pool;
  private readonly headers: Record<string, string>;
  private readonly padding: string;
  private readonly kind: string;
  private readonly stampPayload: boolean;
  /** hostClockMs() minus performance.now(): both are monotonic, so it stays put. */
  private readonly hostClockOffsetMs = hostClockMs() - performance.now();
  private next = 0;

  constructor(
    target: EnqueueTarget,
    /** Unique per run so idempotency keys never replay an earlier job. */
    private readonly keyPrefix: string,
    /** The coordinator's pid, for its CPU time and RSS. */
    private readonly coordinatorPid: number | null,
  ) {
    this.pool = new Pool(target.url, { connections: target.connections, pipelining: 1, keepAliveTimeout: 60_000 });
    this.headers = { authorization: `Bearer ${target.key}`, 'content-type': 'application/json' };
    this.padding = 'x'.repeat(target.payloadBytes ?? 0);
    this.kind = JSON.stringify(target.kind ?? 'noop');
    this.stampPayload = target.stampPayload ?? false;
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  /** `lanes` requests in flight at all times for `durationMs`. */
  async closedLoop(label: string, lanes: number, durationMs: number): Promise<PhaseResult> {
    const meter = this.startMeter();
    const outcomes: Outcome[] = [];
    const started = performance.now();
    const until = started + durationMs;
    await Promise.all(
      Array.from({ length: lanes }, async () => {
        while (performance.now() < until) {
          const sentAt = performance.now();
          outcomes.push(await this.enqueue(sentAt));
        }
      }),
    );
    return summarize(label, null, performance.now() - started, outcomes, [], meter.stop());
  }

  /** Requests at Poisson-distributed times averaging `ratePerSecond`, for `durationMs`; waits for every answer. */
  async openLoop(label: string, ratePerSecond: number, durationMs: number, seed = 1): Promise<PhaseResult> {
    const schedule = poissonSchedule(ratePerSecond, durationMs, seed);
    const meter = this.startMeter();
    const answers: Promise<Outcome>[] = [];
    const lags: number[] = [];
    const started = performance.now() + 5;
    let i = 0;
    await new Promise<void>((resolve) => {
      const tick = (): void => {
        const now = performance.now();
        while (i < schedule.length && started + (schedule[i] as number) <= now) {
          const due = started + (schedule[i] as number);
          lags.push(now - due);
          answers.push(this.enqueue(due));
          i++;
        }
        if (i >= schedule.length) {
          resolve();
          return;
        }
        // Timers have a 1 ms grain: requests due within it go out together on the next tick (their lag is reported).
        setTimeout(tick, Math.max(0, Math.floor(started + (schedule[i] as number) - performance.now())));
      };
      tick();
    });
    const outcomes = await Promise.all(answers);
    return summarize(label, ratePerSecond, durationMs, outcomes, lags, meter.stop());
  }

  private async enqueue(dueAt: number): Promise<Outcome> {
    const n = this.next++;
    const sentAt = performance.now();
    try {
      const { statusCode, headers, body } = await this.pool.request({
        method: 'POST',
        path: '/jobs',
        headers: { ...this.headers, 'idempotency-key': `${this.keyPrefix}-${n}` },
        body: `{"kind":${this.kind},"payload":{"i":${n},"pad":"${this.padding}"${this.stampPayload ? `,"at":${dueAt + this.hostClockOffsetMs}` : ''}}}`,
      });
      const text = await body.text();
      const answeredAt = performance.now();
      const latencyMs = answeredAt - dueAt;
      const sinceSentMs = answeredAt - sentAt;
      if (statusCode === 202) return { latencyMs, sinceSentMs, status: statusCode, wellFormedRefusal: false, jobId: (JSON.parse(text) as { id: string }).id };
      const code = statusCode === 503 ? errorCode(text) : null;
      const retryAfter = headers['retry-after'];
      const wellFormedRefusal = statusCode === 503 && code === 'overloaded' && typeof retryAfter === 'string' && /^\d+$/.test(retryAfter);
      return { latencyMs, sinceSentMs, status: statusCode, wellFormedRefusal, jobId: null };
    } catch {
      return { latencyMs: performance.now() - dueAt, sinceSentMs: performance.now() - sentAt, status: 0, wellFormedRefusal: false, jobId: null };
    }
  }

  private startMeter(): { stop(): Meter } {
    const cpuBefore = process.cpuUsage();
    const coordinatorCpuBefore = this.coordinatorPid === null ? null : processCpuMs(this.coordinatorPid);
    const startedAt = performance.now();
    let peakRss = 0;
    const sample = (): void => {
      if (this.coordinatorPid !== null) peakRss = Math.max(peakRss, processRssBytes(this.coordinatorPid) ?? 0);
    };
    sample();
    const sampler = setInterval(sample, 50);
    return {
      stop: () => {
        clearInterval(sampler);
        sample();
        const elapsedMs = performance.now() - startedAt;
        const cpu = process.cpuUsage(cpuBefore);
        const coordinatorCpuAfter = this.coordinatorPid === null ? null : processCpuMs(this.coordinatorPid);
        return {
          generatorCpuShare: (cpu.user + cpu.system) / 1000 / elapsedMs,
          coordinatorCpuShare: coordinatorCpuBefore === null || coordinatorCpuAfter === null ? null : (coordinatorCpuAfter - coordinatorCpuBefore) / elapsedMs,
          coordinatorPeakRssBytes: this.coordinatorPid === null ? null : peakRss,
        };
      },
    };
  }
}

interface Meter {
  readonly generatorCpuShare: number;
  readonly coordinatorCpuShare: number | null;
  readonly coordinatorPeakRssBytes: number | null;
}

function summarize(
  label: string,
  offered: number | null,
  durationMs: number,
  outcomes: readonly Outcome[],
  lags: readonly number[],
  meter: Meter,
): PhaseResult {
  const admittedLatencies: number[] = [];
  const admittedSinceSent: number[] = [];
  const refusedLatencies: number[] = [];
  const admittedIds: string[] = [];
  const otherStatuses: Record<string, number> = {};
  let malformedRefusals = 0;
  for (const outcome of outcomes) {
    if (outcome.status === 202) {
      admittedLatencies.push(outcome.latencyMs);
      admittedSinceSent.push(outcome.sinceSentMs);
      if (outcome.jobId !== null) admittedIds.push(outcome.jobId);
    } else if (outcome.status === 503) {
      refusedLatencies.push(outcome.latencyMs);
      if (!outcome.wellFormedRefusal) malformedRefusals++;
    } else {
      const name = outcome.status === 0 ? 'error' : String(outcome.status);
      otherStatuses[name] = (otherStatuses[name] ?? 0) + 1;
    }
  }
  const p = (values: readonly number[], q: number): number | null => (values.length === 0 ? null : percentile(values, q));
  return {
    label,
    offeredPerSecond: offered,
    durationMs,
    sent: outcomes.length,
    admitted: admittedLatencies.length,
    admittedPerSecond: (admittedLatencies.length * 1000) / durationMs,
    refused: refusedLatencies.length,
    malformedRefusals,
    otherStatuses,
    admittedP50Ms: p(admittedLatencies, 50),
    admittedP99Ms: p(admittedLatencies, 99),
    admittedMaxMs: p(admittedLatencies, 100),
    admittedSinceSentP99Ms: p(admittedSinceSent, 99),
    refusedP99Ms: p(refusedLatencies, 99),
    sendLagP99Ms: p(lags, 99),
    ...meter,
    admittedIds,
  };
}

function errorCode(text: string): string | null {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown } };
    return typeof body.error?.code === 'string' ? body.error.code : null;
  } catch {
    return null;
  }
}

/** Send offsets (ms from the start) with exponential gaps: a Poisson process, the same for the same seed. */
export function poissonSchedule(ratePerSecond: number, durationMs: number, seed: number): number[] {
  const random = seededRandom(seed);
  const meanGapMs = 1000 / ratePerSecond;
  const schedule: number[] = [];
  for (let t = -Math.log(1 - random()) * meanGapMs; t < durationMs; t += -Math.log(1 - random()) * meanGapMs) schedule.push(t);
  return schedule;
}

/** A process's resident set from /proc (Linux), or null when it cannot be read. */
export function processRssBytes(pid: number): number | null {
  return statusField(pid, 'VmRSS');
}

/** A process's peak resident set since it started (VmHWM), or null. */
export function processPeakRssBytes(pid: number): number | null {
  return statusField(pid, 'VmHWM');
}

function statusField(pid: number, field: string): number | null {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match === null ? null : Number(match[1]) * 1024;
  } catch {
    return null;
  }
}

/** User plus system CPU time of a process in ms, from /proc/<pid>/stat; null when it cannot be read. */
function processCpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at state; utime and stime are the 14th and 15th fields.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    // Linux reports in clock ticks of 1/100 s (USER_HZ) on every mainstream architecture.
    return Number.isFinite(ticks) ? ticks * 10 : null;
  } catch {
    return null;
  }
}
