/**
 * The coordinator's app factory: builds a Fastify instance over a Store with
 * every route, the auth hook, the body parser, the error handler, the reaper,
 * retention and the long-poll waiters — and never calls listen(), so tests drive it with
 * inject() and the CLI decides where it listens. Closing the app stops the
 * reaper and ends long polls; the store belongs to the caller and stays open.
 *
 * Request logging is off: at tens of thousands of requests per second a log
 * line per request costs more than the request. Errors are logged, and the
 * logger redacts every place a key or token could appear.
 */

import swagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Store } from '../store/store.js';
import { installAdmission } from './admission.js';
import { installAuth } from './auth.js';
import { installCheckpointLimit } from './checkpoint-limit.js';
import { Backpressure } from './backpressure.js';
import { resolveConfig, type CoordinatorConfig, type CoordinatorConfigInput } from './config.js';
import { answerClientError, installErrorHandling, installHostHeaderCheck, installUnroutedAnswer, routeMethods, sendError, toHttpError } from './error-handler.js';
import { installJsonBodyParser } from './json-body.js';
import { FinishWaiters } from './finish-waiters.js';
import { KindRegistry } from './kind-registry.js';
import { LeaseWaiters } from './lease-waiters.js';
import { startReaper } from './reaper.js';
import type { CoordinatorApp, RouteContext } from './route-context.js';
import { registerBatchRoutes } from './routes/batch.js';
import { registerCompletionRoutes } from './routes/completion.js';
import { registerJobActionRoutes } from './routes/job-actions.js';
import { registerJobRoutes } from './routes/jobs.js';
import { registerKindRoutes } from './routes/kinds.js';
import { registerLeaseRoutes } from './routes/lease.js';
import { registerPurgeRoutes } from './routes/purge.js';
import { startRetention } from './retention.js';
import { registerSystemRoutes } from './routes/system.js';
import { validatorCompiler } from './validation.js';
import { logRedaction } from '../core/log-redaction.js';

export interface CoordinatorOptions {
  readonly store: Store;
  /** A pino logger (a redacting child is derived from it), or false for none. */
  readonly logger?: Logger | false;
  readonly config?: CoordinatorConfigInput;
}

/** Where a key or token could appear in a log object (kept in core so that the CLI's loggers share it). */
export { LOG_REDACT_PATHS } from '../core/log-redaction.js';

/** Every route of the API; exported so a test can enumerate them. */
export function registerRoutes(app: CoordinatorApp, ctx: RouteContext): void {
  registerJobRoutes(app, ctx);
  registerBatchRoutes(app, ctx);
  registerJobActionRoutes(app, ctx);
  registerPurgeRoutes(app, ctx);
  registerLeaseRoutes(app, ctx);
  registerCompletionRoutes(app, ctx);
  registerKindRoutes(app, ctx);
  registerSystemRoutes(app, ctx);
}

/** Parked GET /jobs/{id}?waitMs requests per tenant before the next answers 503 overloaded (docs/DESIGN.md). */
export const MAX_FINISH_WAITS_PER_TENANT = 1_000;

export async function buildCoordinator(options: CoordinatorOptions): Promise<FastifyInstance> {
  const config: CoordinatorConfig = resolveConfig(options.config ?? {});
  const loggerInstance: FastifyBaseLogger | undefined =
    options.logger === undefined || options.logger === false
      ? undefined
      : (options.logger.child({ component: 'coordinator' }, { redact: logRedaction() }) as FastifyBaseLogger);

  const app = Fastify({
    ...(loggerInstance === undefined ? { logger: false } : { loggerInstance }),
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.bodyLimitBytes,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    exposeHeadRoutes: false,
    // Fastify's own 503-on-closing body is not our error shape; requests that still arrive on open
    // connections while closing are served normally (the store outlives the app) with Connection: close.
    return503OnClosing: false,
    requestIdHeader: false,
    // Errors Fastify raises before routing (a malformed URL) get the same body as every other error.
    frameworkErrors: (error, _request, reply) => {
      sendError(reply, toHttpError(error));
    },
    clientErrorHandler: answerClientError,
    // installHostHeaderCheck answers a missing Host in the error shape instead of Node's empty 400.
    // Node applies the header and request timeouts on this check interval, so it must be shorter than both.
    http: { requireHostHeader: false, connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(Math.min(config.headersTimeoutMs, config.requestTimeoutMs) / 4))) },
    // Timeouts on every connection (docs/DESIGN.md §6.9): a slow-loris body is answered 400 and closed.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    connectionTimeout: config.idleTimeoutMs,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
  }).withTypeProvider() as unknown as CoordinatorApp;

  app.setValidatorCompiler(validatorCompiler());
  installJsonBodyParser(app);

  const methods = routeMethods();
  app.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) methods.add(method, route.url);
  });
  installErrorHandling(app, methods);
  app.server.headersTimeout = config.headersTimeoutMs;
  // The order of the onRequest hooks: unrouted requests and bad keys are answered (Connection: close)
  // before admission, so they never hold a slot; nothing reads a body before admission has decided.
  installHostHeaderCheck(app);
  installUnroutedAnswer(app, methods);
  installAuth(app, { store: options.store, cacheMs: config.authCacheMs });
  installAdmission(app, config);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'leasehold coordinator',
        version: '1',
        description: 'A durable job queue: enqueue, lease with fencing tokens, complete or fail. Errors are {error:{code,message}} (docs/ERRORS.md).',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key (leasehold keys create)' } } },
      security: [{ bearer: [] }],
    },
  });

  const waiters = new LeaseWaiters();
  const finishWaiters = new FinishWaiters(options.store, MAX_FINISH_WAITS_PER_TENANT);
  const ctx: RouteContext = {
    store: options.store,
    config,
    kinds: new KindRegistry(options.store, config.kindCacheMs, { maxSchemaBytes: config.maxSchemaBytes }),
    waiters,
    finishWaiters,
    backpressure: new Backpressure(options.store, config.backpressure),
  };
  installCheckpointLimit(app, ctx);
  registerRoutes(app, ctx);

  // The store announces every job that becomes available (the reaper's requeues too) with its tenant and kind.
  const unwatch = options.store.watchAvailable((available) => waiters.notify(available));
  const reaper = startReaper({ store: options.store, intervalMs: config.reaperIntervalMs, log: app.log });
  const retention = startRetention({
    store: options.store,
    intervalMs: config.retentionIntervalMs,
    periods: config.retention,
    batchSize: config.retentionBatchSize,
    log: app.log,
  });

  // preClose runs before the server stops accepting: parked long polls answer 204 instead of holding close() open.
  app.addHook('preClose', async () => {
    waiters.close();
    finishWaiters.close();
    await reaper.stop();
    await retention.stop();
  });
  app.addHook('onClose', async () => {
    unwatch();
    await ctx.kinds.close();
  });

  return app as unknown as FastifyInstance;
}
