/**
 * Recurring schedules as the store keeps them (src/engine/scheduler.ts
 * serves them). A schedule is a row per (tenant, name) holding its job (kind
 * and payload), its cron text and time zone, and where it stands: `nextAt`,
 * the first occurrence not yet handled, and `lastAt`/`lastJobId`, the last
 * occurrence enqueued. Times are the scheduler's clock, in ms.
 *
 * scheduleFire is the one write a scheduler pass makes per schedule: in one
 * transaction it checks that the row still has the `nextAt` the pass read,
 * enqueues the pass's jobs (idempotently: each job's key names its
 * occurrence), and moves `nextAt` and `lastAt` on. Two coordinators serving
 * the same occurrence both try; the second finds `nextAt` moved and writes
 * nothing, and if it did not, the idempotency key would still make one job.
 */

import type { EnqueueOutcome } from './store.js';

export type {
  ScheduleDueParams,
  ScheduleFireOutcome,
  ScheduleFireParams,
  ScheduleListParams,
  ScheduleOverlap,
  ScheduleRecord,
  ScheduleUpsertOutcome,
  ScheduleUpsertParams,
} from './store.js';

/** The idempotency key of a schedule's job for one occurrence: the occurrence is part of it. */
export function scheduleJobKey(name: string, occurrence: number): string {
  return `schedule:${name}:${new Date(occurrence).toISOString()}`;
}

/** The id a fired job's outcome names: the created or replayed job, or the one its key already named. */
export function outcomeJobId(outcome: EnqueueOutcome): string {
  return outcome.kind === 'conflict' ? outcome.existingJobId : outcome.job.id;
}
