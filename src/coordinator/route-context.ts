/**
 * What route modules share besides the engine's context (engine/context.ts):
 * the typed app, and the error responses common to every route (the
 * protocol's error body per status, so that /openapi.json documents each
 * route's failures too).
 */

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { TSchema } from '@sinclair/typebox';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { ErrorBody } from '../protocol/schemas.js';

export type CoordinatorApp = FastifyInstance<Server, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>;

/** Response schemas for the given error statuses; every authenticated route can answer 401, 403, 429 and 503. */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  const all = new Set([...statuses, 400, 401, 403, 429, 500, 503]);
  const responses: Record<number, TSchema> = {};
  for (const status of all) responses[status] = ErrorBody;
  return responses;
}

export const PUBLIC_ERRORS: Record<number, TSchema> = { 500: ErrorBody, 503: ErrorBody };
