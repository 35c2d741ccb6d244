/**
 * Versioned schema for the SQLite backend, applied in order at open inside one
 * IMMEDIATE transaction. Versions and names match src/store/postgres/migrations.ts
 * (a test keeps them in step). Invariants live in the schema as CHECKs and
 * triggers, so a bug in code cannot write a state the design forbids.
 */

import { OUTCOME_LIST, ROLE_LIST, STATUS_LIST, STATUS_LIST_V1 } from '../schema-lists.js';
import { ATTEMPT_COUNTER_TRIGGERS, JOB_COUNTER_TRIGGERS, JOB_COUNTERS_SQL } from './counter-triggers.js';
import { FAIR_SHARE_GROUPS_SQL } from './group-migration.js';
import { HOT_PATH_STORAGE_SQL } from './hot-path-migration.js';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** Migration 1's trigger on job_results, which reads jobs (dropped and created again around the rebuild of migration 9). */
const RESULTS_ONLY_FOR_SUCCEEDED = `-- A result exists only for a succeeded job: the completion transaction marks
-- the job first and inserts the result second.
CREATE TRIGGER job_results_only_for_succeeded
BEFORE INSERT ON job_results
WHEN (SELECT status FROM jobs WHERE seq = NEW.job_seq) IS NOT 'succeeded'
BEGIN
  SELECT RAISE(ABORT, 'result for a job that is not succeeded');
END;`;

/** The columns of jobs after migration 8, in table order: what the rebuild of migration 9 copies. */
const JOB_COLUMNS_V8 = `seq, id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status, attempts, max_attempts,
  priority, run_after, deadline_ms, deadline_at, lease_owner, lease_expires_at, epoch, lease_token, last_outcome, created_at,
  started_at, finished_at, last_error_code, last_error_message, progress, cancel_requested, effect_started_at, checkpoint_step,
  checkpoint_state, last_error_class`;

/**
 * Migration 9: the status `waiting` and the columns of dependencies and per-key ordering (core/dependencies.ts).
 * SQLite cannot alter a CHECK, so jobs is rebuilt by the documented procedure (create the new table, copy, drop,
 * rename, create every index and trigger again), with foreign keys off for the migration (migrate.ts) and checked
 * before it commits. The triggers of other tables that read jobs are dropped first: a rename refuses a schema
 * in which a trigger names a table that does not exist at that moment.
 */
