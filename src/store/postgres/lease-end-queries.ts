/**
 * The PostgreSQL statements of a running attempt and of its end: renew,
 * checkpoint, the effect mark, the one-statement completions and the ends of
 * leases that the locked paths apply (lease-endings.ts). Each repeats the
 * fence of the decide* function it applies (LIVE: the lease row under its
 * token, not expired, before the deadline). queries.ts exports them with the
 * other statements that move jobs.
 */

import { countJobs, countSums, countStoredBytes, movedTerms } from './counter-triggers.js';
import { leasesEnded, leasesFreed } from './group-queries.js';
import { endingInsert, interval, jobWithId, ms, namedQuery, readyInsert, ts } from './sql-fragments.js';

/** A live lease `l` before its deadline: the fence of the statements that need one (decide*'s 'go ahead'). */
const LIVE = `l.expires_at > now() AND (l.deadline_at IS NULL OR l.deadline_at > now())`;

/** The stored bytes of a job's progress and checkpoint state, as the counters count them. */
const jsonBytes = (expression: string): string => `coalesce(octet_length((${expression})::text), 0)`;

/**
 * Renew in one statement on the lease row: the WHERE is decideRenew's 'renew' branch (live lease, no cancel
 * requested, deadline not passed), the new expiry is capped at the deadline as there. Progress reported during
 * an attempt stays on its lease row until the end writes it into jobs; its bytes move the running counter.
 * When it matches nothing the store reads the row and lets decideRenew name the reason.
 */
export const JOB_RENEW = namedQuery(
  'lh_job_renew',
  `WITH o AS (
     SELECT l.job_seq, j.tenant, j.kind, ${jsonBytes('coalesce(l.progress, j.progress)')} AS old_bytes
       FROM jobs j JOIN job_leases l ON l.job_seq = j.seq
      WHERE ${jobWithId('$1')} AND j.tenant = $2 AND l.token = $3 AND ${LIVE} AND NOT j.cancel_requested
   ), renewed AS (
     UPDATE job_leases l SET expires_at = LEAST(now() + ${interval('$4')}, l.deadline_at),
            progress = CASE WHEN $5::boolean THEN $6::json ELSE l.progress END
       FROM o WHERE l.job_seq = o.job_seq AND l.token = $3 AND ${LIVE}
     RETURNING l.expires_at, o.tenant, o.kind, CASE WHEN $5::boolean THEN ${jsonBytes('$6::json')} - o.old_bytes ELSE 0 END AS delta
   ), counted AS (
     ${countStoredBytes('renewed', "'running'")}
   )
   SELECT ${ms('expires_at')} AS lease_expires_at FROM renewed`,
);

/** The end of an attempt: the lease row `e` written into the job's row (its epoch, attempt, token, worker, start, effect mark, progress). */
const LEASE_INTO_JOB = `epoch = e.epoch, attempts = e.attempt, lease_token = e.token, lease_owner = e.worker_id,
            started_at = coalesce(j.started_at, e.started_at), effect_started_at = e.effect_started_at,
            progress = coalesce(e.progress, j.progress)`;

/** The ended attempts of `ended` (deleted lease rows with `outcome` and `attempt_code` columns). */
function attemptRows(ended: string, outcome: string, code: string): string {
  return `INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at, ended_at, outcome, error_code)
     SELECT job_seq, epoch, attempt, worker_id, started_at, now(), ${outcome}, ${code} FROM ${ended}`;
}

/** What an end adds to tenant_sums: each ended attempt's run time, and the results inserted (`results` with job_id and size_bytes). */
function endSums(ended: string, moved: string, results: string): string {
  return countSums(`SELECT e.tenant, 1 AS ended_attempts, ${ms('now()')}::bigint - ${ms('e.started_at')}::bigint AS attempt_run_ms, 0 AS result_bytes
        FROM ${ended} e
      UNION ALL
      SELECT m.tenant, 0, 0, x.size_bytes FROM ${results} x JOIN ${moved} m ON m.id = x.job_id`);
}

/**
 * Complete in one statement, mirroring decideCompletion's 'commit' branch (live lease and deadline not passed):
 * the lease row deleted by its token, the job's row written once, its result and its ended attempt inserted,
 * the counters moved. The jobs rows are locked first, in id order, like every path that ends a lease. Jobs
 * with children or a key take the locked path (dependencies.ts), so they are left out here; items that match
 * nothing are explained afterwards from JOB_PEEK or JOB_PEEK_MANY.
 */
function completeStatement(name: string, input: string): ReturnType<typeof namedQuery> {
  return namedQuery(
    name,
    `WITH c AS (
       ${input}
     ), target AS MATERIALIZED (
       SELECT j.seq, c.token FROM c JOIN jobs j ON j.id = c.id AND j.tenant = c.tenant
        WHERE NOT j.has_children AND j.concurrency_key IS NULL ORDER BY j.id FOR UPDATE OF j
     ), ended AS (
       DELETE FROM job_leases l USING target t WHERE l.job_seq = t.seq AND l.token = t.token AND ${LIVE}
       RETURNING l.*
     ), ${leasesFreed('ended')}, done AS (
       UPDATE jobs j SET status = 'succeeded', finished_at = now(), last_outcome = 'succeeded',
              last_error_code = NULL, last_error_message = NULL, last_error_class = NULL, ${LEASE_INTO_JOB}
         FROM ended e WHERE j.seq = e.job_seq
       RETURNING j.*
     ), result_rows AS (
       INSERT INTO job_results (job_id, content_type, body, checksum, size_bytes)
       SELECT c.id, c.content_type, c.body, c.checksum, octet_length(c.body) FROM c JOIN done ON done.id = c.id WHERE c.content_type IS NOT NULL
       RETURNING job_id, size_bytes
     ), ending_rows AS (
       ${endingInsert('done')}
     ), attempt_rows AS (
       ${attemptRows('ended', "'succeeded'", 'NULL')}
     ), counted AS (
       ${countJobs(movedTerms('done', "'running'"))}
     ), summed AS (
       ${endSums('ended', 'done', 'result_rows')}
     )
     SELECT id::text AS id FROM done`,
  );
}

