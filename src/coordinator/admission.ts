/**
 * Admission control: which routed, authenticated requests this coordinator
 * takes on. It runs after routing and authentication (app.ts orders the
 * hooks), so an unrouted request or one without a valid key never holds
 * anything here; it answers before the body is read, so a refusal is cheap.
 *
 * Three rules, each answered at once and written straight to the socket:
 * - Per key and per tenant, caps on requests in flight and on long polls
 *   (every POST /lease counts as a poll, parked or not, and not as a request
 *   in flight): beyond them `429 too_many_requests`, so one key or tenant
 *   cannot take the whole coordinator. Public routes are not counted.
 * - Queueing delay (a CoDel-style rule, docs/design/failure-cases.md §6.9): the counted
 *   requests (see isCounted) are refused `503 overloaded` while the queueing
 *   delay has stayed at or above `admissionTargetMs` for a whole
 *   `admissionIntervalMs`, and admitted again at the first sample under it. A
 *   burst the coordinator works off within the interval is admitted in full; a
 *   standing queue is refused until it drains.
 * - A count ceiling on counted requests in flight, only as a memory bound.
 *
 * What the queueing delay is: sampled every fifth of the interval, the sum of
 * how late the sampling timer fired (the event loop's lag: a request that
 * arrives while the loop is busy waits in its socket that long before any of
 * our code sees it; with SQLite the commits run on the loop, so its queue is
 * here) and how long the oldest write queued inside the store has waited
 * (Store.queueWaitMs: SQLite's group commit, PostgreSQL's statement batcher
 * and connection pool). Both are measured, never estimated, so nothing stale
 * is remembered: when the store recovers or the backlog drains, the next
 * sample says so. A client that sends its body slowly waits for itself, not
 * in a queue, and does not count.
 *
 * Not counted for the delay rule and the ceiling, and never refused by them:
 * reads (GET), and the worker's lease protocol (lease, renew, checkpoint,
 * effect, complete, fail): its concurrency is bounded by the workers' own, a
 * parked long poll would otherwise stand for a long wait, and refusing a
 * completion only slows the drain that ends the overload. What is counted is
 * what arrives open-loop: enqueue, batches, kind registration, operator
 * actions.
 */

import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { AdmissionConfig } from '../engine/config.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** What admission holds now (diagnostics and tests). */
    readonly admission: AdmissionState;
  }
}

/** The seconds a refused client is told to wait: in-flight work drains in milliseconds, so the shortest step. */
export const ADMISSION_RETRY_AFTER_SECONDS = 1;

/** Routes (method and pattern) that the delay rule and the ceiling neither count nor refuse; every GET is exempt as well. */
export const UNCOUNTED_ROUTES: ReadonlySet<string> = new Set([
  'POST /lease',
  'POST /jobs/:id/renew',
  'POST /jobs/:id/checkpoint',
  'POST /jobs/:id/effect',
  'POST /jobs/:id/complete',
  'POST /complete',
  'POST /jobs/:id/fail',
]);

/**
 * A refusal, serialized once and written straight to the socket: it skips
 * Fastify's reply pipeline (serializer, onSend), which measured 25–30% of the
 * cost of a refusal (coordinator CPU per refused request, about 64 µs through
 * reply.send, 44 µs written directly, 24 µs for a bare Node server; an admitted
 * enqueue costs 170–190 µs). The shape is the error handler's.
 */
function refusal(code: string, message: string): { readonly body: string; readonly headers: Readonly<Record<string, string | number>> } {
  const body = JSON.stringify({ error: { code, message } });
  return {
    body,
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'retry-after': String(ADMISSION_RETRY_AFTER_SECONDS),
    },
  };
}

const OVERLOADED = refusal('overloaded', 'the coordinator is serving as many requests as it admits; retry later');
const TOO_MANY_IN_FLIGHT = refusal('too_many_requests', 'this key or tenant has as many requests in flight as it may; retry later');
const TOO_MANY_POLLS = refusal('too_many_requests', 'this key or tenant has as many long polls open as it may; retry later');

function refuse(reply: FastifyReply, answer: ReturnType<typeof refusal>, status: number): void {
  // Answered here: done() is not called, and hijack() tells Fastify the reply is written.
  reply.hijack();
  reply.raw.writeHead(status, answer.headers);
  reply.raw.end(answer.body);
}

export function isCounted(request: FastifyRequest): boolean {
  if (request.method === 'GET' || request.method === 'HEAD') return false;
  const url = request.routeOptions.url;
  return url === undefined || !UNCOUNTED_ROUTES.has(`${request.method} ${url}`);
}

function isPoll(request: FastifyRequest): boolean {
  return request.method === 'POST' && request.routeOptions.url === '/lease';
}

/**
 * The CoDel-style state: refusing starts once the delay has stayed at or
 * above the target for a whole interval, and ends once it has stayed under
 * the target for a whole interval. Refusals are cheap, so the loop's lag
 * falls as soon as refusing starts while the backlog may still stand in the
 * sockets; ending at the first low sample would let it all in at once.
 */
export class QueueDelayRule {
  /** When the current run of samples on one side of the target began; 0 before the first sample. */
  private runStartedAt = 0;
  private runAbove = false;
  private refusing = false;

  constructor(
    private readonly targetMs: number,
    private readonly intervalMs: number,
  ) {}