const DEPENDENCIES_SQL = `
DROP TRIGGER job_results_only_for_succeeded;
DROP TRIGGER attempt_counters_end;
DROP TRIGGER attempt_counters_delete;
CREATE TABLE jobs_v9 (
  seq               INTEGER PRIMARY KEY,
  id                TEXT    NOT NULL UNIQUE,
  tenant            TEXT    NOT NULL,
  owner             TEXT    NOT NULL,
  idempotency_key   TEXT    NOT NULL,
  request_hash      TEXT    NOT NULL,
  kind              TEXT    NOT NULL,
  payload           TEXT    NOT NULL,
  payload_bytes     INTEGER NOT NULL CHECK (payload_bytes >= 0),
  status            TEXT    NOT NULL CHECK (status IN (${STATUS_LIST})),
  attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  max_attempts      INTEGER NOT NULL CHECK (max_attempts >= 1),
  priority          INTEGER NOT NULL DEFAULT 0,
  run_after         INTEGER NOT NULL,
  deadline_ms       INTEGER CHECK (deadline_ms IS NULL OR deadline_ms > 0),
  deadline_at       INTEGER,
  lease_owner       TEXT,
  lease_expires_at  INTEGER,
  epoch             INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),
  lease_token       TEXT,
  last_outcome      TEXT CHECK (last_outcome IS NULL OR last_outcome IN (${OUTCOME_LIST})),
  created_at        INTEGER NOT NULL,
  started_at        INTEGER,
  finished_at       INTEGER,
  last_error_code   TEXT,
  last_error_message TEXT,
  progress          TEXT,
  cancel_requested  INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
  effect_started_at INTEGER,
  checkpoint_step   INTEGER CHECK (checkpoint_step IS NULL OR checkpoint_step >= 0),
  checkpoint_state  TEXT,
  last_error_class  TEXT,
  -- Parents not yet succeeded; only a waiting job counts any (a dead or cancelled one keeps what it had).
  pending_parents   INTEGER NOT NULL DEFAULT 0 CHECK (pending_parents >= 0),
  -- Some job names this one in dependsOn: its end looks for waiting children.
  has_children      INTEGER NOT NULL DEFAULT 0 CHECK (has_children IN (0, 1)),
  concurrency_key   TEXT,
  CHECK (status <> 'running' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
  CHECK (attempts <= max_attempts OR status <> 'running'),
  CHECK (pending_parents = 0 OR status IN ('waiting', 'dead', 'cancelled')),
  UNIQUE (tenant, owner, idempotency_key)
);
INSERT INTO jobs_v9 (${JOB_COLUMNS_V8}) SELECT ${JOB_COLUMNS_V8} FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v9 RENAME TO jobs;
CREATE INDEX jobs_available ON jobs (tenant, priority DESC, run_after, seq) WHERE status = 'queued';
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE status = 'running';
CREATE INDEX jobs_queued_deadline ON jobs (deadline_at) WHERE status = 'queued' AND deadline_at IS NOT NULL;
CREATE INDEX jobs_by_status ON jobs (tenant, status, seq);
CREATE INDEX jobs_by_owner ON jobs (tenant, owner, seq);
CREATE INDEX jobs_available_by_kind ON jobs (tenant, kind, priority DESC, run_after, seq) WHERE status = 'queued';
CREATE INDEX jobs_by_tenant ON jobs (tenant, seq);
CREATE INDEX jobs_queued_by_run_after ON jobs (tenant, run_after) WHERE status = 'queued';
CREATE INDEX jobs_delayed ON jobs (tenant, kind, run_after) WHERE status = 'queued';
CREATE INDEX jobs_finished ON jobs (status, finished_at) WHERE status IN ('succeeded', 'cancelled', 'dead');
${JOB_COUNTER_TRIGGERS}
${ATTEMPT_COUNTER_TRIGGERS}
${RESULTS_ONLY_FOR_SUCCEEDED}

-- Edges parent → child. The primary key finds a parent's children (its end), the second index a child's parents.
CREATE TABLE job_dependencies (
  parent_seq INTEGER NOT NULL REFERENCES jobs (seq),
  child_seq  INTEGER NOT NULL REFERENCES jobs (seq),
  PRIMARY KEY (parent_seq, child_seq)
) WITHOUT ROWID;
CREATE INDEX job_dependencies_child ON job_dependencies (child_seq);
-- A key's jobs that hold its turn, in enqueue order (the head is the next to run), and those queued or running.
-- Both hold keyed jobs only, so jobs without a key add no entry.
CREATE INDEX jobs_key_turn ON jobs (tenant, kind, concurrency_key, seq)
  WHERE concurrency_key IS NOT NULL AND status IN ('queued', 'waiting', 'running');
CREATE INDEX jobs_key_active ON jobs (tenant, kind, concurrency_key, seq)
  WHERE concurrency_key IS NOT NULL AND status IN ('queued', 'running');
`;

