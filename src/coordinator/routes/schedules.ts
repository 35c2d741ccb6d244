/**
 * Recurring schedules of the tenant over HTTP (admin): PUT
 * /schedules/{name}, GET /schedules, DELETE /schedules/{name}, each one of
 * the engine's functions (engine/schedules.ts).
 */

import { Schedule, ScheduleDefinition, ScheduleList, ScheduleListQuery, ScheduleParams } from '../../protocol/schemas.js';
import type { EngineContext } from '../../engine/context.js';
import { deleteSchedule, listSchedules, putSchedule } from '../../engine/schedules.js';
import { principalOf } from '../auth.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';

export function registerScheduleRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.put(
    '/schedules/:name',
    {
      config: { roles: ['admin'] },
      schema: {
        summary: 'Set or replace a recurring schedule (admin)',
        description:
          'Each occurrence of the cron expression, in the time zone, enqueues one job of the kind with the payload, under the idempotency key schedule:{name}:{occurrence}. Replacing a schedule computes its next occurrence afresh.',
        tags: ['schedules'],
        params: ScheduleParams,
        body: ScheduleDefinition,
        response: { 200: Schedule, ...errorResponses(404, 413) },
      },
    },
    async (request) => putSchedule(ctx, principalOf(request), request.params.name, request.body),
  );

  app.get(
    '/schedules',
    {
      config: { roles: ['admin'] },
      schema: {
        summary: "The tenant's recurring schedules, by name, with their next and last occurrence (admin)",
        tags: ['schedules'],
        querystring: ScheduleListQuery,
        response: { 200: ScheduleList, ...errorResponses() },
      },
    },
    async (request) => listSchedules(ctx, principalOf(request), request.query),
  );

  app.delete(
    '/schedules/:name',
    {
      config: { roles: ['admin'] },
      schema: {
        summary: 'Delete a recurring schedule (admin); jobs it enqueued stay',
        tags: ['schedules'],
        params: ScheduleParams,
        response: { 200: Schedule, ...errorResponses(404) },
      },
    },
    async (request) => deleteSchedule(ctx, principalOf(request), request.params.name),
  );
}
