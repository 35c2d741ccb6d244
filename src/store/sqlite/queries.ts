/**
 * Every SQL statement of the SQLite backend, by name. The store prepares each
 * once at open. Guards in WHERE clauses mirror the decide* functions in
 * src/core/transitions.ts, so a statement can never apply a transition that
 * the decision would not have allowed, even if the snapshot were stale.
 */

import type { Statement } from 'better-sqlite3';
import { MAX_LISTED_CHILDREN } from '../../core/dependencies.js';
import { GROUP_SQL } from './group-queries.js';
import { ENQUEUE_KEY_SQL } from './enqueue-key-queries.js';
import { LEASE_END_SQL } from './lease-end-queries.js';

/**
 * The statuses that hold a concurrency key's turn (core/dependencies.ts holdsKeyTurn): the predicate of jobs_key_turn.
 * A running job's row says 'queued' (migration 14), so 'running' matches nothing; it stays to match the index.
 */
const KEY_TURN = `status IN ('queued', 'waiting', 'running')`;
/** The predicate of jobs_key_active: a key's job that is queued or running (a running job's row says 'queued'). */
const KEY_ACTIVE = `status IN ('queued', 'running')`;
/**
 * A job as the store shows it, from its row (j) and its lease row (l, LEFT JOINed on seq): while a lease row
 * exists the job is running, with the lease's epoch, attempt, token, worker, expiry, effect mark and cancel
 * request, and no outcome yet; its row keeps status 'queued' and its last attempt's values until the end
 * (migration 14). Every read of a job's state goes through these expressions.
 */
const LIVE_COLUMNS = `CASE WHEN l.seq IS NULL THEN j.status ELSE 'running' END AS status, coalesce(l.attempt, j.attempts) AS attempts,
  coalesce(l.epoch, j.epoch) AS epoch, CASE WHEN l.seq IS NULL THEN j.lease_owner ELSE l.worker_id END AS lease_owner,
  l.expires_at AS lease_expires_at, CASE WHEN l.seq IS NULL THEN j.lease_token ELSE l.token END AS lease_token,
  CASE WHEN l.seq IS NULL THEN j.last_outcome END AS last_outcome, coalesce(j.started_at, l.started_at) AS started_at,
  coalesce(l.cancel_requested, j.cancel_requested) AS cancel_requested,
  CASE WHEN l.seq IS NULL THEN j.effect_started_at ELSE l.effect_started_at END AS effect_started_at`;

/** A job's row with its lease row, if it has one (LIVE_COLUMNS reads both). */
const JOB_AND_LEASE = `jobs j LEFT JOIN job_leases l ON l.seq = j.seq`;

const JOB_COLUMNS = `j.seq, j.id, j.tenant, j.owner, j.kind, j.payload, j.max_attempts, j.priority,
  j.run_after, j.deadline_at, j.deadline_ms, j.created_at, j.finished_at, j.last_error_code, j.last_error_message, j.last_error_class,
  j.progress, j.checkpoint_step, j.checkpoint_state, j.request_hash, j.concurrency_key, j.group_key, j.pending_parents, j.has_children, ${LIVE_COLUMNS},
  (SELECT json_group_array(id) FROM (SELECT p.id FROM job_dependencies d JOIN jobs p ON p.seq = d.parent_seq
    WHERE d.child_seq = j.seq ORDER BY d.parent_seq)) AS depends_on,
  (SELECT json_group_array(id) FROM (SELECT c.id FROM job_dependencies d JOIN jobs c ON c.seq = d.child_seq
    WHERE d.parent_seq = j.seq ORDER BY d.child_seq LIMIT ${MAX_LISTED_CHILDREN})) AS children`;

/**
 * Just what the decide* functions and the guarded writes need: no payload, progress or checkpoint to copy out;
 * with what a transition moves in the counter rows (created_at, started_at, finished_at) and what a ready row holds.
 */
const SNAPSHOT_COLUMNS = `j.seq, j.tenant, j.kind, j.max_attempts, j.priority, j.run_after, j.deadline_at, j.created_at, j.finished_at,
  j.concurrency_key, j.has_children, j.group_key, l.group_key AS lease_group, l.started_at AS attempt_started_at, ${LIVE_COLUMNS}`;

const RESULT_COLUMNS = 'r.content_type AS result_content_type, r.body AS result_body, r.checksum AS result_checksum';

