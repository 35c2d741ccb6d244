/**
 * Versioned schema for the SQLite backend, applied in order at open inside one
 * IMMEDIATE transaction. Versions and names match src/store/postgres/migrations.ts
 * (a test keeps them in step). Invariants live in the schema as CHECKs and
 * triggers, so a bug in code cannot write a state the design forbids.
 */

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

const STATUS_LIST = "'queued','running','succeeded','dead','unknown','cancelled'";
const OUTCOME_LIST = "'succeeded','failed','expired','cancelled','deadline'";

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

-- A result exists only for a succeeded job: the completion transaction marks
-- the job first and inserts the result second.
CREATE TRIGGER job_results_only_for_succeeded
BEFORE INSERT ON job_results
WHEN (SELECT status FROM jobs WHERE seq = NEW.job_seq) IS NOT 'succeeded'
BEGIN
  SELECT RAISE(ABORT, 'result for a job that is not succeeded');
END;

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
  role       TEXT    NOT NULL CHECK (role IN ('producer', 'worker', 'admin')),
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
    name: 'next_due_and_retention',
    // jobs_delayed answers when the next delayed job or retry of a kind is due (next-due.ts); jobs_finished
    // walks finished jobs oldest first for retention (retention.ts); a kind's retention periods, NULL = the default.
    sql: `CREATE INDEX jobs_delayed ON jobs (tenant, kind, run_after) WHERE status = 'queued';
CREATE INDEX jobs_finished ON jobs (status, finished_at) WHERE status IN ('succeeded', 'cancelled', 'dead');
ALTER TABLE kinds ADD COLUMN retention_succeeded_ms INTEGER CHECK (retention_succeeded_ms IS NULL OR retention_succeeded_ms > 0);
ALTER TABLE kinds ADD COLUMN retention_cancelled_ms INTEGER CHECK (retention_cancelled_ms IS NULL OR retention_cancelled_ms > 0);
ALTER TABLE kinds ADD COLUMN retention_dead_ms INTEGER CHECK (retention_dead_ms IS NULL OR retention_dead_ms > 0);`,
  },
];
