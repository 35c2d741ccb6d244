/**
 * The statements of the dedupe and unique keys of an enqueue (enqueue-keys.ts), kept apart from queries.ts for
 * its length (which exports them). Each holder is read by one entry of its unique index (migration 13: the key
 * columns and the index's (tenant, owner, kind) are all bound, and `key = $4` implies the index's `IS NOT
 * NULL`), with the transaction's clock, so that core/dedupe.ts decides on the same milliseconds the guards
 * compare. Every write restates the decision it applies; one that matches nothing means another transaction
 * moved the holder first, and the enqueue looks again.
 */

import { PURGEABLE_STATUSES } from '../../core/states.js';
import { countStoredBytes } from './counter-triggers.js';
import { JOB_FROM, JOB_STATUS, ms, namedQuery, NOW_MS, readyInsert, readyRowOf, ts } from './sql-fragments.js';

/**
 * A dedupe key's holder that still takes duplicates (core/dedupe.ts takesDuplicates), by the transaction's clock:
 * queued or waiting and never leased. A job running its first attempt still says 'queued' and epoch 0 in jobs;
 * its lease row says otherwise.
 */
const TAKES_DUPLICATES = `j.status IN ('queued', 'waiting') AND j.epoch = 0 AND ${ms('j.dedupe_until')} > ${ms('now()')}
      AND NOT EXISTS (SELECT 1 FROM job_leases l WHERE l.job_seq = j.seq)`;
/** The finished statuses, after which a unique key's holder keeps it for forMs (core/dedupe.ts decideUnique). */
const FINISHED = PURGEABLE_STATUSES.map((status) => `'${status}'`).join(', ');

/** The job of (tenant, owner, kind) that holds a dedupe key: one entry of jobs_dedupe_key. */
export const JOB_DEDUPE_HOLDER = namedQuery(
  'lh_job_dedupe_holder',
  `SELECT j.id::text AS id, ${JOB_STATUS} AS status, coalesce(l.epoch, j.epoch) AS epoch, ${ms('j.created_at')} AS created_at,
          ${ms('j.run_after')} AS run_after, ${ms('j.dedupe_until')} AS dedupe_until, ${NOW_MS}
     FROM ${JOB_FROM} WHERE j.tenant = $1 AND j.owner = $2 AND j.kind = $3 AND j.dedupe_key = $4`,
);

/**
 * decideDedupe's merge, guarded by takesDuplicates: the payload when $3, runAfter and the window never moved
 * earlier (greatest: two merges of one holder commit in either order). A queued holder's ready row is taken
 * out first and put back with the new runAfter: a lease that took the holder first leaves it unmatched, and a
 * lease whose snapshot predates the merge cannot see the new row (so it never leases the old payload after the
 * merge committed). The payload's bytes move the holder's counter.
 */
export const JOB_DEDUPE_MERGE = namedQuery(
  'lh_job_dedupe_merge',
  `WITH gone AS (
     DELETE FROM job_ready r USING jobs j
      WHERE j.id = $1::uuid AND j.dedupe_key = $2 AND j.status = 'queued' AND ${TAKES_DUPLICATES} AND ${readyRowOf('r', 'j')}
     RETURNING r.seq
   ), old AS (
     SELECT j.seq, j.payload_bytes FROM jobs j WHERE j.id = $1::uuid
   ), merged AS (
     UPDATE jobs j SET payload = CASE WHEN $3::boolean THEN $4::json ELSE j.payload END,
            payload_bytes = CASE WHEN $3::boolean THEN $5::int ELSE j.payload_bytes END,
            run_after = greatest(j.run_after, ${ts('$6')}), dedupe_until = greatest(j.dedupe_until, ${ts('$7')})
       FROM old
      WHERE j.id = $1::uuid AND old.seq = j.seq AND j.dedupe_key = $2 AND ${TAKES_DUPLICATES}
        AND (j.status = 'waiting' OR j.seq IN (SELECT seq FROM gone))
     RETURNING j.*, j.payload_bytes - old.payload_bytes AS delta
   ), ready AS (
     ${readyInsert('merged')}
   ), counted AS (
     ${countStoredBytes('merged')}
   )
   SELECT id::text AS id FROM merged`,
);

/** decideDedupe's release: a holder that takes no more duplicates gives its key up to the job about to be inserted. */
export const JOB_DEDUPE_RELEASE = namedQuery(
  'lh_job_dedupe_release',
  `UPDATE jobs j SET dedupe_key = NULL, dedupe_until = NULL WHERE j.id = $1::uuid AND j.dedupe_key = $2 AND NOT (${TAKES_DUPLICATES})`,
);

/** The job of (tenant, owner, kind) that holds a unique key: one entry of jobs_unique_key. */
export const JOB_UNIQUE_HOLDER = namedQuery(
  'lh_job_unique_holder',
  `SELECT j.id::text AS id, ${JOB_STATUS} AS status, ${ms('j.finished_at')} AS finished_at, ${NOW_MS}
     FROM ${JOB_FROM} WHERE j.tenant = $1 AND j.owner = $2 AND j.kind = $3 AND j.unique_key = $4`,
);

/**
 * decideUnique's release: a holder finished at least $3 ms ago gives its key up to the job about to be inserted.
 * An operator's requeue that committed first leaves it unmatched.
 */
export const JOB_UNIQUE_RELEASE = namedQuery(
  'lh_job_unique_release',
  `UPDATE jobs j SET unique_key = NULL
    WHERE j.id = $1::uuid AND j.unique_key = $2 AND j.status IN (${FINISHED}) AND ${ms('j.finished_at')} + $3::float8 <= ${ms('now()')}`,
);
