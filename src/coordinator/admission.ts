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
 * - Queueing delay (a CoDel-style rule, docs/DESIGN.md §6.9): the counted
 *   requests (see isCounted) are refused `503 overloaded` while the time they
 *   wait before they are served has stayed above `admissionTargetMs` for a
 *   whole `admissionIntervalMs`. A burst shorter than the interval is admitted in full; a
 *   standing queue is refused until it drains.
 * - A count ceiling on counted requests in flight, only as a memory bound.
 *
 * What counts as waiting: a counted request is served from the moment its
 * body has been received (its handler about to run: routed, authenticated,
 * parsed, validated) until its answer is ready (onSend): the event loop's
 * turns, the group commit's turn and the commit. Its wait is that time less
 * the time a request takes when nothing else is being served (the smallest
 * recent such lone time): what it spent behind other requests,
 * not its own commit, so a slow disk alone never looks like a queue, and
 * neither does a client that sends its body slowly (that time is before the
 * handler). As in CoDel the rule refuses when the waits have stayed above the
 * target for a whole interval (one slow request, or a burst the coordinator
 * works off within the interval, does not trip it) and stops at the first
 * wait under the target. While refusing it still admits one request per
 * interval, so a fresh wait is measured, and it stops when no counted request
 * is in flight (the queue is empty).
 *
 * Not counted for the delay rule and the ceiling, and never refused by them:
 * reads (GET), and the worker's lease protocol (lease, renew, checkpoint,
 * effect, complete, fail): its concurrency is bounded by the workers' own, a
 * parked long poll would otherwise stand for a long wait, and refusing a
 * completion only slows the drain that ends the overload. What is counted is
 * what arrives open-loop: enqueue, batches, kind registration, operator
 * actions.
 */

import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { AdmissionConfig } from './config.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** What admission holds now (diagnostics and tests). */
    readonly admission: AdmissionState;
  }
  interface FastifyRequest {
    /** A counted request: -1 until its handler starts, then performance.now() then; 0 when not measured or done. */
    servingSince: number;
    /** Nothing else was being served when its handler started. */
    servedAlone: boolean;
    /** The number of counted handlers started before and including this one. */
    servingStart: number;
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
    headers: { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), 'retry-after': String(ADMISSION_RETRY_AFTER_SECONDS) },
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
 * The CoDel-style state: `firstAboveAt` is when the waits will have stayed
 * above the target for a whole interval; `refusing` is set once they have.
 */
export class QueueDelayRule {
  private firstAboveAt = 0;
  private refusing = false;
  private probeAt = 0;

  constructor(
    private readonly targetMs: number,
    private readonly intervalMs: number,
  ) {}

  get overloaded(): boolean {
    return this.refusing;
  }

  /** A counted request waited `waitedMs` behind others, observed at `now` (ms). */
  observe(waitedMs: number, now: number): void {
    if (waitedMs < this.targetMs) {
      this.reset();
    } else if (this.firstAboveAt === 0) {
      this.firstAboveAt = now + this.intervalMs;
    } else if (!this.refusing && now >= this.firstAboveAt) {
      this.refusing = true;
      this.probeAt = now + this.intervalMs;
    }
  }

  /** Whether to refuse a counted request arriving at `now`; one per interval passes as a probe. */
  refuses(now: number): boolean {
    if (!this.refusing) return false;
    if (now < this.probeAt) return true;
    this.probeAt = now + this.intervalMs;
    return false;
  }

  /** Nothing counted is in flight: no standing queue. */
  reset(): void {
    this.firstAboveAt = 0;
    this.refusing = false;
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
  inFlightOf(keyId: string, tenant: string): { readonly key: number; readonly tenant: number };
  pollsOf(keyId: string, tenant: string): { readonly key: number; readonly tenant: number };
}

/** Installs the rules; must come right after the auth hook. `app.admission` shows the counters. */
export function installAdmission(app: FastifyInstance, config: AdmissionConfig): void {
  const delay = config.admissionTargetMs === null ? null : new QueueDelayRule(config.admissionTargetMs, config.admissionIntervalMs);
  /** Counted requests between their handler's start and their answer. */
  let serving = 0;
  /** Counted handlers started so far. */
  let starts = 0;
  /** How long a counted request takes with nothing else being served (smoothed). */
  let loneMs = 0;
  const keyInFlight = new Counts();
  const tenantInFlight = new Counts();
  const keyPolls = new Counts();
  const tenantPolls = new Counts();
  let countedInFlight = 0;

  const over = (limit: number | null, count: number): boolean => limit !== null && count >= limit;

  app.decorateRequest('servingSince', 0);
  app.decorateRequest('servedAlone', false);
  app.decorateRequest('servingStart', 0);
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
    if (counted && (over(config.maxInFlightRequests, countedInFlight) || delay?.refuses(performance.now()) === true)) {
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
      if (counted && --countedInFlight === 0) delay?.reset();
      if (request.servingSince !== 0) {
        // Answered without onSend (the client went away): no longer served.
        if (request.servingSince > 0) serving--;
        request.servingSince = 0;
      }
    });
    if (counted && delay !== null) request.servingSince = -1;
    done();
  });

  if (delay !== null) {
    app.addHook('preHandler', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
      if (request.servingSince === -1) {
        request.servingSince = performance.now();
        request.servedAlone = serving === 0;
        request.servingStart = ++starts;
        serving++;
      }
      done();
    });
    app.addHook('onSend', (request: FastifyRequest, _reply: FastifyReply, payload: unknown, done: (error: null, value: unknown) => void) => {
      if (request.servingSince > 0) {
        const now = performance.now();
        const took = now - request.servingSince;
        serving--;
        request.servingSince = 0;
        // Alone for its whole time: nothing was being served when it started, and nothing started since.
        const alone = request.servedAlone && starts === request.servingStart;
        // The smallest recent lone time: a faster one is taken at once, a slower one moves it a tenth of the way.
        if (alone) loneMs = loneMs === 0 ? took : Math.min(took, 0.9 * loneMs + 0.1 * took);
        delay.observe(alone ? 0 : Math.max(0, took - loneMs), now);
      }
      done(null, payload);
    });
  }

  const state: AdmissionState = {
    get countedInFlight() {
      return countedInFlight;
    },
    get overloaded() {
      return delay?.overloaded ?? false;
    },
    inFlightOf: (keyId, tenant) => ({ key: keyInFlight.get(keyId), tenant: tenantInFlight.get(tenant) }),
    pollsOf: (keyId, tenant) => ({ key: keyPolls.get(keyId), tenant: tenantPolls.get(tenant) }),
  };
  app.decorate('admission', state);
}
