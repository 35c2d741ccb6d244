/**
 * Admission control at the door: a bound on the requests this process is
 * working on. When `maxInFlightRequests` counted requests are in flight, the
 * next one is answered 503 `overloaded` with `Retry-After: 1` at once — before
 * authentication, body parsing or any store call — so that under open-loop
 * overload (requests arriving faster than they can be served) the admitted
 * ones keep a bounded wait, and memory holds at most that many requests
 * instead of an ever-growing queue in front of the group commit.
 *
 * Not counted, and never refused here:
 * - reads (GET): cheap, and the health check and job polls must stay
 *   available while producers are refused;
 * - the worker's lease protocol (lease, renew, checkpoint, effect, complete,
 *   fail): its concurrency is bounded by the workers' own (one long poll and
 *   one call per running job each), a parked long poll would otherwise hold a
 *   slot for its whole wait, and refusing a completion only slows the drain
 *   that ends the overload.
 * What is counted is what arrives open-loop: enqueue, batches, kind
 * registration, operator actions, and unrouted requests.
 */

import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

/** The seconds a refused client is told to wait: in-flight work drains in milliseconds, so the shortest step. */
export const ADMISSION_RETRY_AFTER_SECONDS = 1;

/** Routes (method and pattern) that are neither counted nor refused; every GET is exempt as well. */
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
 * The refusal, serialized once and written straight to the socket: it skips
 * Fastify's reply pipeline (serializer, onSend), which measured 25–30% of the
 * cost of a refusal (coordinator CPU per refused request, about 64 µs through
 * reply.send, 44 µs written directly, 24 µs for a bare Node server; an admitted
 * enqueue costs 170–190 µs). The shape is the error handler's.
 */
const REFUSAL_BODY = JSON.stringify({ error: { code: 'overloaded', message: 'the coordinator is serving as many requests as it admits; retry later' } });
const REFUSAL_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'content-length': Buffer.byteLength(REFUSAL_BODY),
  'retry-after': String(ADMISSION_RETRY_AFTER_SECONDS),
};

function isCounted(request: FastifyRequest): boolean {
  if (request.method === 'GET' || request.method === 'HEAD') return false;
  const url = request.routeOptions.url;
  return url === undefined || !UNCOUNTED_ROUTES.has(`${request.method} ${url}`);
}

/**
 * Installs the bound; `null` leaves every request admitted. Must be the first
 * onRequest hook, so that a refusal costs nothing after routing.
 */
export function installAdmission(app: FastifyInstance, maxInFlightRequests: number | null): void {
  if (maxInFlightRequests === null) return;
  let inFlight = 0;

  const release = (): void => {
    inFlight--;
  };
  app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    if (!isCounted(request)) {
      done();
      return;
    }
    if (inFlight >= maxInFlightRequests) {
      // Answered here: done() is not called, and hijack() tells Fastify the reply is written.
      reply.hijack();
      reply.raw.writeHead(503, REFUSAL_HEADERS);
      reply.raw.end(REFUSAL_BODY);
      return;
    }
    inFlight++;
    // 'close' fires once whether the answer was sent or the client went away, so a slot is never lost.
    reply.raw.once('close', release);
    done();
  });
}
