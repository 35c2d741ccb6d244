/**
 * Versioned schema for the PostgreSQL backend, applied in order at connect
 * (see migrate.ts). Versions and names match src/store/sqlite/migrations.ts; a
 * conformance test keeps them in step. Invariants live in the schema as CHECKs
 * and a deferred constraint trigger, so a bug in code cannot write a state the
 * design forbids.
 *
 * Differences from SQLite, each for a reason:
 * - Times are `timestamptz` (the database's clock writes them; operators can
 *   read them); the store converts them to epoch milliseconds in its queries.
 * - Payload, progress and checkpoint state are `json`, not `jsonb`: `json`
 *   keeps the canonical text byte for byte and accepts every string JSON.parse
 *   accepts, while `jsonb` rejects `\u0000` and lone surrogates, which would
 *   turn valid input into a server error. Nothing queries inside them.
 * - job_attempts is keyed by (job_id, epoch): the attempt number restarts at 1
 *   after a requeue, the epoch never goes back.
 * - No per-tenant storage counter: one counter row per tenant would serialize
 *   every enqueue of that tenant on its row lock; stats sums instead.
 */

import { OUTCOME_LIST, ROLE_LIST, STATUS_LIST, STATUS_LIST_V1 } from '../schema-lists.js';
import { JOB_COUNTERS_SQL } from './counter-triggers.js';
import { FAIR_SHARE_GROUPS_SQL } from './group-migration.js';
import { HOT_PATH_STORAGE_SQL } from './hot-path-migration.js';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE jobs (
  id                 uuid        PRIMARY KEY,
  seq                bigserial   NOT NULL,
  tenant             text        NOT NULL,
  owner              text        NOT NULL,
  idempotency_key    text        NOT NULL,
  request_hash       text        NOT NULL,
  kind               text        NOT NULL,
  payload            json        NOT NULL,
  payload_bytes      integer     NOT NULL CHECK (payload_bytes >= 0),
  status             text        NOT NULL CHECK (status IN (${STATUS_LIST_V1})),
  attempts           integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  max_attempts       integer     NOT NULL CHECK (max_attempts >= 1),
  priority           integer     NOT NULL DEFAULT 0,
  run_after          timestamptz NOT NULL,
  deadline_ms        bigint      CHECK (deadline_ms IS NULL OR deadline_ms > 0),
  deadline_at        timestamptz,
  lease_owner        text,
  lease_expires_at   timestamptz,
  epoch              integer     NOT NULL DEFAULT 0 CHECK (epoch >= 0),
  lease_token        text,
  last_outcome       text        CHECK (last_outcome IS NULL OR last_outcome IN (${OUTCOME_LIST})),
  created_at         timestamptz NOT NULL,
  started_at         timestamptz,
  finished_at        timestamptz,
  last_error_code    text,
  last_error_message text,
  progress           json,
  cancel_requested   boolean     NOT NULL DEFAULT false,
  effect_started_at  timestamptz,
  checkpoint_step    integer     CHECK (checkpoint_step IS NULL OR checkpoint_step >= 0),
  checkpoint_state   json,
  CHECK (status <> 'running' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
  CHECK (attempts <= max_attempts OR status <> 'running'),
  UNIQUE (tenant, owner, idempotency_key)
-- Every lease, renew and completion rewrites a row. Free space on each page
-- lets the new version land beside the old one (HOT when no indexed column
-- changes, as for progress and checkpoints), which keeps the table and its
-- indexes from bloating between autovacuum runs.
) WITH (fillfactor = 80);

-- The lease query walks this partial index in lease order; it holds only
-- queued rows, so it stays small however many finished jobs the table keeps.
-- The other partial indexes serve the reaper (running leases, queued
-- deadlines) and operators (dead and unknown jobs), each holding few rows.
CREATE INDEX jobs_available ON jobs (tenant, priority DESC, run_after, seq) WHERE status = 'queued';
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE status = 'running';
CREATE INDEX jobs_queued_deadline ON jobs (deadline_at) WHERE status = 'queued' AND deadline_at IS NOT NULL;
CREATE INDEX jobs_needing_attention ON jobs (tenant, status, seq) WHERE status IN ('dead', 'unknown');
-- The only full index beyond the keys. A status change can never be a HOT
-- update (status is in the partial indexes' predicates), so every lease and
-- completion adds an entry to every full index: each one costs on the hottest
-- path. Listings by owner or by a busy status filter this index's order.
CREATE INDEX jobs_by_tenant ON jobs (tenant, seq);

CREATE TABLE job_results (
  job_id       uuid    PRIMARY KEY REFERENCES jobs (id),
  content_type text    NOT NULL,
  body         bytea   NOT NULL,
  checksum     text    NOT NULL,
  size_bytes   integer NOT NULL CHECK (size_bytes >= 0)
);

-- A result exists only for a succeeded job. Deferred to commit, because the
-- completion statement marks the job and inserts the result in one statement
-- whose parts cannot see each other's rows.
CREATE FUNCTION job_results_only_for_succeeded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM jobs WHERE id = NEW.job_id AND status = 'succeeded') THEN
    RAISE EXCEPTION 'result for a job that is not succeeded' USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER job_results_only_for_succeeded
  AFTER INSERT ON job_results DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION job_results_only_for_succeeded();

CREATE TABLE job_attempts (
  job_id     uuid        NOT NULL REFERENCES jobs (id),
  epoch      integer     NOT NULL,
  attempt    integer     NOT NULL CHECK (attempt >= 1),
  worker_id  text        NOT NULL,
  started_at timestamptz NOT NULL,
  ended_at   timestamptz,
  outcome    text        CHECK (outcome IS NULL OR outcome IN (${OUTCOME_LIST})),
  error_code text,
  PRIMARY KEY (job_id, epoch)
);

CREATE TABLE api_keys (
  id         text        PRIMARY KEY,
  tenant     text        NOT NULL,
  user_name  text        NOT NULL,
  role       text        NOT NULL CHECK (role IN (${ROLE_LIST})),
  key_hash   text        NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  revoked_at timestamptz
);

CREATE TABLE kinds (
  tenant            text        NOT NULL,
  kind              text        NOT NULL,
  payload_schema    json,
  max_payload_bytes integer     NOT NULL CHECK (max_payload_bytes > 0),
  max_attempts      integer     NOT NULL CHECK (max_attempts >= 1),
  lease_ms          integer     NOT NULL CHECK (lease_ms > 0),
  backoff_base_ms   integer     NOT NULL CHECK (backoff_base_ms > 0),
  backoff_max_ms    integer     NOT NULL CHECK (backoff_max_ms > 0),
  deadline_ms       bigint      CHECK (deadline_ms IS NULL OR deadline_ms > 0),
  max_result_bytes  integer     NOT NULL CHECK (max_result_bytes > 0),
  updated_at        timestamptz NOT NULL,
  PRIMARY KEY (tenant, kind)
);

CREATE TABLE tenant_counters (
  tenant            text   PRIMARY KEY,
  lease_expirations bigint NOT NULL DEFAULT 0 CHECK (lease_expirations >= 0)
);
`,
  },
  {
    version: 2,
    name: 'failure_class',
    // The failure class of the last error (src/core/failure-classes.ts); NULL on older rows, read as inferred.
    sql: `ALTER TABLE jobs ADD COLUMN last_error_class text;`,
  },
  {
    version: 3,
    name: 'checkpoint_limit_and_secrets',
    // A kind's checkpoint state limit (256 KiB for kinds registered before), and the secrets the
    // store keeps beside the data, such as the key that seals list cursors (list-cursor.ts).
    sql: `ALTER TABLE kinds ADD COLUMN max_checkpoint_bytes integer NOT NULL DEFAULT 262144 CHECK (max_checkpoint_bytes > 0);
CREATE TABLE store_secrets (name text PRIMARY KEY, secret bytea NOT NULL);`,
  },
  {
    version: 4,
    name: 'available_by_kind',
    // Leases with a kinds filter walk each kind's available jobs in lease order and merge them (queries.ts),
    // so they read O(max × kinds) rows whatever other kinds have queued.
    sql: `CREATE INDEX jobs_available_by_kind ON jobs (tenant, kind, priority DESC, run_after, seq) WHERE status = 'queued';`,
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
ALTER TABLE kinds ADD COLUMN retention_succeeded_ms bigint CHECK (retention_succeeded_ms IS NULL OR retention_succeeded_ms > 0);
ALTER TABLE kinds ADD COLUMN retention_cancelled_ms bigint CHECK (retention_cancelled_ms IS NULL OR retention_cancelled_ms > 0);
ALTER TABLE kinds ADD COLUMN retention_dead_ms bigint CHECK (retention_dead_ms IS NULL OR retention_dead_ms > 0);`,
  },
  {
    version: 7,
    name: 'kind_flow_control',
    // A kind's pause and limits (flow-limits.ts). kinds_flow holds only the restricted kinds, so the lease
    // statement's "does this tenant restrict any kind?" finds nothing for everyone else. kind_windows keeps a
    // rate-limited kind's current window apart from the kinds row, which a restricted lease locks.
    sql: `ALTER TABLE kinds ADD COLUMN paused boolean NOT NULL DEFAULT false;
ALTER TABLE kinds ADD COLUMN max_concurrent integer CHECK (max_concurrent IS NULL OR max_concurrent >= 1);
ALTER TABLE kinds ADD COLUMN rate_limit integer CHECK (rate_limit IS NULL OR rate_limit >= 1);
ALTER TABLE kinds ADD COLUMN rate_per_ms bigint CHECK (rate_per_ms IS NULL OR rate_per_ms >= 1);
ALTER TABLE kinds ADD CONSTRAINT kinds_rate_whole CHECK ((rate_limit IS NULL) = (rate_per_ms IS NULL));
CREATE INDEX kinds_flow ON kinds (tenant, kind) WHERE paused OR max_concurrent IS NOT NULL OR rate_limit IS NOT NULL;
CREATE TABLE kind_windows (
  tenant       text        NOT NULL,
  kind         text        NOT NULL,
  window_start timestamptz NOT NULL,
  window_count integer     NOT NULL CHECK (window_count >= 0),
  PRIMARY KEY (tenant, kind)
);`,
  },
  {
    version: 8,
    name: 'schedules',
    // Recurring schedules (src/store/schedules.ts). next_at/last_at are the scheduler's clock in ms (bigint,
    // compared exactly by scheduleFire's guard); schedules_due finds what is due across tenants, earliest first.
    sql: `CREATE TABLE schedules (
  tenant        text        NOT NULL,
  name          text        NOT NULL,
  owner         text        NOT NULL,
  kind          text        NOT NULL,
  payload       json        NOT NULL,
  payload_bytes integer     NOT NULL CHECK (payload_bytes >= 0),
  cron          text        NOT NULL,
  timezone      text        NOT NULL,
  overlap       text        NOT NULL CHECK (overlap IN ('skip', 'allow')),
  catch_up      integer     NOT NULL CHECK (catch_up >= 0),
  next_at       bigint,
  last_at       bigint,
  last_job_id   uuid,
  created_at    bigint      NOT NULL,
  updated_at    bigint      NOT NULL,
  PRIMARY KEY (tenant, name)
);
CREATE INDEX schedules_due ON schedules (next_at, tenant) WHERE next_at IS NOT NULL;`,
  },
  {
    version: 9,
    name: 'dependencies_and_keys',
    // The status `waiting` and the columns of dependencies and per-key ordering (core/dependencies.ts).
    // pending_parents: parents not yet succeeded (only a waiting job counts any; a dead or cancelled one keeps
    // what it had); has_children: some job names this one in dependsOn, so its end looks for waiting children.
    // job_dependencies' primary key finds a parent's children, its second index a child's parents.
    // jobs_key_turn holds a key's jobs that hold its turn in enqueue order (its head runs next), jobs_key_active
    // those queued or running; both hold keyed jobs only, so jobs without a key add no entry.
    sql: `ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN (${STATUS_LIST}));
ALTER TABLE jobs ADD COLUMN pending_parents integer NOT NULL DEFAULT 0 CHECK (pending_parents >= 0);
ALTER TABLE jobs ADD COLUMN has_children boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN concurrency_key text;
ALTER TABLE jobs ADD CONSTRAINT jobs_pending_parents_waiting CHECK (pending_parents = 0 OR status IN ('waiting', 'dead', 'cancelled'));
CREATE TABLE job_dependencies (
  parent_id uuid NOT NULL REFERENCES jobs (id),
  child_id  uuid NOT NULL REFERENCES jobs (id),
  PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX job_dependencies_child ON job_dependencies (child_id);
CREATE INDEX jobs_key_turn ON jobs (tenant, kind, concurrency_key, seq)
  WHERE concurrency_key IS NOT NULL AND status IN ('queued', 'waiting', 'running');
CREATE INDEX jobs_key_active ON jobs (tenant, kind, concurrency_key, seq)
  WHERE concurrency_key IS NOT NULL AND status IN ('queued', 'running');`,
  },
  {
    version: 10,
    name: 'churn_autovacuum',
    // A queue table's dead row versions come from churn, not from its size: the server's default
    // (vacuum once a fifth of the table is dead) waits for millions of them in a table that keeps a long
    // history, and the available indexes fill with dead entries that every lease walks past. Vacuum after a
    // fixed number instead (about 3,000 finished jobs on jobs), and let it keep pace (cost delay 1 ms).
    sql: `ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
  autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 1);
ALTER TABLE job_attempts SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
  autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 1);
ALTER TABLE job_results SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
  autovacuum_vacuum_cost_delay = 1);`,
  },
  {
    version: 11,
    name: 'keep_table_files',
    // Vacuum leaves the churning tables' files at their high-water mark: the space of purged rows at the end
    // of a file is what the next hour's jobs fill, and giving it back takes an ACCESS EXCLUSIVE lock on the
    // table, which stops every lease and enqueue while it is held (and is replayed on standbys).
    // `VACUUM (TRUNCATE) jobs` still returns it by hand (docs/SCALING.md §4).
    sql: `ALTER TABLE jobs SET (vacuum_truncate = false);
ALTER TABLE job_attempts SET (vacuum_truncate = false);
ALTER TABLE job_results SET (vacuum_truncate = false);`,
  },
  {
    version: 12,
    name: 'new_jobs_counted_per_commit',
    // SQLite's: its enqueue counts a transaction's new jobs once before COMMIT. Here the counter triggers are
    // statement triggers, which already count a multi-row insert once per statement.
    sql: `SELECT 1;`,
  },
  {
    version: 13,
    name: 'dedupe_and_unique_keys',
    // The keys of core/dedupe.ts: dedupe_key with the end of its window (dedupe_until), and unique_key. Each
    // unique index holds only jobs with a key, at most one per (tenant, owner, kind, key): an enqueue probes it
    // (one entry), a job without a key adds no entry, and two enqueues of one key cannot both insert (the second
    // waits for the first to commit, then finds its job). A holder gives its key up (set to NULL) when a new job
    // takes it. Adding nullable columns rewrites no row; building the two (empty) indexes reads jobs once.
    sql: `ALTER TABLE jobs ADD COLUMN dedupe_key text;
ALTER TABLE jobs ADD COLUMN dedupe_until timestamptz;
ALTER TABLE jobs ADD COLUMN unique_key text;
ALTER TABLE jobs ADD CONSTRAINT jobs_dedupe_whole CHECK ((dedupe_key IS NULL) = (dedupe_until IS NULL));
CREATE UNIQUE INDEX jobs_dedupe_key ON jobs (tenant, owner, kind, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE UNIQUE INDEX jobs_unique_key ON jobs (tenant, owner, kind, unique_key) WHERE unique_key IS NOT NULL;`,
  },
  {
    version: 14,
    name: 'storage_for_the_hot_path',
    sql: HOT_PATH_STORAGE_SQL,
  },
  {
    version: 15,
    name: 'queued_listing_by_seq',
    // GET /jobs?status=queued pages newest first: walked by this index from the cursor, a page reads its own rows
    // instead of every queued job of the tenant.
    sql: 'CREATE INDEX job_ready_listing ON job_ready (tenant, seq);',
  },
  { version: 16, name: 'fair_share_groups', sql: FAIR_SHARE_GROUPS_SQL },
];