/** Migration 13 (core/dedupe.ts): the two keys of an enqueue that can fold or refuse it. */
const DEDUPE_KEYS_SQL = `ALTER TABLE jobs ADD COLUMN dedupe_key TEXT;
ALTER TABLE jobs ADD COLUMN dedupe_until INTEGER CHECK ((dedupe_until IS NULL) = (dedupe_key IS NULL));
ALTER TABLE jobs ADD COLUMN unique_key TEXT;
CREATE UNIQUE INDEX jobs_dedupe_key ON jobs (tenant, owner, kind, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE UNIQUE INDEX jobs_unique_key ON jobs (tenant, owner, kind, unique_key) WHERE unique_key IS NOT NULL;`;

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE jobs (
  seq               INTEGER PRIMARY KEY,
  id                TEXT    NOT NULL UNIQUE,
  tenant            TEXT    NOT NULL,
  owner             TEXT    NOT NULL,
  idempotency_key   TEXT    NOT NULL,
  request_hash      TEXT    NOT NULL,
  kind              TEXT    NOT NULL,
  payload           TEXT    NOT NULL,
  payload_bytes     INTEGER NOT NULL CHECK (payload_bytes >= 0),
  status            TEXT    NOT NULL CHECK (status IN (${STATUS_LIST_V1})),
  attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  max_attempts      INTEGER NOT NULL CHECK (max_attempts >= 1),
  priority          INTEGER NOT NULL DEFAULT 0,
  run_after         INTEGER NOT NULL,
  deadline_ms       INTEGER CHECK (deadline_ms IS NULL OR deadline_ms > 0),
  deadline_at       INTEGER,
  lease_owner       TEXT,
  lease_expires_at  INTEGER,
  epoch             INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),
  lease_token       TEXT,
  last_outcome      TEXT CHECK (last_outcome IS NULL OR last_outcome IN (${OUTCOME_LIST})),
  created_at        INTEGER NOT NULL,
  started_at        INTEGER,
  finished_at       INTEGER,
  last_error_code   TEXT,
  last_error_message TEXT,
  progress          TEXT,
  cancel_requested  INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
  effect_started_at INTEGER,
  checkpoint_step   INTEGER CHECK (checkpoint_step IS NULL OR checkpoint_step >= 0),
  checkpoint_state  TEXT,
  CHECK (status <> 'running' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
  CHECK (attempts <= max_attempts OR status <> 'running'),
  UNIQUE (tenant, owner, idempotency_key)
);

-- The lease query walks this partial index in lease order.
CREATE INDEX jobs_available ON jobs (tenant, priority DESC, run_after, seq) WHERE status = 'queued';
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE status = 'running';
CREATE INDEX jobs_queued_deadline ON jobs (deadline_at) WHERE status = 'queued' AND deadline_at IS NOT NULL;
CREATE INDEX jobs_by_status ON jobs (tenant, status, seq);
CREATE INDEX jobs_by_owner ON jobs (tenant, owner, seq);

CREATE TABLE job_results (
  job_seq      INTEGER PRIMARY KEY REFERENCES jobs (seq),
  content_type TEXT    NOT NULL,
  body         BLOB    NOT NULL,
  checksum     TEXT    NOT NULL,
  size_bytes   INTEGER NOT NULL CHECK (size_bytes >= 0)
);

${RESULTS_ONLY_FOR_SUCCEEDED}

CREATE TABLE job_attempts (
  job_seq    INTEGER NOT NULL REFERENCES jobs (seq),
  epoch      INTEGER NOT NULL,
  attempt    INTEGER NOT NULL CHECK (attempt >= 1),
  worker_id  TEXT    NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at   INTEGER,
  outcome    TEXT CHECK (outcome IS NULL OR outcome IN (${OUTCOME_LIST})),
  error_code TEXT,
  PRIMARY KEY (job_seq, epoch)
) WITHOUT ROWID;

CREATE TABLE api_keys (
  id         TEXT    PRIMARY KEY,
  tenant     TEXT    NOT NULL,
  user_name  TEXT    NOT NULL,
  role       TEXT    NOT NULL CHECK (role IN (${ROLE_LIST})),
  key_hash   TEXT    NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);

CREATE TABLE kinds (
  tenant            TEXT    NOT NULL,
  kind              TEXT    NOT NULL,
  payload_schema    TEXT,
  max_payload_bytes INTEGER NOT NULL CHECK (max_payload_bytes > 0),
  max_attempts      INTEGER NOT NULL CHECK (max_attempts >= 1),
  lease_ms          INTEGER NOT NULL CHECK (lease_ms > 0),
  backoff_base_ms   INTEGER NOT NULL CHECK (backoff_base_ms > 0),
  backoff_max_ms    INTEGER NOT NULL CHECK (backoff_max_ms > 0),
  deadline_ms       INTEGER CHECK (deadline_ms IS NULL OR deadline_ms > 0),
  max_result_bytes  INTEGER NOT NULL CHECK (max_result_bytes > 0),
  updated_at        INTEGER NOT NULL,
  PRIMARY KEY (tenant, kind)
) WITHOUT ROWID;