export const JOB_COMPLETE_ONE = completeStatement(
  'lh_job_complete_one',
  `SELECT $1::uuid AS id, $2::text AS tenant, $3::text AS token, $4::text AS content_type, $5::bytea AS body, $6::text AS checksum`,
);

/** JOB_COMPLETE_ONE for a batch of distinct jobs. */
export const JOB_COMPLETE_MANY = completeStatement(
  'lh_job_complete_many',
  `SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[]) AS c(id, tenant, token, content_type, body, checksum)`,
);

/**
 * Applies decisions that end a lease, for many jobs at once: success (with results), retry, dead, cancelled,
 * unknown. The callers hold the jobs rows locked. $9 says whether the lease must still be live (complete,
 * fail) or already expired (the reaper); with the token in the WHERE clause that is the fence. A retry goes
 * back to job_ready.
 */
export const JOB_END_LEASES = namedQuery(
  'lh_job_end_leases',
  `WITH d AS (
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::text[], $14::text[])
       AS d(id, token, status, outcome, code, message, run_after, attempt_code, error_class)
   ), ended AS (
     DELETE FROM job_leases l USING d, jobs j
      WHERE j.id = d.id AND l.job_seq = j.seq AND l.token = d.token AND (l.expires_at > now()) = $9
     RETURNING l.*, d.status AS new_status, d.outcome, d.code, d.message, d.run_after AS retry_at, d.attempt_code, d.error_class
   ), moved AS (
     UPDATE jobs j SET status = e.new_status, last_outcome = e.outcome,
            run_after = CASE WHEN e.new_status = 'queued' THEN coalesce(${ts('e.retry_at')}, now()) ELSE j.run_after END,
            finished_at = CASE WHEN e.new_status = 'queued' THEN j.finished_at ELSE now() END,
            last_error_code = e.code, last_error_message = e.message, last_error_class = e.error_class, ${LEASE_INTO_JOB},
            key_turn = CASE WHEN e.new_status = 'queued' THEN j.key_turn END, key_active = CASE WHEN e.new_status = 'queued' THEN j.key_active END
       FROM ended e WHERE j.seq = e.job_seq
     RETURNING j.*
   ), ready AS (
     ${readyInsert('moved')}
   ), ${leasesEnded('ended', 'moved')}, ending_rows AS (
     ${endingInsert('moved')}
   ), result_rows AS (
     INSERT INTO job_results (job_id, content_type, body, checksum, size_bytes)
     SELECT r.id, r.content_type, r.body, r.checksum, octet_length(r.body)
       FROM unnest($10::uuid[], $11::text[], $12::bytea[], $13::text[]) AS r(id, content_type, body, checksum)
       JOIN moved ON moved.id = r.id AND moved.status = 'succeeded'
     RETURNING job_id, size_bytes
   ), attempt_rows AS (
     ${attemptRows('ended', 'outcome', 'attempt_code')}
   ), counted AS (
     ${countJobs(movedTerms('moved', "'running'"))}
   ), summed AS (
     ${endSums('ended', 'moved', 'result_rows')}
   )
   SELECT id::text AS id, tenant, status FROM moved`,
);

/**
 * Checkpoint and effect marks need a live lease before the deadline (decideLiveLeaseWrite's 'apply') on the job
 * `j` that `job` finds (by default job $1 of tenant $2).
 */
const liveLeaseGuard = (job = `${jobWithId('$1')} AND j.tenant = $2`): string => `${job} AND l.job_seq = j.seq AND l.token = $3 AND ${LIVE}`;

/** The checkpoint is the job's (later attempts resume from it), so it goes into jobs; its bytes move the running counter. */
export const JOB_CHECKPOINT = namedQuery(
  'lh_job_checkpoint',
  `WITH o AS (
     SELECT j.seq, ${jsonBytes('j.checkpoint_state')} AS old_bytes FROM jobs j WHERE ${jobWithId('$1')} AND j.tenant = $2
   ), saved AS (
     UPDATE jobs j SET checkpoint_step = $4, checkpoint_state = $5::json FROM job_leases l, o
      WHERE ${liveLeaseGuard('j.seq = o.seq')}
     RETURNING j.id, j.tenant, j.kind, ${jsonBytes('j.checkpoint_state')} - o.old_bytes AS delta
   ), counted AS (
     ${countStoredBytes('saved', "'running'")}
   )
   SELECT id FROM saved`,
);

/** The effect mark belongs to the attempt: on its lease row, written into jobs at the end. */
export const JOB_EFFECT_STARTED = namedQuery(
  'lh_job_effect_started',
  `UPDATE job_leases l SET effect_started_at = coalesce(l.effect_started_at, now()) FROM jobs j WHERE ${liveLeaseGuard()} RETURNING j.id`,
);