  get overloaded(): boolean {
    return this.refusing;
  }

  /** The queueing delay was `delayMs` at `now` (ms). */
  observe(delayMs: number, now: number): void {
    const above = delayMs >= this.targetMs;
    if (this.runStartedAt === 0 || above !== this.runAbove) {
      this.runStartedAt = now;
      this.runAbove = above;
      return;
    }
    if (now - this.runStartedAt >= this.intervalMs) this.refusing = above;
  }
}

/**
 * Samples the queueing delay every `periodMs` from an unreferenced timer: the
 * timer's own lateness plus the store's oldest queued write.
 */
export class QueueDelayProbe {
  private timer: NodeJS.Timeout | undefined;
  private due = 0;
  /** The last sample, in ms. */
  last = 0;

  constructor(
    private readonly periodMs: number,
    private readonly storeWaitMs: () => number,
    private readonly onSample: (delayMs: number, now: number) => void,
  ) {}

  start(): void {
    this.schedule();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    this.due = performance.now() + this.periodMs;
    this.timer = setTimeout(() => this.sample(), this.periodMs);
    this.timer.unref();
  }

  private sample(): void {
    const now = performance.now();
    // Timers fire up to a millisecond early or late even when idle; lateness under that is no queue.
    const lag = Math.max(0, now - this.due - 1);
    this.last = lag + this.storeWaitMs();
    this.onSample(this.last, now);
    if (this.timer !== undefined) this.schedule();
  }
}

/** Counts per key or tenant; an entry lives only while its count is above zero. */
class Counts {
  private readonly counts = new Map<string, number>();
  get(id: string): number {
    return this.counts.get(id) ?? 0;
  }
  add(id: string): void {
    this.counts.set(id, this.get(id) + 1);
  }
  remove(id: string): void {
    const left = this.get(id) - 1;
    if (left > 0) this.counts.set(id, left);
    else this.counts.delete(id);
  }
}

export interface AdmissionState {
  /** Counted requests in flight. */
  readonly countedInFlight: number;
  readonly overloaded: boolean;
  /** The last queueing-delay sample, in ms (0 with the rule off). */
  readonly queueDelayMs: number;
  inFlightOf(keyId: string, tenant: string): { readonly key: number; readonly tenant: number };
  pollsOf(keyId: string, tenant: string): { readonly key: number; readonly tenant: number };
}

/** Installs the rules; must come right after the auth hook. `app.admission` shows the counters. */
export function installAdmission(app: FastifyInstance, config: AdmissionConfig, storeWaitMs: () => number): void {
  const delay = config.admissionTargetMs === null ? null : new QueueDelayRule(config.admissionTargetMs, config.admissionIntervalMs);
  const probe =
    delay === null ? null : new QueueDelayProbe(Math.max(1, Math.floor(config.admissionIntervalMs / 5)), storeWaitMs, (ms, now) => delay.observe(ms, now));
  const keyInFlight = new Counts();
  const tenantInFlight = new Counts();
  const keyPolls = new Counts();
  const tenantPolls = new Counts();
  let countedInFlight = 0;

  const over = (limit: number | null, count: number): boolean => limit !== null && count >= limit;

  if (probe !== null) {
    app.addHook('onReady', (done: HookHandlerDoneFunction) => {
      probe.start();
      done();
    });
    app.addHook('onClose', (_instance: FastifyInstance, done: HookHandlerDoneFunction) => {
      probe.stop();
      done();
    });
  }
  app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const principal = request.principal;
    if (principal === null) {
      done();
      return;
    }
    const { keyId, tenant } = principal;
    const poll = isPoll(request);
    if (poll) {
      if (over(config.maxPollsPerKey, keyPolls.get(keyId)) || over(config.maxPollsPerTenant, tenantPolls.get(tenant))) {
        refuse(reply, TOO_MANY_POLLS, 429);
        return;
      }
    } else if (over(config.maxInFlightPerKey, keyInFlight.get(keyId)) || over(config.maxInFlightPerTenant, tenantInFlight.get(tenant))) {
      refuse(reply, TOO_MANY_IN_FLIGHT, 429);
      return;
    }
    const counted = isCounted(request);
    if (counted && (over(config.maxInFlightRequests, countedInFlight) || delay?.overloaded === true)) {
      refuse(reply, OVERLOADED, 503);
      return;
    }
    const keys = poll ? keyPolls : keyInFlight;
    const tenants = poll ? tenantPolls : tenantInFlight;
    keys.add(keyId);
    tenants.add(tenant);
    if (counted) countedInFlight++;
    // 'close' fires once whether the answer was sent or the client went away, so a count is never lost.
    reply.raw.once('close', () => {
      keys.remove(keyId);
      tenants.remove(tenant);
      if (counted) countedInFlight--;
    });
    done();
  });

  const state: AdmissionState = {
    get countedInFlight() {
      return countedInFlight;
    },
    get overloaded() {
      return delay?.overloaded ?? false;
    },
    get queueDelayMs() {
      return probe?.last ?? 0;
    },
    inFlightOf: (keyId, tenant) => ({ key: keyInFlight.get(keyId), tenant: tenantInFlight.get(tenant) }),
    pollsOf: (keyId, tenant) => ({ key: keyPolls.get(keyId), tenant: tenantPolls.get(tenant) }),
  };
  app.decorate('admission', state);
}
