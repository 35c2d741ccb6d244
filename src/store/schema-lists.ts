/**
 * The value lists the schema's CHECK constraints allow, taken from core's
 * constants and written as SQL literals, so both backends' migrations say the
 * same as JOB_STATUSES, ATTEMPT_OUTCOMES and ROLES. A migration applies once:
 * a value added to one of those lists later needs a new migration that
 * changes the CHECK of existing databases (test/unit/backend-mirror.test.ts
 * pins the lists the first migration applied).
 */

import { JOB_STATUSES, ROLES } from '../core/states.js';
import { ATTEMPT_OUTCOMES } from '../core/transitions.js';

function sqlList(values: readonly string[], separator: string): string {
  return values.map((value) => `'${value.replaceAll("'", "''")}'`).join(separator);
}

export const STATUS_LIST = sqlList(JOB_STATUSES, ',');
/** The statuses migration 1 applied, frozen: migration 9 widens the CHECK to STATUS_LIST (adding `waiting`). */
export const STATUS_LIST_V1 = sqlList(['queued', 'running', 'succeeded', 'dead', 'unknown', 'cancelled'], ',');
export const OUTCOME_LIST = sqlList(ATTEMPT_OUTCOMES, ',');
export const ROLE_LIST = sqlList(ROLES, ', ');
