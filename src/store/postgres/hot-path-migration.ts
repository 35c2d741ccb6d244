import { OUTCOME_LIST } from '../schema-lists.js';
import { DROP_COUNTER_TRIGGERS_SQL } from './counter-triggers.js';

/**
 * Migration 14 (issue 28, ADR 0002 design d): the hot path stops rewriting the job row.
 * - job_ready holds the queued jobs only, with what the lease reads, under one index in lease order (the pick,
 *   the next due times and the oldest available job all walk it); a partial index finds passed deadlines.
 * - job_leases holds the running jobs: the row is the running attempt (epoch, token, worker, expiry, effect
 *   mark, progress reported during it); its primary key admits one live lease per job; the reaper walks its
 *   expiry index. While it runs, a job's row in jobs keeps the status 'queued' and the epoch and attempts of
 *   its previous lease; reads join the lease (sql-fragments.ts) and the end writes the row once.
 * - job_attempts holds ended attempts only, written once at the end, keyed by the job's bigint seq.
 * - jobs is keyed by seq inside (the public uuid keeps a unique index). No index of jobs reads a column that
 *   the end writes (status, finished_at, the lease's columns), so the end is a HOT update, and fillfactor 50
 *   leaves room on the page for that version. PostgreSQL counts an index predicate's columns too, so the
 *   concurrency key's indexes read key_turn and key_active (the key while the job holds its turn, or is queued
 *   or running; NULL otherwise) instead of status, and the ended jobs retention walks are rows of job_endings
 *   (status, finished_at, seq), inserted when a job ends and deleted when it leaves that status.
 * - The counter triggers are gone: each statement that moves a job moves its counters (counter-triggers.ts).
 * A running job's jobs row steps back to its previous lease (epoch and attempts one lower), its running
 * attempt row becomes its lease row, and the counters (which counted it as running) stay as they are.
 */