CREATE TABLE tenant_counters (
  tenant            TEXT    PRIMARY KEY,
  lease_expirations INTEGER NOT NULL DEFAULT 0 CHECK (lease_expirations >= 0),
  storage_bytes     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
`,
  },
  {
    version: 2,
    name: 'failure_class',
    // The failure class the queue applied to the last error (src/core/failure-classes.ts), beside the
    // error code, which for a worker's fail is the worker's own. NULL on rows written before; read as inferred.
    sql: `ALTER TABLE jobs ADD COLUMN last_error_class TEXT;`,
  },
  {
    version: 3,
    name: 'checkpoint_limit_and_secrets',
    // A kind's checkpoint state limit (kinds registered before get the default, 256 KiB), and the
    // secrets the store keeps beside the data, such as the key that seals list cursors (list-cursor.ts).
    sql: `ALTER TABLE kinds ADD COLUMN max_checkpoint_bytes INTEGER NOT NULL DEFAULT 262144 CHECK (max_checkpoint_bytes > 0);
CREATE TABLE store_secrets (name TEXT PRIMARY KEY, secret BLOB NOT NULL) WITHOUT ROWID;`,
  },
  {
    version: 4,
    name: 'available_by_kind',
    // Leases with a kinds filter walk each kind's available jobs in lease order and merge them, so they read
    // O(max × kinds) rows whatever other kinds have queued; an admin's listing walks the tenant's rows in seq order.
    sql: `CREATE INDEX jobs_available_by_kind ON jobs (tenant, kind, priority DESC, run_after, seq) WHERE status = 'queued';
CREATE INDEX jobs_by_tenant ON jobs (tenant, seq);`,
  },
  {
    version: 5,
    name: 'job_counters',
    sql: JOB_COUNTERS_SQL,
  },
  {
    version: 6,
    name: 'next_due_and_retention',
    // jobs_delayed answers when the next delayed job or retry of a kind is due (next-due.ts); jobs_finished
    // walks finished jobs oldest first for retention (retention.ts); a kind's retention periods, NULL = the default.
    sql: `CREATE INDEX jobs_delayed ON jobs (tenant, kind, run_after) WHERE status = 'queued';
CREATE INDEX jobs_finished ON jobs (status, finished_at) WHERE status IN ('succeeded', 'cancelled', 'dead');
ALTER TABLE kinds ADD COLUMN retention_succeeded_ms INTEGER CHECK (retention_succeeded_ms IS NULL OR retention_succeeded_ms > 0);
ALTER TABLE kinds ADD COLUMN retention_cancelled_ms INTEGER CHECK (retention_cancelled_ms IS NULL OR retention_cancelled_ms > 0);
ALTER TABLE kinds ADD COLUMN retention_dead_ms INTEGER CHECK (retention_dead_ms IS NULL OR retention_dead_ms > 0);`,
  },
  {
    version: 7,
    name: 'kind_flow_control',
    // A kind's pause and limits (flow-limits.ts). kinds_flow holds only the restricted kinds, so a lease asks
    // "does this tenant restrict any kind?" with a probe that finds nothing for everyone else. kind_windows
    // keeps a rate-limited kind's current window apart from the kinds row (which carries the payload schema).
    sql: `ALTER TABLE kinds ADD COLUMN paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1));
