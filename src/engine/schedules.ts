/**
 * Recurring schedules of the tenant (admin): put sets or replaces one, list
 * reads them by name with each one's next and last occurrence, delete
 * removes one. The cron text and the time zone are checked here, and the
 * schedule's job is prepared as an enqueue would prepare it (kind rules,
 * payload schema and size), so a schedule whose jobs would be refused is
 * refused now rather than at its first occurrence. Another tenant's
 * schedule of the same name is a different schedule; a name the tenant has
 * not set is not_found. Each change replans the scheduler's timer.
 */

import { canonicalJson } from '../core/canonical-json.js';
import { toRfc3339, toRfc3339OrNull } from '../core/clock.js';
import { canonicalTimeZone, nextOccurrence, parseCron } from '../core/cron.js';
import { LeaseholdError } from '../core/errors.js';
import type { Schedule, ScheduleDefinition, ScheduleList, ScheduleListQuery } from '../protocol/schemas.js';
import { scheduleJobKey, type ScheduleRecord } from '../store/schedules.js';
import type { EngineContext } from './context.js';
import { prepareEnqueue } from './enqueue.js';
import type { Principal } from './principal.js';

const DEFAULT_LIST_LIMIT = 100;

export function toWireSchedule(record: ScheduleRecord): Schedule {
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

export async function putSchedule(ctx: EngineContext, principal: Principal, name: string, definition: ScheduleDefinition): Promise<Schedule> {
  const parsed = parseCron(definition.cron);
  if (!parsed.ok) throw new LeaseholdError('invalid_request', `body/cron: ${parsed.message}`);
  const timezone = canonicalTimeZone(definition.timezone ?? 'UTC');
  if (timezone === null) throw new LeaseholdError('invalid_request', 'body/timezone must be an IANA time zone such as Europe/Berlin or UTC');
  const now = await ctx.scheduler.now();
  const nextAt = nextOccurrence(parsed.cron, timezone, now);
  if (nextAt === null) throw new LeaseholdError('invalid_request', 'body/cron names no time within the next eight years');
  // The job as its occurrences will enqueue it: refused now if an enqueue would refuse it.
  const job = await prepareEnqueue(ctx, principal, { kind: definition.kind, payload: definition.payload }, scheduleJobKey(name, nextAt));
  const outcome = await ctx.store.scheduleUpsert({
    tenant: principal.tenant,
    name,
    owner: principal.user,
    kind: definition.kind,
    payload: definition.payload ?? null,
    payloadJson: job.payloadJson ?? canonicalJson(definition.payload ?? null),
    cron: parsed.cron.source,
    timezone,
    overlap: definition.overlap ?? 'skip',
    catchUp: definition.catchUp ?? 0,
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
}

/** One page, by name; nextCursor is the last name of the page while more follow. */
export async function listSchedules(ctx: EngineContext, principal: Principal, query: ScheduleListQuery): Promise<ScheduleList> {
  const limit = query.limit ?? DEFAULT_LIST_LIMIT;
  const rows = await ctx.store.scheduleList({
    tenant: principal.tenant,
    limit: limit + 1,
    ...(query.cursor === undefined ? {} : { after: query.cursor }),
  });
  const page = rows.slice(0, limit);
  return { schedules: page.map(toWireSchedule), nextCursor: rows.length > limit ? (page.at(-1)?.name ?? null) : null };
}

/** The schedule as it was; the jobs it enqueued stay. */
export async function deleteSchedule(ctx: EngineContext, principal: Principal, name: string): Promise<Schedule> {
  const existing = await ctx.store.scheduleGet({ tenant: principal.tenant, name });
  if (existing === null || !(await ctx.store.scheduleDelete({ tenant: principal.tenant, name }))) {
    throw new LeaseholdError('not_found', 'schedule not found');
  }
  ctx.scheduler.poke();
  return toWireSchedule(existing);
}