/** What a listing reads: no payload, checkpoint state or result body, so a page costs its rows, not their contents. */
const LIST_COLUMNS = `j.seq, j.id, j.tenant, j.owner, j.kind, j.max_attempts, j.priority,
  j.run_after, j.deadline_at, j.deadline_ms, j.created_at, j.finished_at, j.last_error_code, j.last_error_message, j.last_error_class,
  j.progress, j.checkpoint_step, j.request_hash, j.concurrency_key, j.group_key, ${LIVE_COLUMNS},
  r.content_type AS result_content_type, r.size_bytes AS result_bytes`;

/** The columns a transition's RETURNING gives: what settleEnded (dependencies.ts) and the counter moves need. */
const FLOW_RETURNING = `seq, tenant, kind, status, pending_parents, concurrency_key, has_children, created_at, started_at, finished_at`;

/** What the end of a job's first attempt writes into its row (times, outcome, token, worker), reserved at enqueue (migration 14). */
export const END_RESERVE_BYTES = 64;

/**
 * The distinct kinds of @tenant's ready jobs as rows of `k(kind)`, the last one NULL: a skip scan of job_ready's
 * primary key, one probe per kind, whatever each kind has queued. Callers read `FROM k WHERE k.kind IS NOT NULL`.
 */
export const QUEUED_KINDS = `WITH RECURSIVE k(kind) AS (
      SELECT (SELECT MIN(kind) FROM job_ready WHERE tenant = @tenant)
      UNION ALL
      SELECT (SELECT MIN(kind) FROM job_ready WHERE tenant = @tenant AND kind > k.kind) FROM k WHERE k.kind IS NOT NULL)`;

/**
 * After `kinds` (a CTE of `k(kind)`), the (kind, group, priority) ranges of @tenant's ready jobs of those kinds as
 * rows of `g(kind, group_key, priority)`, each (kind, group)'s last row with priority NULL: a skip scan of
 * job_ready's primary key, first over each kind's group keys (one for a kind without groups), then two probes
 * per range. Within a range the rows are in run_after order, so its first row is its earliest.
 */
export const READY_GROUPS = `gk(kind, group_key) AS (
      SELECT k.kind, (SELECT MIN(group_key) FROM job_ready WHERE tenant = @tenant AND kind = k.kind) FROM k WHERE k.kind IS NOT NULL
      UNION ALL
      SELECT gk.kind, (SELECT MIN(group_key) FROM job_ready WHERE tenant = @tenant AND kind = gk.kind AND group_key > gk.group_key)
        FROM gk WHERE gk.group_key IS NOT NULL),
    g(kind, group_key, priority) AS (
      SELECT gk.kind, gk.group_key, (SELECT MAX(priority) FROM job_ready WHERE tenant = @tenant AND kind = gk.kind AND group_key = gk.group_key)
        FROM gk WHERE gk.group_key IS NOT NULL
      UNION ALL
      SELECT g.kind, g.group_key,
          (SELECT MAX(priority) FROM job_ready WHERE tenant = @tenant AND kind = g.kind AND group_key = g.group_key AND priority < g.priority)
        FROM g WHERE g.priority IS NOT NULL)`;

/** A kind with a pause or a limit: the predicate of the kinds_flow index (migration 7), repeated so that queries use it. */
const RESTRICTED = `(paused = 1 OR max_concurrent IS NOT NULL OR rate_limit IS NOT NULL)`;

/**
 * The lease statements' guard: none of the kinds it may take is restricted or has groups. A probe of kinds_flow,
 * which holds no rows for a tenant without pauses or limits, and one of group_clocks, which holds none for a
 * tenant whose jobs have no groups; when either finds one the statement leases nothing and the store takes the
 * restricted path (lease.ts leaseRestricted), which leases a kind with groups by its fair plan (group-lease.ts).
 */
function unrestricted(kindsIn: string | null): string {
  const ofKinds = kindsIn === null ? '' : ` AND kind IN (${kindsIn})`;
  return `NOT EXISTS (SELECT 1 FROM kinds INDEXED BY kinds_flow WHERE tenant = @tenant${ofKinds} AND ${RESTRICTED})
        AND NOT EXISTS (SELECT 1 FROM group_clocks WHERE tenant = @tenant${ofKinds})`;
}

