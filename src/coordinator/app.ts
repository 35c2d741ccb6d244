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
import type { Clock } from '../core/clock.js';
import { installAdmission } from './admission.js';
import { installAuth } from './auth.js';
import { resolveConfig, type CoordinatorConfig, type CoordinatorConfigInput } from '../engine/config.js';
import {
  answerClientError,
  installErrorHandling,
  installHostHeaderCheck,
  installUnroutedAnswer,
  routeMethods,
  sendError,
  toHttpError,
} from './error-handler.js';
import { installJsonBodyParser } from './json-body.js';
import { CoordinatorApp } from './route-context.js';
import type { EngineContext } from '../engine/context.js';
import { createServices, type QueueServices } from '../engine/services.js';
import { registerBatchRoutes } from './routes/batch.js';
import { registerOperatorRoutes } from './routes/operator.js';
import { registerCompletionRoutes } from './routes/completion.js';
import { registerJobActionRoutes } from './routes/job-actions.js';
import { registerJobRoutes } from './routes/jobs.js';
import { registerKindRoutes } from './routes/kinds.js';
import { registerLeaseRoutes } from './routes/lease.js';
import { registerMetricsRoutes } from './routes/metrics.js';
import { registerPurgeRoutes } from './routes/purge.js';
import { registerScheduleRoutes } from './routes/schedules.js';
import { registerSystemRoutes } from './routes/system.js';
import { registerUiRoutes } from './routes/ui.js';
import { validatorCompiler } from '../engine/validation.js';
import { logRedaction } from '../core/log-redaction.js';
import { installRequestObservation, requestIdOf } from './request-observation.js';

export interface CoordinatorOptions {
  readonly store: Store;
  /** A pino logger (a redacting child is derived from it), or false for none. */
  readonly logger?: Logger | false;
  readonly config?: CoordinatorConfigInput;
  /** Services built by the caller and shared with it (another front over the same store); the caller closes them. */
  readonly services?: QueueServices;
  /** The clock recurring schedules are computed against; the store's own when absent (tests pass a fake one). */
  readonly scheduleClock?: Clock;
}

/** Where a key or token could appear in a log object (kept in core so that the CLI's loggers share it). */
export { LOG_REDACT_PATHS } from '../core/log-redaction.js';

/** Every route of the API; exported so a test can enumerate them. */
export function registerRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  registerJobRoutes(app, ctx);
  registerBatchRoutes(app, ctx);
  registerOperatorRoutes(app, ctx);
  registerJobActionRoutes(app, ctx);
  registerPurgeRoutes(app, ctx);
  registerLeaseRoutes(app, ctx);
  registerCompletionRoutes(app, ctx);
  registerKindRoutes(app, ctx);
  registerScheduleRoutes(app, ctx);
  registerSystemRoutes(app, ctx);
  registerMetricsRoutes(app, ctx);
}

export { MAX_FINISH_WAITS_PER_TENANT } from '../engine/services.js';

export interface ApiOptions {
  readonly store: Store;
  readonly config: CoordinatorConfig;
  readonly ctx: EngineContext;
  /**
   * The app is the coordinator's own: it also answers unrouted requests and a missing Host in the error
   * shape, and serves /openapi.json. Inside an application's Fastify instance (leaseholdRoutes) those stay
   * the application's.
   */
  readonly standalone: boolean;
}

/** The whole API on `app` (or an encapsulated plugin context of an application's instance). */
export async function installApi(app: CoordinatorApp, options: ApiOptions): Promise<void> {
  const { config, ctx } = options;
  app.setValidatorCompiler(validatorCompiler());
  installJsonBodyParser(app);

  const methods = routeMethods();
  app.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) methods.add(method, route.url);
  });
  installErrorHandling(app, methods);
  // The order of the onRequest hooks: unrouted requests and bad keys are answered (Connection: close)
  // before admission, so they never hold a slot; nothing reads a body before admission has decided.
  installRequestObservation(app, ctx.metrics);
  if (options.standalone) {
    installHostHeaderCheck(app);
    installUnroutedAnswer(app, methods);
  }
  installAuth(app, {
    store: options.store,
    cacheMs: config.authCacheMs,
    scrapeToken: config.metricsToken,
  });
  installAdmission(app, config, () => options.store.queueWaitMs());

  if (options.standalone) {
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
  }

  registerRoutes(app, ctx);
  // The dashboard is the coordinator's own page; inside an application's instance its pages are the application's.
  if (options.standalone) registerUiRoutes(app);
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
    // X-Request-Id when valid, else a fresh id (request-observation.ts); every request log line carries it as reqId.
    requestIdHeader: false,
    genReqId: requestIdOf,
    // Errors Fastify raises before routing (a malformed URL) get the same body as every other error.
    frameworkErrors: (error, _request, reply) => {
      sendError(reply, toHttpError(error));
    },
    clientErrorHandler: answerClientError,
    // installHostHeaderCheck answers a missing Host in the error shape instead of Node's empty 400.
    // Node applies the header and request timeouts on this check interval, so it must be shorter than both.
    http: {
      requireHostHeader: false,
      connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(Math.min(config.headersTimeoutMs, config.requestTimeoutMs) / 4))),
    },
    // Timeouts on every connection (docs/design/failure-cases.md §6.9): a slow-loris body is answered 400 and closed.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    connectionTimeout: config.idleTimeoutMs,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
  }).withTypeProvider() as unknown as CoordinatorApp;

  app.server.headersTimeout = config.headersTimeoutMs;
  // A caller may pass services it shares with another front; otherwise the coordinator builds and owns them.
  const services =
    options.services ?? createServices(options.store, config, app.log, options.scheduleClock === undefined ? {} : { scheduleClock: options.scheduleClock });
  await installApi(app, { store: options.store, config, ctx: services.ctx, standalone: true });

  // preClose runs before the server stops accepting: parked long polls answer 204 instead of holding close() open.
  if (options.services === undefined) {
    app.addHook('preClose', () => services.stopWaiting());
    app.addHook('onClose', () => services.close());
  }

  return app as unknown as FastifyInstance;
}
