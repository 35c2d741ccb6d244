/**
 * What every request leaves behind: a request id (a client's valid
 * X-Request-Id or a fresh one, echoed in the answer and carried by every log
 * line the request writes), its count and duration by route pattern and
 * status, the reason of a 503, the admission wait of a counted request, and
 * the acceptance SLI of enqueues. A debug line per answered request; at info
 * nothing, because a line per request costs more than the request.
 *
 * The first onRequest hook, so that the answers of every later hook
 * (unrouted 404s, 401s, admission's refusals written straight to the socket)
 * are counted and carry the id: the header is set on the raw response, which
 * a direct writeHead keeps, and counting waits for the raw 'finish'.
 */

import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { isCounted } from './admission.js';
import type { CoordinatorMetrics } from '../engine/metrics.js';

export const REQUEST_ID_HEADER = 'x-request-id';
/** A client's request id is kept when it is this short and made of these characters; otherwise a fresh one is used. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;

/**
 * A process's generated ids: a random prefix and a counter. A request id is a
 * correlation handle, not a secret, so it needs to be unique, not unguessable;
 * random bytes per request cost about 2% of the coordinator's CPU under load.
 */
const ID_PREFIX = randomBytes(9).toString('base64url');
let idCounter = 0;

/** Fastify's genReqId: the client's X-Request-Id when it is valid, else this process's prefix and the next number. */
export function requestIdOf(raw: IncomingMessage): string {
  const given = raw.headers[REQUEST_ID_HEADER];
  if (typeof given === 'string' && REQUEST_ID_PATTERN.test(given)) return given;
  return `${ID_PREFIX}-${(++idCounter).toString(36)}`;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** performance.now() when the handler of a counted request was about to run; 0 otherwise. */
    handlerReadyAt: number;
    /** The error code of a 503 answered through the reply pipeline. */
    refusalCode: string | null;
  }
}

const ENQUEUE_ROUTES: ReadonlySet<string> = new Set(['POST /jobs', 'POST /jobs/batch']);
const ERROR_CODE = /"code":"([a-z_]{1,64})"/;

export function installRequestObservation(app: FastifyInstance, metrics: CoordinatorMetrics): void {
  app.decorateRequest('handlerReadyAt', 0);
  app.decorateRequest('refusalCode', null);

  app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const arrivedAt = performance.now();
    reply.raw.setHeader(REQUEST_ID_HEADER, request.id);
    reply.raw.once('finish', () => answered(request, reply, arrivedAt));
    done();
  });

  app.addHook('preHandler', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    if (isCounted(request)) request.handlerReadyAt = performance.now();
    done();
  });

  app.addHook('onSend', (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (error: null, value: unknown) => void) => {
    if (request.handlerReadyAt > 0) {
      metrics.admissionDelay.observe({ route: request.routeOptions.url ?? 'unrouted' }, (performance.now() - request.handlerReadyAt) / 1000);
    }
    if (reply.statusCode === 503 && typeof payload === 'string') request.refusalCode = ERROR_CODE.exec(payload)?.[1] ?? null;
    done(null, payload);
  });

  function answered(request: FastifyRequest, reply: FastifyReply, arrivedAt: number): void {
    const seconds = (performance.now() - arrivedAt) / 1000;
    const route = request.routeOptions.url ?? 'unrouted';
    const method = route === 'unrouted' ? 'other' : request.method;
    const status = reply.raw.statusCode;
    metrics.requests.inc({ route, method, status: String(status) });
    metrics.requestSeconds.observe({ route, method }, seconds);
    // Admission writes its 503 straight to the socket, past onSend: a 503 without a recorded code is its refusal.
    if (status === 503) metrics.unavailable.inc({ reason: request.refusalCode ?? 'overloaded' });
    const principal = request.principal;
    if (principal !== null && ENQUEUE_ROUTES.has(`${method} ${route}`)) metrics.acceptance(principal.tenant, status);
    request.log.debug({ method: request.method, route, statusCode: status, responseTimeMs: Math.round(seconds * 1e4) / 10 }, 'request answered');
  }
}
