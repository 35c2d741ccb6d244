/**
 * Recurring schedules of the tenant (admin): PUT /schedules/{name} sets or
 * replaces one, GET /schedules lists them by name with each one's next and
 * last occurrence, DELETE /schedules/{name} removes one. The cron text and
 * the time zone are checked here, and the schedule's job is prepared as an
 * enqueue would prepare it (kind rules, payload schema and size), so a
 * schedule whose jobs would be refused is refused now rather than at its
 * first occurrence. Another tenant's schedule of the same name is a
 * different schedule; a name the tenant has not set is a 404.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { toRfc3339, toRfc3339OrNull } from '../../core/clock.js';
import { canonicalTimeZone, nextOccurrence, parseCron } from '../../core/cron.js';
import { LeaseholdError } from '../../core/errors.js';
import { Schedule, ScheduleDefinition, ScheduleList, ScheduleListQuery, ScheduleParams, type Schedule as WireSchedule } from '../../protocol/schemas.js';
import { scheduleJobKey, type ScheduleRecord } from '../../store/schedules.js';
import { principalOf } from '../auth.js';
import { prepareEnqueue } from '../../engine/enqueue.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';

const DEFAULT_LIST_LIMIT = 100;

export function toWireSchedule(record: ScheduleRecord): WireSchedule {
  return {
    name: record.name,
    kind: record.kind,
    payload: record.payload,
    cron: record.cron,
    timezone: record.timezone,
    overlap: record.overlap,
    catchUp: record.catchUp,
    nextAt: toRfc3339OrNull(record.nextAt),
    lastAt: toRfc3339OrNull(record.lastAt),
    lastJobId: record.lastJobId,
    createdAt: toRfc3339(record.createdAt),
    updatedAt: toRfc3339(record.updatedAt),
  };
}

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
    async (request) => {
      const principal = principalOf(request);
      const { name } = request.params;
      const body = request.body;
      const parsed = parseCron(body.cron);
      if (!parsed.ok) throw new LeaseholdError('invalid_request', `body/cron: ${parsed.message}`);
      const timezone = canonicalTimeZone(body.timezone ?? 'UTC');
      if (timezone === null) throw new LeaseholdError('invalid_request', 'body/timezone must be an IANA time zone such as Europe/Berlin or UTC');
      const now = await ctx.scheduler.now();
      const nextAt = nextOccurrence(parsed.cron, timezone, now);
      if (nextAt === null) throw new LeaseholdError('invalid_request', 'body/cron names no time within the next eight years');
      // The job as its occurrences will enqueue it: refused now if an enqueue would refuse it.
      const job = await prepareEnqueue(ctx, principal, { kind: body.kind, payload: body.payload }, scheduleJobKey(name, nextAt));
      const outcome = await ctx.store.scheduleUpsert({
        tenant: principal.tenant,
        name,
        owner: principal.user,
        kind: body.kind,
        payload: body.payload ?? null,
        payloadJson: job.payloadJson ?? canonicalJson(body.payload ?? null),
        cron: parsed.cron.source,
        timezone,
        overlap: body.overlap ?? 'skip',
        catchUp: body.catchUp ?? 0,
        nextAt,
        now,
        maxPerTenant: ctx.config.maxSchedulesPerTenant,
      });
      if (outcome.kind === 'too_many') {
        throw new LeaseholdError(
          'invalid_request',
          `the tenant already has ${outcome.count} schedules, the most this coordinator allows (maxSchedulesPerTenant); replace or delete one instead`,
        );
      }
      ctx.scheduler.poke();
      return toWireSchedule(outcome.schedule);
    },
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
    async (request) => {
      const limit = request.query.limit ?? DEFAULT_LIST_LIMIT;
      const rows = await ctx.store.scheduleList({
        tenant: principalOf(request).tenant,
        limit: limit + 1,
        ...(request.query.cursor === undefined ? {} : { after: request.query.cursor }),
      });
      const page = rows.slice(0, limit);
      return { schedules: page.map(toWireSchedule), nextCursor: rows.length > limit ? (page.at(-1)?.name ?? null) : null };
    },
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
    async (request) => {
      const tenant = principalOf(request).tenant;
      const existing = await ctx.store.scheduleGet({ tenant, name: request.params.name });
      if (existing === null || !(await ctx.store.scheduleDelete({ tenant, name: request.params.name }))) {
        throw new LeaseholdError('not_found', 'schedule not found');
      }
      ctx.scheduler.poke();
      return toWireSchedule(existing);
    },
  );
}
