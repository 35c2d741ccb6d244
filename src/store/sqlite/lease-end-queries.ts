/**
 * The SQLite statements of a running attempt and of its end: renew, progress,
 * checkpoint, the effect mark, and the guarded end of a lease with the job's
 * row and attempt row it writes (lease-endings.ts applies them). Each keeps
 * the fence of the decide* function it applies: the lease row under its token
 * and not expired. queries.ts spreads them into SQL, where the store prepares
 * them with the rest.
 */

export const LEASE_END_SQL = {
  /** The attempt's row, written once when it ends (migration 14): the lease row was the running attempt. */
  attemptInsert: `INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at, ended_at, outcome, error_code)
    VALUES (@seq, @epoch, @attempt, @workerId, @startedAt, @now, @outcome, @attemptCode)`,
  /**
   * The guarded end of a lease (complete, fail, the reaper): the lease row goes only under its token, live
   * (@live = 1: complete, fail) or run out (0: the reaper); its expiry is capped at the job's deadline, so a
   * live lease is within the deadline too. What it returns is the attempt that ended, which the job's end and
   * its attempt row write.
   */
  leaseEnd: `DELETE FROM job_leases WHERE seq = @seq AND token = @token AND (expires_at > @now) = @live
    RETURNING epoch, attempt, worker_id, started_at, cancel_requested, effect_started_at, group_key`,
  /**
   * Applies an ending of src/store/lease-endings.ts to a job whose lease leaseEnd just removed: success, retry,
   * dead, cancelled, unknown; the attempt's values become the row's, and end_reserve gives its bytes back.
   */
  jobEnd: `UPDATE jobs SET status = @status, last_outcome = @outcome, epoch = @epoch, attempts = @attempt, lease_owner = @workerId,
      lease_token = @token, started_at = coalesce(started_at, @startedAt), run_after = @runAfter,
      finished_at = CASE WHEN @status = 'queued' THEN finished_at ELSE @now END, cancel_requested = @cancelRequested,
      effect_started_at = @effectStartedAt, last_error_code = @code, last_error_message = @message, last_error_class = @errorClass,
      end_reserve = NULL
    WHERE seq = @seq AND status = 'queued'`,
  /**
   * leaseEnd for a batch of live leases (@rows: a JSON array of [seq, token]), one statement: each lease row found
   * by its row id, its token checked. The attempts that end are the batch's snapshots (jobLockMany), read in the
   * same write transaction: it returns nothing, and must remove every row it names.
   */
  leaseEndMany: `DELETE FROM job_leases WHERE (seq, token) IN (SELECT value ->> 0, value ->> 1 FROM json_each(@rows)) AND expires_at > @now`,
  /**
   * jobEnd for a batch of jobs that end alike (@status, @outcome and the last error bound once; @rows: a JSON array of
   * [seq, epoch, attempt, worker, token, started_at, cancel_requested, effect_started_at]), one statement.
   */
  jobEndMany: `UPDATE jobs SET status = @status, last_outcome = @outcome, epoch = e.value ->> 1, attempts = e.value ->> 2,
      lease_owner = e.value ->> 3, lease_token = e.value ->> 4, started_at = coalesce(jobs.started_at, e.value ->> 5), finished_at = @now,
      cancel_requested = e.value ->> 6, effect_started_at = e.value ->> 7, last_error_code = @code, last_error_message = @message,
      last_error_class = @errorClass, end_reserve = NULL
    FROM json_each(@rows) e WHERE jobs.seq = e.value ->> 0 AND jobs.status = 'queued'`,
  /** attemptInsert for the same batch (@rows as jobEndMany's), one statement. */
  attemptInsertMany: `INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at, ended_at, outcome, error_code)
    SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 5, @now, @outcome, @attemptCode FROM json_each(@rows)`,
  leaseRenew: `UPDATE job_leases SET expires_at = @leaseExpiresAt WHERE seq = @seq AND token = @token AND expires_at > @now`,
  /** A write to a job's row under its live lease (progress, checkpoint): the same guard as the lease row's statements. */
  jobProgress: `UPDATE jobs SET progress = @progress
    WHERE seq = @seq AND EXISTS (SELECT 1 FROM job_leases l WHERE l.seq = @seq AND l.token = @token AND l.expires_at > @now)`,
  resultInsert: `INSERT INTO job_results (job_seq, content_type, body, checksum, size_bytes) VALUES (?, ?, ?, ?, ?)`,
  /** Bytes of a job's checkpoint state and progress, to move the tenant's storage counter by the change. */
  jobMutableBytes: `SELECT coalesce(length(CAST(checkpoint_state AS BLOB)), 0) + coalesce(length(CAST(progress AS BLOB)), 0) AS bytes
    FROM jobs WHERE seq = ?`,
  jobCheckpoint: `UPDATE jobs SET checkpoint_step = @step, checkpoint_state = @state
    WHERE seq = @seq AND EXISTS (SELECT 1 FROM job_leases l WHERE l.seq = @seq AND l.token = @token AND l.expires_at > @now)`,
  leaseEffectStarted: `UPDATE job_leases SET effect_started_at = coalesce(effect_started_at, @now)
    WHERE seq = @seq AND token = @token AND expires_at > @now`,
} as const;