export const HOT_PATH_STORAGE_SQL = `
${DROP_COUNTER_TRIGGERS_SQL}
DROP INDEX jobs_available, jobs_available_by_kind, jobs_lease_expiry, jobs_queued_deadline, jobs_delayed, jobs_queued_by_run_after;

CREATE TABLE job_ready (
  tenant      text        NOT NULL,
  kind        text        NOT NULL,
  priority    integer     NOT NULL,
  run_after   timestamptz NOT NULL,
  seq         bigint      NOT NULL,
  deadline_at timestamptz
);
CREATE INDEX job_ready_order ON job_ready (tenant, kind, priority DESC, run_after, seq) INCLUDE (deadline_at);
CREATE INDEX job_ready_deadline ON job_ready (deadline_at) WHERE deadline_at IS NOT NULL;

CREATE TABLE job_leases (
  job_seq           bigint      PRIMARY KEY,
  tenant            text        NOT NULL,
  kind              text        NOT NULL,
  epoch             integer     NOT NULL CHECK (epoch >= 1),
  attempt           integer     NOT NULL CHECK (attempt >= 1),
  token             text        NOT NULL,
  worker_id         text        NOT NULL,
  started_at        timestamptz NOT NULL,
  expires_at        timestamptz NOT NULL,
  deadline_at       timestamptz,
  effect_started_at timestamptz,
  progress          json
);
CREATE INDEX job_leases_expiry ON job_leases (expires_at);

INSERT INTO job_leases (job_seq, tenant, kind, epoch, attempt, token, worker_id, started_at, expires_at, deadline_at, effect_started_at)
SELECT j.seq, j.tenant, j.kind, j.epoch, j.attempts, j.lease_token, coalesce(j.lease_owner, ''),
       coalesce((SELECT a.started_at FROM job_attempts a WHERE a.job_id = j.id AND a.epoch = j.epoch), j.started_at, now()),
       j.lease_expires_at, j.deadline_at, j.effect_started_at
  FROM jobs j WHERE j.status = 'running';

CREATE TABLE job_attempts_by_seq (
  job_seq    bigint      NOT NULL,
  epoch      integer     NOT NULL,
  attempt    integer     NOT NULL CHECK (attempt >= 1),
  worker_id  text        NOT NULL,
  started_at timestamptz NOT NULL,
  ended_at   timestamptz,
  outcome    text        CHECK (outcome IS NULL OR outcome IN (${OUTCOME_LIST})),
  error_code text,
  PRIMARY KEY (job_seq, epoch)
);
INSERT INTO job_attempts_by_seq (job_seq, epoch, attempt, worker_id, started_at, ended_at, outcome, error_code)
SELECT j.seq, a.epoch, a.attempt, a.worker_id, a.started_at, a.ended_at, a.outcome, a.error_code
  FROM job_attempts a JOIN jobs j ON j.id = a.job_id
 WHERE NOT (j.status = 'running' AND a.epoch = j.epoch);
DROP TABLE job_attempts;
ALTER TABLE job_attempts_by_seq RENAME TO job_attempts;
ALTER INDEX job_attempts_by_seq_pkey RENAME TO job_attempts_pkey;

UPDATE jobs SET status = 'queued', epoch = epoch - 1, attempts = attempts - 1, effect_started_at = NULL WHERE status = 'running';
ALTER TABLE jobs DROP COLUMN lease_expires_at;
ALTER TABLE jobs ADD CONSTRAINT jobs_not_running CHECK (status <> 'running');

INSERT INTO job_ready (tenant, kind, priority, run_after, seq, deadline_at)
SELECT j.tenant, j.kind, j.priority, j.run_after, j.seq, j.deadline_at FROM jobs j
 WHERE j.status = 'queued' AND NOT EXISTS (SELECT 1 FROM job_leases l WHERE l.job_seq = j.seq);

-- The uuid stays the public key (a unique index) and keeps the dependency edges' references; seq is the key inside.
ALTER TABLE jobs DROP CONSTRAINT jobs_pkey CASCADE;
ALTER TABLE jobs ADD CONSTRAINT jobs_id_key UNIQUE (id);
ALTER TABLE jobs ADD PRIMARY KEY (seq);
ALTER TABLE job_dependencies ADD FOREIGN KEY (parent_id) REFERENCES jobs (id);
ALTER TABLE job_dependencies ADD FOREIGN KEY (child_id) REFERENCES jobs (id);

ALTER TABLE jobs ADD COLUMN key_turn text;
ALTER TABLE jobs ADD COLUMN key_active text;
UPDATE jobs SET key_turn = concurrency_key, key_active = CASE WHEN status = 'queued' THEN concurrency_key END
 WHERE concurrency_key IS NOT NULL AND status IN ('queued', 'waiting');
DROP INDEX jobs_key_turn, jobs_key_active, jobs_finished, jobs_needing_attention;
CREATE INDEX jobs_key_turn ON jobs (tenant, kind, key_turn, seq) WHERE key_turn IS NOT NULL;
CREATE INDEX jobs_key_active ON jobs (tenant, kind, key_active, seq) WHERE key_active IS NOT NULL;

CREATE TABLE job_endings (
  status      text        NOT NULL CHECK (status IN ('succeeded', 'dead', 'cancelled', 'unknown')),
  finished_at timestamptz NOT NULL,
  seq         bigint      NOT NULL
);
CREATE INDEX job_endings_finished ON job_endings (status, finished_at, seq);
INSERT INTO job_endings (status, finished_at, seq)
SELECT status, coalesce(finished_at, created_at), seq FROM jobs WHERE status IN ('succeeded', 'dead', 'cancelled', 'unknown');

ALTER TABLE jobs SET (fillfactor = 50);
ALTER TABLE job_attempts SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
  autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 1, vacuum_truncate = false);
ALTER TABLE job_ready SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
  autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 1, vacuum_truncate = false);
ALTER TABLE job_leases SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
  autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 1, vacuum_truncate = false);
ALTER TABLE job_endings SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
  autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 1, vacuum_truncate = false);
`;
