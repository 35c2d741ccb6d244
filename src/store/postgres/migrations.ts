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
  id                 uuid        PRIMARY KEY,
  seq                bigserial   NOT NULL,
  tenant             text        NOT NULL,
  owner              text        NOT NULL,
  idempotency_key    text        NOT NULL,
  request_hash       text        NOT NULL,
  kind               text        NOT NULL,
  payload            json        NOT NULL,
  payload_bytes      integer     NOT NULL CHECK (payload_bytes >= 0),
  status             text        NOT NULL CHECK (status IN (${STATUS_LIST})),
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
  role       text        NOT NULL CHECK (role IN ('producer', 'worker', 'admin')),
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
    name: 'next_due_and_retention',
    // jobs_delayed answers when the next delayed job or retry of a kind is due (next-due.ts); jobs_finished
    // walks finished jobs oldest first for retention (retention.ts); a kind's retention periods, NULL = the default.
    sql: `CREATE INDEX jobs_delayed ON jobs (tenant, kind, run_after) WHERE status = 'queued';
CREATE INDEX jobs_finished ON jobs (status, finished_at) WHERE status IN ('succeeded', 'cancelled', 'dead');
ALTER TABLE kinds ADD COLUMN retention_succeeded_ms bigint CHECK (retention_succeeded_ms IS NULL OR retention_succeeded_ms > 0);
ALTER TABLE kinds ADD COLUMN retention_cancelled_ms bigint CHECK (retention_cancelled_ms IS NULL OR retention_cancelled_ms > 0);
ALTER TABLE kinds ADD COLUMN retention_dead_ms bigint CHECK (retention_dead_ms IS NULL OR retention_dead_ms > 0);`,
  },
];
