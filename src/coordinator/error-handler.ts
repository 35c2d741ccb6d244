/**
 * The one place where anything thrown while serving a request becomes an HTTP
 * answer. Every error body is `{error:{code, message}}` with a code from
 * the table in core/errors.ts (ERRORS), plus `details` where the error names
 * something (duplicate_job: the existing job's id). Expected errors (bad input, stale leases, a store
 * that is down) keep their message; anything else is a bug: it is logged here
 * with its stack and the client gets a generic 500 without details.
 */

import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { ERRORS, LeaseholdError, type CodeWithMessage, type ErrorCode, type ErrorDetails } from '../core/errors.js';
import { isStoreUnavailable } from '../engine/error-translation.js';
import { describeValidationError } from '../engine/validation.js';

interface HttpError {
  readonly status: number;
  readonly code: ErrorCode;
  readonly message: string;
  readonly retryAfterSeconds?: number;
  readonly details?: ErrorDetails;
}

const FASTIFY_CODES: Readonly<Record<string, ErrorCode>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_request',
  FST_ERR_BAD_URL: 'invalid_request',
};

const STATUS_CODES: Readonly<Record<number, ErrorCode>> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
};

/**
 * The driver's code under a refused request (SQLITE_FULL, SQLITE_BUSY, a
 * SQLSTATE such as 53100, ECONNRESET): every store fault answers the same
 * store_unavailable, so only the log tells a full disk from a lock. Never sent
 * to a client; a code is an identifier, never a value or a secret.
 */
function driverCode(error: unknown): string | undefined {
  const cause = error instanceof Error ? (error.cause as { code?: unknown } | null | undefined) : undefined;
  const code = cause?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,64}$/.test(code) ? code : undefined;
}

export function toHttpError(error: unknown): HttpError {
  if (error instanceof LeaseholdError) {
    return {
      status: error.status,
      code: error.code,
      message: error.message,
      ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
      ...(error.details === undefined ? {} : { details: error.details }),
    };
  }
  if (isStoreUnavailable(error)) return { ...ownAnswer('store_unavailable'), retryAfterSeconds: 1 };
  const fastifyError = error as Partial<FastifyError> | null;
  if (fastifyError !== null && typeof fastifyError === 'object') {
    if (Array.isArray(fastifyError.validation)) {
      const context = fastifyError.validationContext ?? 'body';
      return { status: 400, code: 'invalid_request', message: describeValidationError(fastifyError.validation[0], context) };
    }
    const mapped = typeof fastifyError.code === 'string' ? FASTIFY_CODES[fastifyError.code] : undefined;
    if (mapped !== undefined) {
      return { status: ERRORS[mapped].status, code: mapped, message: publicMessage(mapped, fastifyError.message) };
    }
    const status = fastifyError.statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      const code = STATUS_CODES[status] ?? 'invalid_request';
      return { status: ERRORS[code].status, code, message: publicMessage(code, fastifyError.message) };
    }
  }
  return ownAnswer('internal_error');
}

/** A code answered with its own message from ERRORS. */
function ownAnswer(code: CodeWithMessage): HttpError {
  return { status: ERRORS[code].status, code, message: ERRORS[code].message };
}

/** About the body, Fastify's words are its own; ours from ERRORS say what to send. */
const BODY_CODES = ['invalid_json', 'payload_too_large', 'unsupported_media_type'] as const satisfies readonly CodeWithMessage[];

function publicMessage(code: ErrorCode, message: string | undefined): string {
  const bodyCode = BODY_CODES.find((c) => c === code);
  if (bodyCode !== undefined) return ERRORS[bodyCode].message;
  return typeof message === 'string' && message.length > 0 && message.length < 500 ? message : code.replace(/_/g, ' ');
}

export function sendError(reply: FastifyReply, httpError: HttpError): FastifyReply {
  if (httpError.retryAfterSeconds !== undefined) reply.header('retry-after', String(httpError.retryAfterSeconds));
  return reply.code(httpError.status).send({ error: errorDetail(httpError) });
}