export const SQL = {
  migrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
  migrationsTableExists: `SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`,
  migrationsApplied: `SELECT version FROM schema_migrations ORDER BY version`,
  migrationRecord: `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,

  apiKeyInsert: `INSERT INTO api_keys (id, tenant, user_name, role, key_hash, created_at) VALUES (@id, @tenant, @user, @role, @keyHash, @now)`,
  apiKeyByHash: `SELECT id, tenant, user_name, role, key_hash, created_at, revoked_at FROM api_keys WHERE key_hash = ?`,
  apiKeyRevoke: `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`,
  apiKeyList: `SELECT id, tenant, user_name, role, key_hash, created_at, revoked_at FROM api_keys WHERE tenant = ? ORDER BY created_at, id`,

  kindUpsert: `INSERT INTO kinds (tenant, kind, payload_schema, max_payload_bytes, max_attempts, lease_ms, backoff_base_ms,
      backoff_max_ms, deadline_ms, max_result_bytes, max_checkpoint_bytes, retention_succeeded_ms, retention_cancelled_ms,
      retention_dead_ms, max_concurrent, rate_limit, rate_per_ms, group_rules, updated_at)
    VALUES (@tenant, @kind, @payloadSchema, @maxPayloadBytes, @maxAttempts, @leaseMs, @backoffBaseMs, @backoffMaxMs,
      @deadlineMs, @maxResultBytes, @maxCheckpointBytes, @retentionSucceededMs, @retentionCancelledMs, @retentionDeadMs,
      @maxConcurrent, @rateLimit, @ratePerMs, @groupRules, @now)
    ON CONFLICT (tenant, kind) DO UPDATE SET payload_schema = excluded.payload_schema,
      max_payload_bytes = excluded.max_payload_bytes, max_attempts = excluded.max_attempts, lease_ms = excluded.lease_ms,
      backoff_base_ms = excluded.backoff_base_ms, backoff_max_ms = excluded.backoff_max_ms,
      deadline_ms = excluded.deadline_ms, max_result_bytes = excluded.max_result_bytes,
      max_checkpoint_bytes = excluded.max_checkpoint_bytes, retention_succeeded_ms = excluded.retention_succeeded_ms,
      retention_cancelled_ms = excluded.retention_cancelled_ms, retention_dead_ms = excluded.retention_dead_ms,
      max_concurrent = excluded.max_concurrent, rate_limit = excluded.rate_limit, rate_per_ms = excluded.rate_per_ms,
      group_rules = excluded.group_rules, updated_at = excluded.updated_at
    RETURNING paused`,
  /** Pause or resume; the registration (and its updatedAt) stays as it was. */
  kindSetPaused: `UPDATE kinds SET paused = @paused WHERE tenant = @tenant AND kind = @kind RETURNING *`,
  /**
   * The tenant's restricted kinds (kinds_flow holds only those) with what a lease decides by: live leases from
   * the counter rows of migration 5 and the current rate window. Read inside the write transaction.
   */
  kindFlowState: `SELECT k.kind, k.paused, k.max_concurrent, k.rate_limit, k.rate_per_ms,
      (SELECT c.jobs FROM job_counters c WHERE c.tenant = k.tenant AND c.kind = k.kind AND c.status = 'running') AS running,
      w.window_start, w.window_count
    FROM kinds k INDEXED BY kinds_flow LEFT JOIN kind_windows w ON w.tenant = k.tenant AND w.kind = k.kind
    WHERE k.tenant = @tenant AND ${RESTRICTED}`,
  kindWindowSet: `INSERT INTO kind_windows (tenant, kind, window_start, window_count) VALUES (@tenant, @kind, @start, @count)
    ON CONFLICT (tenant, kind) DO UPDATE SET window_start = excluded.window_start, window_count = excluded.window_count`,
  /** The distinct kinds of the tenant's queued jobs (a skip scan, one index probe per kind): a restricted lease without a filter walks each. */
  jobQueuedKinds: `${QUEUED_KINDS}
    SELECT kind FROM k WHERE kind IS NOT NULL LIMIT @limit`,
  /** The first store to open a database creates its secret; every later one reads the same row. */
  secretInsert: `INSERT INTO store_secrets (name, secret) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
  databaseSize: `SELECT p.page_count * s.page_size AS bytes FROM pragma_page_count() p, pragma_page_size() s`,
  secretGet: `SELECT secret FROM store_secrets WHERE name = ?`,
  kindGet: `SELECT * FROM kinds WHERE tenant = ? AND kind = ?`,
  kindList: `SELECT * FROM kinds WHERE tenant = ? ORDER BY kind`,

  jobByIdempotencyKey: `SELECT j.id, j.request_hash FROM jobs j WHERE j.tenant = ? AND j.owner = ? AND j.idempotency_key = ?`,
  /** A new queued job; its ready row follows (readyInsert). end_reserve: what its end will write (END_RESERVE_BYTES). */
  jobInsert: `INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
      max_attempts, priority, run_after, deadline_ms, deadline_at, created_at, end_reserve, group_key)
    VALUES (@id, @tenant, @owner, @idempotencyKey, @requestHash, @kind, @payload, @payloadBytes, 'queued',
      @maxAttempts, @priority, @runAfter, @deadlineMs, @deadlineAt, @now, zeroblob(${END_RESERVE_BYTES}), @groupKey)`,
  /** The lease of the job just inserted (@seq, enqueue.ts enqueueLeasedInTx) for a parked poll, unless its kind is held (as the lease's guard). */
  jobInsertLeased: leaseInsert(
    `SELECT @seq AS seq, @kind AS kind, @priority AS priority, @runAfter AS run_after, @deadlineAt AS deadline_at, 0 AS attempts, 0 AS epoch
      WHERE ${unrestricted('@kind')}`,
  ),
  /**
   * A job with dependsOn, a concurrencyKey, a dedupe or a unique key (enqueue.ts enqueueFlowJob): its status comes
   * from decideStart, and a job dead at once (dependency_failed) is finished at its acceptance.
   */
  jobInsertFlow: `INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
      max_attempts, priority, run_after, deadline_ms, deadline_at, created_at, finished_at, last_error_code, last_error_message,
      last_error_class, pending_parents, concurrency_key, dedupe_key, dedupe_until, unique_key, end_reserve, group_key)
    VALUES (@id, @tenant, @owner, @idempotencyKey, @requestHash, @kind, @payload, @payloadBytes, @status,
      @maxAttempts, @priority, @runAfter, @deadlineMs, @deadlineAt, @now, CASE WHEN @status = 'dead' THEN @now END, @code, @message,
      @errorClass, @pendingParents, @concurrencyKey, @dedupeKey, @dedupeUntil, @uniqueKey,
      CASE WHEN @status <> 'dead' THEN zeroblob(${END_RESERVE_BYTES}) END, @groupKey)
    RETURNING seq`,
  /** A queued job that is not running: its ready row, in lease order (migration 14). */
  readyInsert: `INSERT INTO job_ready (tenant, kind, group_key, priority, run_after, seq, deadline_at, attempts, epoch)
    VALUES (@tenant, @kind, @groupKey, @priority, @runAfter, @seq, @deadlineAt, @attempts, @epoch)`,
  /** A queued job leaves the ready table (cancel, a dedupe merge's move): one entry, found by its whole key. */
  readyDelete: `DELETE FROM job_ready
    WHERE tenant = @tenant AND kind = @kind AND group_key = @groupKey AND priority = @priority AND run_after = @runAfter AND seq = @seq
    RETURNING deadline_at, attempts, epoch`,
  /** The named parents (@ids: a JSON array) the enqueuer may see. */
  jobParentsFind: `SELECT seq, id, status FROM jobs
    WHERE tenant = @tenant AND (@owner IS NULL OR owner = @owner) AND id IN (SELECT value FROM json_each(@ids))`,
  /** Parents (@parents: a JSON array of seqs) are marked as having children, so that their end looks for them. */
  jobParentsMark: `UPDATE jobs SET has_children = 1 WHERE seq IN (SELECT value FROM json_each(@parents)) AND has_children = 0`,
  dependencyInsert: `INSERT INTO job_dependencies (parent_seq, child_seq) SELECT value, @child FROM json_each(@parents)`,
  /** A requeued job's parents that have not succeeded (a purged parent no longer counts). */
  jobPendingParents: `SELECT COUNT(*) AS n FROM job_dependencies d JOIN jobs p ON p.seq = d.parent_seq
    WHERE d.child_seq = ? AND p.status <> 'succeeded'`,
  /** Two probes of a key (KeyFacts): an earlier job holding its turn, another job queued or running (as PostgreSQL's, first rows in seq order). */
  jobKeyFacts: `SELECT
      (SELECT seq FROM jobs INDEXED BY jobs_key_turn WHERE tenant = @tenant AND kind = @kind AND concurrency_key = @key
        AND ${KEY_TURN} AND seq < @seq ORDER BY seq LIMIT 1) IS NOT NULL AS earlier_holder,
      (SELECT seq FROM jobs INDEXED BY jobs_key_active WHERE tenant = @tenant AND kind = @kind AND concurrency_key = @key
        AND ${KEY_ACTIVE} AND seq <> @seq ORDER BY seq LIMIT 1) IS NOT NULL AS other_active`,
  /** The earliest job of a key that holds its turn: the next to run once the turn passes. */
  jobKeyHead: `SELECT ${FLOW_RETURNING} FROM jobs INDEXED BY jobs_key_turn
    WHERE tenant = @tenant AND kind = @kind AND concurrency_key = @key AND ${KEY_TURN} ORDER BY seq LIMIT 1`,
  /** A parent succeeded: its waiting children have one pending parent fewer. */
  jobDependencySatisfy: `UPDATE jobs SET pending_parents = pending_parents - 1
    WHERE seq IN (SELECT child_seq FROM job_dependencies WHERE parent_seq = @parent) AND status = 'waiting'
    RETURNING ${FLOW_RETURNING}`,
  /** A parent ended dead or cancelled: its waiting children end with DEPENDENCY_FAILED (lease-endings.ts). */
  jobDependencyFail: `UPDATE jobs SET status = @status, finished_at = @now,
      last_error_code = @code, last_error_message = @message, last_error_class = @errorClass, end_reserve = NULL
    WHERE seq IN (SELECT child_seq FROM job_dependencies WHERE parent_seq = @parent) AND status = 'waiting'
    RETURNING ${FLOW_RETURNING}`,
  /** decideRelease's 'release': no parent pending and the key's turn. It becomes available now, or at its own later run-after (its ready row follows). */
  jobRelease: `UPDATE jobs SET status = 'queued', run_after = MAX(run_after, @now)
    WHERE seq = @seq AND status = 'waiting' AND pending_parents = 0
    RETURNING seq, tenant, kind, group_key, priority, run_after, deadline_at, attempts, epoch, created_at, started_at, finished_at`,
  /** What a write transaction moved in one (tenant, kind, status) counter row, written once before COMMIT (counter-moves.ts). */
  counterAddTerms: `INSERT INTO job_counters (tenant, kind, status, jobs, started, wait_ms, run_jobs, run_ms, completed, completion_ms)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (tenant, kind, status) DO UPDATE SET jobs = jobs + excluded.jobs, started = started + excluded.started,
      wait_ms = wait_ms + excluded.wait_ms, run_jobs = run_jobs + excluded.run_jobs, run_ms = run_ms + excluded.run_ms,
      completed = completed + excluded.completed, completion_ms = completion_ms + excluded.completion_ms`,
  /** What a write transaction moved in a tenant's counter row (stored bytes, ended attempts, lease expirations). */
  counterAddTenant: `INSERT INTO tenant_counters (tenant, storage_bytes, ended_attempts, attempt_run_ms, lease_expirations) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (tenant) DO UPDATE SET storage_bytes = storage_bytes + excluded.storage_bytes,
      ended_attempts = ended_attempts + excluded.ended_attempts, attempt_run_ms = attempt_run_ms + excluded.attempt_run_ms,
      lease_expirations = lease_expirations + excluded.lease_expirations`,

  jobGet: `SELECT ${JOB_COLUMNS}, ${RESULT_COLUMNS} FROM ${JOB_AND_LEASE} LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE j.id = @id AND j.tenant = @tenant AND (@owner IS NULL OR j.owner = @owner)`,
  jobGetBySeq: `SELECT ${JOB_COLUMNS}, ${RESULT_COLUMNS} FROM ${JOB_AND_LEASE} LEFT JOIN job_results r ON r.job_seq = j.seq WHERE j.seq = ?`,
  jobGetByIdUnscoped: `SELECT ${JOB_COLUMNS}, ${RESULT_COLUMNS} FROM ${JOB_AND_LEASE} LEFT JOIN job_results r ON r.job_seq = j.seq WHERE j.id = ?`,
  /** The snapshot a decide* function reads; inside the write transaction, which holds the database's write lock. */
  jobLock: `SELECT ${SNAPSHOT_COLUMNS} FROM ${JOB_AND_LEASE} WHERE j.id = ? AND j.tenant = ?`,
  /**
   * Snapshots of a batch of jobs by id (@ids, a JSON array), with the position of each id in the batch (@i): one
   * statement for a batch of completions (lease-endings.ts). Each id is a probe of the id's unique index.
   */
  jobLockMany: `SELECT x.key AS i, ${SNAPSHOT_COLUMNS} FROM json_each(@ids) x CROSS JOIN jobs j ON j.id = x.value AND j.tenant = @tenant
    LEFT JOIN job_leases l ON l.seq = j.seq`,
  // One statement per filter, planned once each, so every page walks an index in seq order from the
  // cursor instead of sorting the tenant's jobs (@cursor is never NULL: the first page starts above every seq).
  /** Ended and waiting jobs: jobs_by_status_ended (migration 14), which holds no queued or running job. */
  jobListByStatus: `SELECT ${LIST_COLUMNS} FROM ${JOB_AND_LEASE} LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE j.tenant = @tenant AND j.status = @status AND j.status <> 'queued' AND j.seq < @cursor
      AND (@owner IS NULL OR j.owner = @owner) AND (@kind IS NULL OR j.kind = @kind)
    ORDER BY j.seq DESC LIMIT @limit`,
  /** Queued jobs from the ready table, walked newest first from the cursor by job_ready_listing (migration 15). */
  jobListQueued: `SELECT ${LIST_COLUMNS} FROM job_ready q INDEXED BY job_ready_listing CROSS JOIN ${JOB_AND_LEASE} LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE q.tenant = @tenant AND (@kind IS NULL OR q.kind = @kind) AND q.seq < @cursor AND j.seq = q.seq AND (@owner IS NULL OR j.owner = @owner)
    ORDER BY q.seq DESC LIMIT @limit`,
  /** Running jobs from the lease table, walked by seq from the cursor. */
  jobListRunning: `SELECT ${LIST_COLUMNS} FROM job_leases l CROSS JOIN jobs j ON j.seq = l.seq LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE l.tenant = @tenant AND l.seq < @cursor AND (@kind IS NULL OR l.kind = @kind) AND (@owner IS NULL OR j.owner = @owner)
    ORDER BY l.seq DESC LIMIT @limit`,
  jobListByOwner: `SELECT ${LIST_COLUMNS} FROM ${JOB_AND_LEASE} LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE j.tenant = @tenant AND j.owner = @owner AND j.seq < @cursor AND (@kind IS NULL OR j.kind = @kind)
    ORDER BY j.seq DESC LIMIT @limit`,
  jobListByTenant: `SELECT ${LIST_COLUMNS} FROM ${JOB_AND_LEASE} LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE j.tenant = @tenant AND j.seq < @cursor AND (@kind IS NULL OR j.kind = @kind)
    ORDER BY j.seq DESC LIMIT @limit`,

  /**
   * The leased jobs' ready rows (@rows: a JSON array of [kind, group_key, priority, run_after, seq]) leave job_ready: one
   * statement for the batch, each row found by its whole key. The lease statement inserted their lease rows
   * first, in the same write transaction (lease-statements.ts).
   */
  readyDeleteMany: `DELETE FROM job_ready WHERE tenant = @tenant
    AND (kind, group_key, priority, run_after, seq) IN (SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(@rows))`,
  /** What a lease answers of each leased job (@seqs: a JSON array), and what its counter move needs. */
  jobLeasedMany: `SELECT seq, id, group_key, payload, max_attempts, checkpoint_step, checkpoint_state, created_at, started_at, finished_at
    FROM jobs WHERE seq IN (SELECT value FROM json_each(@seqs))`,
  /** A job's ended attempts and its running one, if any, in epoch order. */
  attemptList: `SELECT a.attempt, a.epoch, a.worker_id, a.started_at, a.ended_at, a.outcome, a.error_code FROM job_attempts a WHERE a.job_seq = @seq
    UNION ALL SELECT l.attempt, l.epoch, l.worker_id, l.started_at, NULL, NULL, NULL FROM job_leases l WHERE l.seq = @seq
    ORDER BY 2`,

  /** Leases that ran out, by job_leases_expiry. */
  jobsExpiredLeases: `SELECT ${SNAPSHOT_COLUMNS} FROM job_leases l CROSS JOIN jobs j ON j.seq = l.seq WHERE l.expires_at <= ?`,

  /** Queued jobs past their deadline are never leased (the lease WHERE); the reaper takes their ready rows by job_ready_deadline. */
  readyPastDeadline: `DELETE FROM job_ready WHERE deadline_at IS NOT NULL AND deadline_at <= @now RETURNING seq, tenant, kind, group_key`,
  /** … and ends them with QUEUED_DEADLINE (@seqs: a JSON array). */
  jobQueuedDeadline: `UPDATE jobs SET status = @status, finished_at = @now,
      last_error_code = @code, last_error_message = @message, last_error_class = @errorClass, end_reserve = NULL
    WHERE seq IN (SELECT value FROM json_each(@seqs)) AND status = 'queued'
    RETURNING ${FLOW_RETURNING}`,

  /** @status: queued or waiting (decideStart, for a job with parents or a key), with its parents not yet succeeded; a queued one's ready row follows. */
  jobRequeue: `UPDATE jobs SET status = @status, pending_parents = @pendingParents, attempts = 0, max_attempts = @maxAttempts, run_after = @now,
      deadline_at = CASE WHEN deadline_ms IS NULL THEN NULL ELSE @now + deadline_ms END,
      finished_at = NULL, lease_expires_at = NULL, cancel_requested = 0, effect_started_at = NULL
    WHERE seq = @seq AND status = @fromStatus
    RETURNING seq, tenant, kind, group_key, priority, run_after, deadline_at, attempts, epoch, created_at, started_at, finished_at`,
  /** A queued (not running) or waiting job cancelled; a queued one's ready row goes (readyDelete). */
  jobCancelNow: `UPDATE jobs SET status = @status, finished_at = @now, lease_expires_at = NULL, end_reserve = NULL,
      last_error_code = @code, last_error_message = @message, last_error_class = @errorClass
    WHERE seq = @seq AND status IN ('queued', 'waiting') AND NOT EXISTS (SELECT 1 FROM job_leases l WHERE l.seq = @seq)`,
  leaseCancelRequest: `UPDATE job_leases SET cancel_requested = 1 WHERE seq = @seq`,
  /** An unknown job reconciled as succeeded or dead (reconcileEnding); a requeue uses jobRequeue. */
  jobReconcile: `UPDATE jobs SET status = @status, finished_at = @now,
      last_error_code = @code, last_error_message = @message, last_error_class = @errorClass
    WHERE seq = @seq AND status = 'unknown'`,
  ...GROUP_SQL,
  ...LEASE_END_SQL,
  ...ENQUEUE_KEY_SQL,
} as const;

