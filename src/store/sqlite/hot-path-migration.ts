/**
 * Migration 14 (docs/adr/0002-storage-for-the-hot-path.md): queued jobs in job_ready, running jobs in job_leases,
 * the job row written at enqueue and at the end, the attempt row once at the end, counters moved in code.
 *
 * - job_ready holds a queued job that is not running, clustered in lease order (one B-tree per row) with only what
 *   the lease reads; a partial index finds the few with a deadline for the reaper.
 * - job_leases holds a running job: its epoch, token, worker and expiry, the attempt's start, effect mark and
 *   cancel request, and what a requeue or the lease's answer needs of the ready row it replaced. Its primary key
 *   admits one live lease per job. While it exists the job row keeps status 'queued' and its last attempt's values;
 *   the store shows the lease's (queries.ts LIVE_COLUMNS). So a lease and a retry write no index entry of jobs.
 * - jobs loses the indexes that churned with every status change; ended and waiting jobs are listed by status
 *   from jobs_by_status_ended, queued and running ones from the two tables. end_reserve holds, from enqueue to the
 *   end of the first attempt, the bytes the end writes into the row (its times, outcome, token and worker), so
 *   that the end rewrites the row in place instead of splitting its page.
 * - The counter triggers go: every transition moves the counter rows in code (counter-moves.ts). The counter
 *   rows already count each job under the status the store shows, which the move below does not change.
 *
 * An existing database's rows move in place: queued jobs get their ready rows, running jobs their lease rows
 * (with their epoch, token, expiry and the start of their open attempt, whose row goes: the lease row is the
 * running attempt now), and the job row becomes 'queued' with its last ended attempt's epoch and count.
 */
export const HOT_PATH_STORAGE_SQL = `
DROP TRIGGER job_counters_update;
DROP TRIGGER job_counters_delete;
DROP TRIGGER attempt_counters_end;
DROP TRIGGER attempt_counters_delete;
CREATE TABLE job_ready (
  tenant      TEXT    NOT NULL,
  kind        TEXT    NOT NULL,
  priority    INTEGER NOT NULL,
  run_after   INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  deadline_at INTEGER,
  attempts    INTEGER NOT NULL CHECK (attempts >= 0),
  epoch       INTEGER NOT NULL CHECK (epoch >= 0),
  PRIMARY KEY (tenant, kind, priority DESC, run_after, seq)
) WITHOUT ROWID;
CREATE INDEX job_ready_deadline ON job_ready (deadline_at) WHERE deadline_at IS NOT NULL;
CREATE TABLE job_leases (
  seq               INTEGER PRIMARY KEY REFERENCES jobs (seq),
  tenant            TEXT    NOT NULL,
  kind              TEXT    NOT NULL,
  priority          INTEGER NOT NULL,
  run_after         INTEGER NOT NULL,
  deadline_at       INTEGER,
  epoch             INTEGER NOT NULL CHECK (epoch >= 1),
  attempt           INTEGER NOT NULL CHECK (attempt >= 1),
  token             TEXT    NOT NULL,
  worker_id         TEXT    NOT NULL,
  started_at        INTEGER NOT NULL,
  expires_at        INTEGER NOT NULL,
  cancel_requested  INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
  effect_started_at INTEGER
);
CREATE INDEX job_leases_expiry ON job_leases (expires_at);
ALTER TABLE jobs ADD COLUMN end_reserve BLOB;

INSERT INTO job_ready (tenant, kind, priority, run_after, seq, deadline_at, attempts, epoch)
  SELECT tenant, kind, priority, run_after, seq, deadline_at, attempts, epoch FROM jobs WHERE status = 'queued';
INSERT INTO job_leases (seq, tenant, kind, priority, run_after, deadline_at, epoch, attempt, token, worker_id, started_at, expires_at,
    cancel_requested, effect_started_at)
  SELECT j.seq, j.tenant, j.kind, j.priority, j.run_after, j.deadline_at, j.epoch, j.attempts, j.lease_token,
      coalesce(a.worker_id, j.lease_owner, ''), coalesce(a.started_at, j.started_at, j.created_at), j.lease_expires_at, j.cancel_requested,
      j.effect_started_at
    FROM jobs j LEFT JOIN job_attempts a ON a.job_seq = j.seq AND a.epoch = j.epoch WHERE j.status = 'running';
DELETE FROM job_attempts WHERE ended_at IS NULL AND job_seq IN (SELECT seq FROM job_leases);
UPDATE jobs SET status = 'queued', lease_expires_at = NULL, epoch = epoch - 1, attempts = attempts - 1 WHERE status = 'running';
UPDATE jobs SET lease_expires_at = NULL WHERE lease_expires_at IS NOT NULL;

DROP INDEX jobs_available;
DROP INDEX jobs_available_by_kind;
DROP INDEX jobs_queued_by_run_after;
DROP INDEX jobs_delayed;
DROP INDEX jobs_lease_expiry;
DROP INDEX jobs_queued_deadline;
DROP INDEX jobs_by_status;
CREATE INDEX jobs_by_status_ended ON jobs (tenant, status, seq) WHERE status <> 'queued';
`;
