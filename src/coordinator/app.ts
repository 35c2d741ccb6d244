/**
 * The coordinator's app factory: builds a Fastify instance over a Store with
 * every route, the auth hook, the body parser, the error handler, the reaper
 * and the long-poll waiters — and never calls listen(), so tests drive it with
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
import { Backpressure } from './backpressure.js';
import { resolveConfig, type CoordinatorConfig, type CoordinatorConfigInput } from './config.js';
import { answerClientError, installErrorHandling, installHostHeaderCheck, routeMethods, sendError, toHttpError } from './error-handler.js';
import { installJsonBodyParser } from './json-body.js';
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
  registerLeaseRoutes(app, ctx);
  registerCompletionRoutes(app, ctx);
  registerKindRoutes(app, ctx);
  registerSystemRoutes(app, ctx);
}

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
    http: { requireHostHeader: false },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
  }).withTypeProvider() as unknown as CoordinatorApp;

  app.setValidatorCompiler(validatorCompiler());
  installJsonBodyParser(app);

  const methods = routeMethods();
  app.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) methods.add(method, route.url);
  });
  installErrorHandling(app, methods);
  installHostHeaderCheck(app);
  // Before auth: a refused request must cost nothing but routing.
  installAdmission(app, config.maxInFlightRequests);
  installAuth(app, { store: options.store, cacheMs: config.authCacheMs });

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
  const ctx: RouteContext = {
    store: options.store,
    config,
    kinds: new KindRegistry(options.store, config.kindCacheMs),
    waiters,
    backpressure: new Backpressure(options.store, config.backpressure),
  };
  registerRoutes(app, ctx);

  const unwatch = options.store.watchAvailable(() => waiters.notify());
  const reaper = startReaper({ store: options.store, intervalMs: config.reaperIntervalMs, log: app.log, onRequeued: () => waiters.notify() });

  // preClose runs before the server stops accepting: parked long polls answer 204 instead of holding close() open.
  app.addHook('preClose', async () => {
    waiters.close();
    await reaper.stop();
  });
  app.addHook('onClose', async () => {
    unwatch();
  });

  return app as unknown as FastifyInstance;
}