export type QueryName = keyof typeof SQL;

/** Every statement of SQL, prepared once on the store's connection; the write transaction's functions take it. */
export type Statements = { readonly [K in QueryName]: Statement };

/**
 * The statistics, run only on the stats reader's own connection (stats-reader.ts), so not prepared with SQL
 * above. They read the counter rows (counter-moves.ts) and the head of each (kind, priority) group of job_ready,
 * so they cost the same whatever the tables hold.
 */
export const STATS_SQL = {
  statsCounts: `SELECT status, SUM(jobs) AS n FROM job_counters WHERE tenant = ? GROUP BY status`,
  statsTimes: `SELECT SUM(wait_ms) * 1.0 / NULLIF(SUM(started), 0) AS mean_wait, SUM(run_ms) * 1.0 / NULLIF(SUM(run_jobs), 0) AS mean_run,
      SUM(completion_ms) * 1.0 / NULLIF(SUM(completed), 0) AS mean_completion
    FROM job_counters WHERE tenant = ?`,
  statsAttemptTimes: `SELECT attempt_run_ms * 1.0 / NULLIF(ended_attempts, 0) AS mean_attempt_run FROM tenant_counters WHERE tenant = ?`,
  counterGet: `SELECT lease_expirations, storage_bytes FROM tenant_counters WHERE tenant = ?`,
  /** The earliest run_after of each (kind, priority) group of the tenant's ready jobs (READY_GROUPS), if it has passed. */
  statsOldestAvailable: `${QUEUED_KINDS}, ${READY_GROUPS}
    SELECT CASE WHEN oldest <= @now THEN oldest END AS oldest FROM (SELECT MIN((SELECT r.run_after FROM job_ready r
      WHERE r.tenant = @tenant AND r.kind = g.kind AND r.group_key = g.group_key AND r.priority = g.priority ORDER BY r.run_after LIMIT 1)) AS oldest
      FROM g WHERE g.priority IS NOT NULL)`,
} as const;

