/**
 * The bodies of recurring schedules: what an admin sets with
 * `PUT /schedules/{name}`, the schedule as the coordinator answers it (with
 * its next and last occurrence), and the list of GET /schedules.
 */

import { Type, type Static } from '@sinclair/typebox';
import { KindName, Timestamp } from './common.js';
import { LIMITS } from './limits.js';

export const ScheduleName = Type.String({ minLength: 1, maxLength: LIMITS.scheduleNameLength, pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$' });

export const ScheduleOverlapSchema = Type.Union([Type.Literal('skip'), Type.Literal('allow')], {
  description: 'skip: no new occurrence is enqueued while the previous occurrence\u2019s job is queued or running',
});

export const ScheduleDefinition = Type.Object(
  {
    kind: KindName,
    payload: Type.Unknown(),
    cron: Type.String({
      minLength: 1,
      maxLength: LIMITS.cronLength,
      description: 'Five fields (minute hour day-of-month month day-of-week) or @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly',
    }),
    timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'An IANA time zone; UTC when absent' })),
    overlap: Type.Optional(ScheduleOverlapSchema),
    catchUp: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: LIMITS.maxScheduleCatchUp,
        description: 'After downtime: enqueue at most the last N missed occurrences (0: none); 0 when absent',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ScheduleDefinition = Static<typeof ScheduleDefinition>;

export const ScheduleParams = Type.Object({ name: ScheduleName });
export type ScheduleParams = Static<typeof ScheduleParams>;

export const Schedule = Type.Object({
  name: Type.String(),
  kind: Type.String(),
  payload: Type.Unknown(),
  cron: Type.String(),
  timezone: Type.String(),
  overlap: ScheduleOverlapSchema,
  catchUp: Type.Integer(),
  nextAt: Type.Union([Timestamp, Type.Null()], { description: 'The next occurrence; null when the expression names none within eight years' }),
  lastAt: Type.Union([Timestamp, Type.Null()], { description: 'The last occurrence enqueued; null before the first' }),
  lastJobId: Type.Union([Type.String(), Type.Null()], { description: 'The job of lastAt' }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type Schedule = Static<typeof Schedule>;

export const ScheduleListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.maxListLimit })),
    cursor: Type.Optional(Type.String({ maxLength: LIMITS.scheduleNameLength })),
  },
  { additionalProperties: false },
);
export type ScheduleListQuery = Static<typeof ScheduleListQuery>;

export const ScheduleList = Type.Object({ schedules: Type.Array(Schedule), nextCursor: Type.Union([Type.String(), Type.Null()]) });
export type ScheduleList = Static<typeof ScheduleList>;