ALTER TABLE kinds ADD COLUMN max_concurrent INTEGER CHECK (max_concurrent IS NULL OR max_concurrent >= 1);
ALTER TABLE kinds ADD COLUMN rate_limit INTEGER CHECK (rate_limit IS NULL OR rate_limit >= 1);
ALTER TABLE kinds ADD COLUMN rate_per_ms INTEGER CHECK (rate_per_ms IS NULL OR rate_per_ms >= 1);
CREATE INDEX kinds_flow ON kinds (tenant, kind) WHERE paused = 1 OR max_concurrent IS NOT NULL OR rate_limit IS NOT NULL;
CREATE TABLE kind_windows (
  tenant       TEXT    NOT NULL,
  kind         TEXT    NOT NULL,
  window_start INTEGER NOT NULL,
  window_count INTEGER NOT NULL CHECK (window_count >= 0),
  PRIMARY KEY (tenant, kind)
) WITHOUT ROWID;`,
  },
  {
    version: 8,
    name: 'schedules',
    // Recurring schedules (src/store/schedules.ts). next_at/last_at are the scheduler's clock in ms;
    // schedules_due finds what is due across tenants, earliest first.
    sql: `CREATE TABLE schedules (
  tenant        TEXT    NOT NULL,
  name          TEXT    NOT NULL,
  owner         TEXT    NOT NULL,
  kind          TEXT    NOT NULL,
  payload       TEXT    NOT NULL,
  payload_bytes INTEGER NOT NULL CHECK (payload_bytes >= 0),
  cron          TEXT    NOT NULL,
  timezone      TEXT    NOT NULL,
  overlap       TEXT    NOT NULL CHECK (overlap IN ('skip', 'allow')),
  catch_up      INTEGER NOT NULL CHECK (catch_up >= 0),
  next_at       INTEGER,
  last_at       INTEGER,
  last_job_id   TEXT,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  PRIMARY KEY (tenant, name)
) WITHOUT ROWID;
CREATE INDEX schedules_due ON schedules (next_at, tenant) WHERE next_at IS NOT NULL;`,
  },
  {
    version: 9,
    name: 'dependencies_and_keys',
    sql: DEPENDENCIES_SQL,
  },
  {
    version: 10,
    name: 'churn_autovacuum',
    // PostgreSQL's per-table autovacuum settings. SQLite has nothing to set: auto_vacuum = INCREMENTAL
    // (database.ts) and retention's incremental_vacuum return the pages that deletes free.
    sql: `SELECT 1;`,
  },
  {
    version: 11,
    name: 'keep_table_files',
    // PostgreSQL's vacuum_truncate. SQLite's file is managed by auto_vacuum = INCREMENTAL and retention's
    // incremental_vacuum, which take no lock beyond the write lock of a retention batch.
    sql: `SELECT 1;`,
  },
  {
    version: 12,
    name: 'new_jobs_counted_per_commit',
    // Enqueue counts the transaction's new jobs once before COMMIT (new-job-counts.ts) instead of by a trigger per
    // row: the trigger and its statement journal were about a sixth of a single enqueue's time.
    sql: `DROP TRIGGER job_counters_insert;`,
  },
  {
    version: 13,
    name: 'dedupe_and_unique_keys',
    // The keys of core/dedupe.ts: dedupe_key with the end of its window (dedupe_until), and unique_key. Each
    // unique index holds only jobs with a key, at most one per (tenant, owner, kind, key): an enqueue probes it
    // (one entry) and a job without a key adds no entry. A holder gives its key up (set to NULL) when a new job
    // takes it. Adding nullable columns leaves existing rows as they are.
    sql: DEDUPE_KEYS_SQL,
  },
  {
    version: 14,
    name: 'storage_for_the_hot_path',
    sql: HOT_PATH_STORAGE_SQL,
  },
  {
    version: 15,
    name: 'queued_listing_by_seq',
    // GET /jobs?status=queued pages newest first: walked by this index from the cursor, it reads a page's rows
    // instead of sorting every queued job of the tenant (which held the event loop for milliseconds per 10,000
    // queued). One more entry per enqueue, one fewer per lease.
    sql: 'CREATE INDEX job_ready_listing ON job_ready (tenant, seq);',
  },
  { version: 16, name: 'fair_share_groups', sql: FAIR_SHARE_GROUPS_SQL },
];