/**
 * A lease statement (jobLeaseKindsSql, jobLeaseTenantSql) with `max` written in place of @max: a bound LIMIT
 * makes SQLite prepare the statement again at every run (lease-statements.ts). `max` is a count the protocol
 * has checked; anything but a positive integer is refused here too, since it becomes SQL text.
 */
export function withLeaseMax(sql: string, max: number): string {
  if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`a lease takes a positive whole number of jobs, not ${String(max)}`);
  return sql.replace(/@max\b/g, String(max));
}

/** A ready row's columns as a lease reads them. */
const READY_PICK = `seq, kind, priority, run_after, deadline_at, attempts, epoch`;
/** A ready row the lease may take now: due, and not past its deadline (the reaper ends those). */
const LEASABLE = `run_after <= @now AND (deadline_at IS NULL OR deadline_at > @now)`;

/**
 * The statement that takes jobs: a lease row for each picked ready row, with its epoch bumped and its attempt
 * counted, a fresh token (lh_token) and an expiry capped at the job's deadline. The lease row's primary key
 * admits one live lease per job. The store deletes the picked ready rows next, in the same write transaction
 * (readyDeleteMany); SQLite has no statement that moves rows between tables.
 */
function leaseInsert(pick: string): string {
  return `INSERT INTO job_leases (seq, tenant, kind, priority, run_after, deadline_at, epoch, attempt, token, worker_id, started_at, expires_at)
    SELECT seq, @tenant, kind, priority, run_after, deadline_at, epoch + 1, attempts + 1, lh_token(), @workerId, @now,
      CASE WHEN deadline_at IS NOT NULL AND deadline_at < @now + @leaseMs THEN deadline_at ELSE @now + @leaseMs END
    FROM (${pick})
    RETURNING seq, kind, priority, run_after, deadline_at, epoch, attempt, token, expires_at`;
}