/** The `error` of an error body: code, message, and the details when the error names any. */
export function errorDetail(httpError: HttpError): { code: ErrorCode; message: string; details?: ErrorDetails } {
  return { code: httpError.code, message: httpError.message, ...(httpError.details === undefined ? {} : { details: httpError.details }) };
}

/**
 * Requests Node's HTTP parser refuses (broken framing, a NUL in a header,
 * Content-Length with Transfer-Encoding, headers over Node's limit) never
 * reach Fastify's routing; they get the same error body as every other
 * answer, as a 400 (the codes have no 408 or 431), and the connection closes.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const message =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 'the request headers are too large'
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'the request did not arrive in time'
        : 'the request is not valid HTTP/1.1';
  const body = JSON.stringify({ error: { code: 'invalid_request', message } });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/**
 * RFC 9112 wants a 400 for an HTTP/1.1 request without a Host header. Node's
 * own check (requireHostHeader, switched off in app.ts) answers it with an
 * empty body; this one answers in the error shape, before admission or auth.
 */
export function installHostHeaderCheck(app: FastifyInstance): void {
  app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      reply.header('connection', 'close');
      done(new LeaseholdError('invalid_request', 'an HTTP/1.1 request must carry a Host header'));
      return;
    }
    done();
  });
}

export interface RouteMethods {
  /** Adds a route pattern so that a wrong method on a known path answers 405, not 404. */
  add(method: string, url: string): void;
  allowed(path: string): readonly string[];
}

export function routeMethods(): RouteMethods {
  const routes: { pattern: RegExp; methods: Set<string> }[] = [];
  const byUrl = new Map<string, Set<string>>();
  return {
    add(method, url) {
      let methods = byUrl.get(url);
      if (methods === undefined) {
        methods = new Set();
        byUrl.set(url, methods);
        const source = url
          .split('/')
          .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
          .join('/');
        routes.push({ pattern: new RegExp(`^${source}/?$`), methods });
      }
      methods.add(method);
    },
    allowed(path) {
      const found = new Set<string>();
      for (const route of routes) if (route.pattern.test(path)) for (const method of route.methods) found.add(method);
      return [...found].sort();
    },
  };
}

export function installErrorHandling(app: FastifyInstance, methods: RouteMethods): void {
  app.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const httpError = toHttpError(error);
    if (httpError.status >= 500) {
      // Logged with its stack for the operator; the client sees only the code.
      if (httpError.code === 'internal_error') request.log.error({ err: error, route: request.routeOptions.url }, 'request failed');
      else request.log.warn({ code: httpError.code, cause: driverCode(error), route: request.routeOptions.url }, 'request refused');
    }
    return sendError(reply, httpError);
  });

  app.setNotFoundHandler((request, reply) => answerUnrouted(request, reply, methods));
}

function answerUnrouted(request: FastifyRequest, reply: FastifyReply, methods: RouteMethods): FastifyReply {
  const path = request.url.split('?', 1)[0] ?? '';
  const allowed = methods.allowed(path);
  // Answered before the body is read; the connection closes, so an unread body cannot hold it open.
  reply.header('connection', 'close');
  if (allowed.length > 0) {
    reply.header('allow', allowed.join(', '));
    return sendError(reply, { status: 405, code: 'method_not_allowed', message: `${request.method} is not allowed on ${path}` });
  }
  return sendError(reply, { status: 404, code: 'not_found', message: 'no such route' });
}

/**
 * Unrouted requests (404, 405) are answered in the first hook after the Host
 * check, before authentication, admission or the body: whatever they send
 * costs a route lookup, and they never hold an admission slot.
 */
export function installUnroutedAnswer(app: FastifyInstance, methods: RouteMethods): void {
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.is404) return answerUnrouted(request, reply, methods);
    return undefined;
  });
}
