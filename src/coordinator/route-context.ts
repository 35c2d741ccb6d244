/**
 * What route modules share: the typed app, the services built once by the app
 * factory, and the error responses common to every route (the protocol's
 * error body per status, so that /openapi.json documents each route's
 * failures too).
 */

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { TSchema } from '@sinclair/typebox';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { ErrorBody } from '../protocol/schemas.js';
import type { Store } from '../store/store.js';
import type { Backpressure } from './backpressure.js';
import type { CoordinatorConfig } from './config.js';
import type { KindRegistry } from './kind-registry.js';
import type { FinishWaiters } from './finish-waiters.js';
import type { JobEvents } from './job-events.js';
import type { LeaseWaiters } from './lease-waiters.js';
import type { CoordinatorMetrics } from './metrics.js';

export type CoordinatorApp = FastifyInstance<Server, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>;

export interface RouteContext {
  readonly store: Store;
  readonly config: CoordinatorConfig;
  readonly kinds: KindRegistry;
  readonly waiters: LeaseWaiters;
  /** Parked GET /jobs/{id}?waitMs requests. */
  readonly finishWaiters: FinishWaiters;
  readonly backpressure: Backpressure;
  readonly metrics: CoordinatorMetrics;
  /** Counts and logs the transitions the routes apply (job-events.ts). */
  readonly events: JobEvents;
  /** Recurring schedules: the clock they are computed against, and the timer a change replans (scheduler.ts). */
  readonly scheduler: SchedulerHandle;
}

/** What routes and tests use of the scheduler (scheduler.ts). */
export interface SchedulerHandle {
  /** The time schedules are computed against. */
  now(): Promise<number>;
  /** A schedule changed here: plan the timer again. */
  poke(): void;
  /** One pass now, after any in progress. */
  tick(): Promise<void>;
}

/** Response schemas for the given error statuses; every authenticated route can answer 401, 403, 429 and 503. */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  const all = new Set([...statuses, 400, 401, 403, 429, 500, 503]);
  const responses: Record<number, TSchema> = {};
  for (const status of all) responses[status] = ErrorBody;
  return responses;
}

export const PUBLIC_ERRORS: Record<number, TSchema> = { 500: ErrorBody, 503: ErrorBody };