/**
 * The lease of `kindCount` kinds (bound as @k0, @k1, …): each kind's ready rows are walked in lease order on
 * job_ready's primary key, at most @max of each, and the best @max of those are taken. It reads O(max × kinds)
 * ready rows, never another kind's backlog. One statement per kind count. A lease without a kinds filter names
 * the tenant's queued kinds (lease.ts).
 *
 * `capped`: the restricted path's statement, with no guard and its own cap per kind (@m0, @m1, …: what the
 * kind's limits allow, flow-limits.ts), so a limited kind's walk stops at its allowance.
 */
export function jobLeaseKindsSql(kindCount: number, capped = false): string {
  const kinds = Array.from({ length: kindCount }, (_, i) => `@k${i}`);
  const walks = kinds.map(
    (kind, i) => `SELECT * FROM (SELECT ${READY_PICK} FROM job_ready WHERE tenant = @tenant AND kind = ${kind} AND group_key = '' AND ${LEASABLE}
        ORDER BY priority DESC, run_after, seq LIMIT ${capped ? `@m${i}` : '@max'})`,
  );
  const guard = capped ? '' : ` WHERE ${unrestricted(kinds.join(', '))}`;
  return leaseInsert(`SELECT * FROM (${walks.join(' UNION ALL ')})${guard} ORDER BY priority DESC, run_after, seq LIMIT @max`);
}

/**
 * The lease of any kind for a tenant with more queued kinds than one statement walks (lease.ts): the tenant's
 * due ready rows sorted in lease order. It reads every due ready row of the tenant, so only that case takes it.
 */
export const jobLeaseTenantSql =
  leaseInsert(`SELECT ${READY_PICK} FROM job_ready WHERE tenant = @tenant AND group_key = '' AND ${LEASABLE} AND ${unrestricted(null)}
      ORDER BY priority DESC, run_after, seq LIMIT @max`);
