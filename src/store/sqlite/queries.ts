/**
 * Every SQL statement of the SQLite backend, by name. The store prepares each
 * once at open. Guards in WHERE clauses mirror the decide* functions in
 * src/core/transitions.ts, so a statement can never apply a transition that
 * the decision would not have allowed, even if the snapshot were stale.
 */

import type { Statement } from 'better-sqlite3';
import { MAX_LISTED_CHILDREN } from '../../core/dependencies.js';
import { PURGEABLE_STATUSES } from '../../core/states.js';

/** The statuses that hold a concurrency key's turn (core/dependencies.ts holdsKeyTurn): the predicate of jobs_key_turn. */
const KEY_TURN = `status IN ('queued', 'waiting', 'running')`;
/** The predicate of jobs_key_active: a key's job that is queued or running. */
const KEY_ACTIVE = `status IN ('queued', 'running')`;
/** A dedupe key's holder that still takes duplicates (core/dedupe.ts takesDuplicates), at @now. */
const TAKES_DUPLICATES = `status IN ('queued', 'waiting') AND epoch = 0 AND dedupe_until > @now`;
/** The finished statuses, after which a unique key's holder keeps it for forMs (core/dedupe.ts decideUnique). */
const FINISHED = PURGEABLE_STATUSES.map((status) => `'${status}'`).join(', ');

const JOB_COLUMNS = `j.seq, j.id, j.tenant, j.owner, j.kind, j.payload, j.status, j.attempts, j.max_attempts, j.priority,
  j.run_after, j.deadline_at, j.deadline_ms, j.lease_owner, j.lease_expires_at, j.epoch, j.lease_token, j.last_outcome,
  j.created_at, j.started_at, j.finished_at, j.last_error_code, j.last_error_message, j.last_error_class, j.progress, j.cancel_requested,
  j.effect_started_at, j.checkpoint_step, j.checkpoint_state, j.request_hash, j.concurrency_key, j.pending_parents, j.has_children,
  (SELECT json_group_array(id) FROM (SELECT p.id FROM job_dependencies d JOIN jobs p ON p.seq = d.parent_seq
    WHERE d.child_seq = j.seq ORDER BY d.parent_seq)) AS depends_on,
  (SELECT json_group_array(id) FROM (SELECT c.id FROM job_dependencies d JOIN jobs c ON c.seq = d.child_seq
    WHERE d.parent_seq = j.seq ORDER BY d.child_seq LIMIT ${MAX_LISTED_CHILDREN})) AS children`;

/** Just what the decide* functions and the guarded writes need: no payload, progress or checkpoint to copy out. */
const SNAPSHOT_COLUMNS = `j.seq, j.tenant, j.kind, j.status, j.attempts, j.max_attempts, j.run_after, j.deadline_at, j.lease_expires_at, j.epoch,
  j.lease_token, j.last_outcome, j.cancel_requested, j.effect_started_at, j.concurrency_key, j.has_children`;

const RESULT_COLUMNS = 'r.content_type AS result_content_type, r.body AS result_body, r.checksum AS result_checksum';

/** What a listing reads: no payload, checkpoint state or result body, so a page costs its rows, not their contents. */
const LIST_COLUMNS = `j.seq, j.id, j.tenant, j.owner, j.kind, j.status, j.attempts, j.max_attempts, j.priority,
  j.run_after, j.deadline_at, j.deadline_ms, j.lease_owner, j.lease_expires_at, j.epoch, j.lease_token, j.last_outcome,
  j.created_at, j.started_at, j.finished_at, j.last_error_code, j.last_error_message, j.last_error_class, j.progress, j.cancel_requested,
  j.effect_started_at, j.checkpoint_step, j.request_hash, j.concurrency_key, r.content_type AS result_content_type, r.size_bytes AS result_bytes`;

/**
 * The distinct kinds of @tenant's queued jobs as rows of `k(kind)`, the last one NULL: a skip scan, one index
 * probe per kind, whatever each kind has queued. Callers read `FROM k WHERE k.kind IS NOT NULL`.
 */
export const QUEUED_KINDS = `WITH RECURSIVE k(kind) AS (
      SELECT (SELECT MIN(kind) FROM jobs WHERE tenant = @tenant AND status = 'queued')
      UNION ALL
      SELECT (SELECT MIN(kind) FROM jobs WHERE tenant = @tenant AND status = 'queued' AND kind > k.kind) FROM k WHERE k.kind IS NOT NULL)`;

/** A kind with a pause or a limit: the predicate of the kinds_flow index (migration 7), repeated so that queries use it. */
const RESTRICTED = `(paused = 1 OR max_concurrent IS NOT NULL OR rate_limit IS NOT NULL)`;

/**
 * The lease statements' guard: none of the kinds it may take is restricted. A probe of kinds_flow, which
 * holds no rows for a tenant without pauses or limits; when it finds one the statement leases nothing and
 * the store takes the restricted path (sqlite-store.ts leaseRestricted).
 */
function unrestricted(kindsIn: string | null): string {
  return `NOT EXISTS (SELECT 1 FROM kinds INDEXED BY kinds_flow WHERE tenant = @tenant${kindsIn === null ? '' : ` AND kind IN (${kindsIn})`}
        AND ${RESTRICTED})`;
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
      retention_dead_ms, max_concurrent, rate_limit, rate_per_ms, updated_at)
    VALUES (@tenant, @kind, @payloadSchema, @maxPayloadBytes, @maxAttempts, @leaseMs, @backoffBaseMs, @backoffMaxMs,
      @deadlineMs, @maxResultBytes, @maxCheckpointBytes, @retentionSucceededMs, @retentionCancelledMs, @retentionDeadMs,
      @maxConcurrent, @rateLimit, @ratePerMs, @now)
    ON CONFLICT (tenant, kind) DO UPDATE SET payload_schema = excluded.payload_schema,
      max_payload_bytes = excluded.max_payload_bytes, max_attempts = excluded.max_attempts, lease_ms = excluded.lease_ms,
      backoff_base_ms = excluded.backoff_base_ms, backoff_max_ms = excluded.backoff_max_ms,
      deadline_ms = excluded.deadline_ms, max_result_bytes = excluded.max_result_bytes,
      max_checkpoint_bytes = excluded.max_checkpoint_bytes, retention_succeeded_ms = excluded.retention_succeeded_ms,
      retention_cancelled_ms = excluded.retention_cancelled_ms, retention_dead_ms = excluded.retention_dead_ms,
      max_concurrent = excluded.max_concurrent, rate_limit = excluded.rate_limit, rate_per_ms = excluded.rate_per_ms,
      updated_at = excluded.updated_at
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
  jobInsert: `INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
      max_attempts, priority, run_after, deadline_ms, deadline_at, created_at)
    VALUES (@id, @tenant, @owner, @idempotencyKey, @requestHash, @kind, @payload, @payloadBytes, 'queued',
      @maxAttempts, @priority, @runAfter, @deadlineMs, @deadlineAt, @now)`,
  /**
   * A job with dependsOn, a concurrencyKey, a dedupe or a unique key (enqueue.ts enqueueFlowJob): its status comes
   * from decideStart, and a job dead at once (dependency_failed) is finished at its acceptance.
   */
  jobInsertFlow: `INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
      max_attempts, priority, run_after, deadline_ms, deadline_at, created_at, finished_at, last_error_code, last_error_message,
      last_error_class, pending_parents, concurrency_key, dedupe_key, dedupe_until, unique_key)
    VALUES (@id, @tenant, @owner, @idempotencyKey, @requestHash, @kind, @payload, @payloadBytes, @status,
      @maxAttempts, @priority, @runAfter, @deadlineMs, @deadlineAt, @now, CASE WHEN @status = 'dead' THEN @now END, @code, @message,
      @errorClass, @pendingParents, @concurrencyKey, @dedupeKey, @dedupeUntil, @uniqueKey)
    RETURNING seq`,
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
  jobKeyHead: `SELECT seq, tenant, kind, status, pending_parents, concurrency_key, has_children FROM jobs INDEXED BY jobs_key_turn
    WHERE tenant = @tenant AND kind = @kind AND concurrency_key = @key AND ${KEY_TURN} ORDER BY seq LIMIT 1`,
  /** A parent succeeded: its waiting children have one pending parent fewer. */
  jobDependencySatisfy: `UPDATE jobs SET pending_parents = pending_parents - 1
    WHERE seq IN (SELECT child_seq FROM job_dependencies WHERE parent_seq = @parent) AND status = 'waiting'
    RETURNING seq, tenant, kind, status, pending_parents, concurrency_key, has_children`,
  /** A parent ended dead or cancelled: its waiting children end with DEPENDENCY_FAILED (lease-endings.ts). */
  jobDependencyFail: `UPDATE jobs SET status = @status, finished_at = @now,
      last_error_code = @code, last_error_message = @message, last_error_class = @errorClass
    WHERE seq IN (SELECT child_seq FROM job_dependencies WHERE parent_seq = @parent) AND status = 'waiting'
    RETURNING seq, tenant, kind, status, pending_parents, concurrency_key, has_children`,
  /** decideRelease's 'release': no parent pending and the key's turn. It becomes available now, or at its own later run-after. */
  jobRelease: `UPDATE jobs SET status = 'queued', run_after = MAX(run_after, @now)
    WHERE seq = @seq AND status = 'waiting' AND pending_parents = 0`,
  /** The job of (tenant, owner, kind) that holds a dedupe key: one entry of jobs_dedupe_key (migration 13). */
  jobDedupeHolder: `SELECT seq, id, status, epoch, created_at, run_after, dedupe_until, payload_bytes FROM jobs INDEXED BY jobs_dedupe_key
    WHERE tenant = @tenant AND owner = @owner AND kind = @kind AND dedupe_key = @key`,
  /** decideDedupe's merge, guarded by takesDuplicates: the payload when @replace, runAfter and the window never moved earlier. */
  jobDedupeMerge: `UPDATE jobs SET payload = CASE WHEN @replace = 1 THEN @payload ELSE payload END,
      payload_bytes = CASE WHEN @replace = 1 THEN @payloadBytes ELSE payload_bytes END,
      run_after = MAX(run_after, @runAfter), dedupe_until = MAX(dedupe_until, @dedupeUntil)
    WHERE seq = @seq AND dedupe_key = @key AND ${TAKES_DUPLICATES}`,
  /** decideDedupe's release: a holder that takes no more duplicates gives its key up to the job about to be inserted. */
  jobDedupeRelease: `UPDATE jobs SET dedupe_key = NULL, dedupe_until = NULL WHERE seq = @seq AND dedupe_key = @key AND NOT (${TAKES_DUPLICATES})`,
  /** The job of (tenant, owner, kind) that holds a unique key: one entry of jobs_unique_key (migration 13). */
  jobUniqueHolder: `SELECT seq, id, status, finished_at FROM jobs INDEXED BY jobs_unique_key
    WHERE tenant = @tenant AND owner = @owner AND kind = @kind AND unique_key = @key`,
  /** decideUnique's release: a holder finished at least @forMs ago gives its key up to the job about to be inserted. */
  jobUniqueRelease: `UPDATE jobs SET unique_key = NULL
    WHERE seq = @seq AND unique_key = @key AND status IN (${FINISHED}) AND finished_at + @forMs <= @now`,
  /** New jobs of one (tenant, kind, status), counted once per commit (new-job-counts.ts): a new job adds only `jobs`. */
  counterAddJobs: `INSERT INTO job_counters (tenant, kind, status, jobs) VALUES (?, ?, ?, ?)
    ON CONFLICT (tenant, kind, status) DO UPDATE SET jobs = jobs + excluded.jobs`,
  counterAddStorage: `INSERT INTO tenant_counters (tenant, storage_bytes) VALUES (?, ?)
    ON CONFLICT (tenant) DO UPDATE SET storage_bytes = storage_bytes + excluded.storage_bytes`,
  counterAddExpirations: `INSERT INTO tenant_counters (tenant, lease_expirations) VALUES (?, 1)
    ON CONFLICT (tenant) DO UPDATE SET lease_expirations = lease_expirations + 1`,

  jobGet: `SELECT ${JOB_COLUMNS}, ${RESULT_COLUMNS} FROM jobs j LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE j.id = @id AND j.tenant = @tenant AND (@owner IS NULL OR j.owner = @owner)`,
  jobGetBySeq: `SELECT ${JOB_COLUMNS}, ${RESULT_COLUMNS} FROM jobs j LEFT JOIN job_results r ON r.job_seq = j.seq WHERE j.seq = ?`,
  jobGetByIdUnscoped: `SELECT ${JOB_COLUMNS}, ${RESULT_COLUMNS} FROM jobs j LEFT JOIN job_results r ON r.job_seq = j.seq WHERE j.id = ?`,
  /** The snapshot a decide* function reads; inside the write transaction, which holds the database's write lock. */
  jobLock: `SELECT ${SNAPSHOT_COLUMNS} FROM jobs j WHERE j.id = ? AND j.tenant = ?`,
  // One statement per filter, planned once each, so every page walks an index in seq order from the
  // cursor instead of sorting the tenant's jobs (@cursor is never NULL: the first page starts above every seq).
  jobListByStatus: `SELECT ${LIST_COLUMNS} FROM jobs j LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE j.tenant = @tenant AND j.status = @status AND j.seq < @cursor
      AND (@owner IS NULL OR j.owner = @owner) AND (@kind IS NULL OR j.kind = @kind)
    ORDER BY j.seq DESC LIMIT @limit`,
  jobListByOwner: `SELECT ${LIST_COLUMNS} FROM jobs j LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE j.tenant = @tenant AND j.owner = @owner AND j.seq < @cursor AND (@kind IS NULL OR j.kind = @kind)
    ORDER BY j.seq DESC LIMIT @limit`,
  jobListByTenant: `SELECT ${LIST_COLUMNS} FROM jobs j LEFT JOIN job_results r ON r.job_seq = j.seq
    WHERE j.tenant = @tenant AND j.seq < @cursor AND (@kind IS NULL OR j.kind = @kind)
    ORDER BY j.seq DESC LIMIT @limit`,

  /**
   * One statement picks and claims; lh_token() draws a fresh random token per row. INDEXED BY: without
   * ANALYZE statistics the planner may prefer jobs_queued_by_run_after, which reads every due job of the tenant.
   */
  jobLeaseAnyKind: `UPDATE jobs SET status = 'running', attempts = attempts + 1, epoch = epoch + 1, lease_token = lh_token(),
      lease_owner = @workerId, lease_expires_at = CASE WHEN deadline_at IS NOT NULL AND deadline_at < @now + @leaseMs
        THEN deadline_at ELSE @now + @leaseMs END,
      started_at = COALESCE(started_at, @now), last_outcome = NULL, effect_started_at = NULL
    WHERE seq IN (SELECT seq FROM jobs INDEXED BY jobs_available WHERE tenant = @tenant AND status = 'queued' AND run_after <= @now
        AND (deadline_at IS NULL OR deadline_at > @now)
      ORDER BY priority DESC, run_after, seq LIMIT @max)
      AND ${unrestricted(null)}
    RETURNING seq, id, kind, payload, attempts, max_attempts, epoch, lease_token, lease_expires_at, deadline_at,
      checkpoint_step, checkpoint_state, priority, run_after`,
  attemptInsert: `INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at) VALUES (?, ?, ?, ?, ?)`,
  attemptEnd: `UPDATE job_attempts SET ended_at = ?, outcome = ?, error_code = ? WHERE job_seq = ? AND epoch = ? AND ended_at IS NULL`,
  attemptList: `SELECT a.attempt, a.epoch, a.worker_id, a.started_at, a.ended_at, a.outcome, a.error_code
    FROM job_attempts a WHERE a.job_seq = ? ORDER BY a.epoch`,

  jobsExpiredLeases: `SELECT ${SNAPSHOT_COLUMNS} FROM jobs j WHERE j.status = 'running' AND j.lease_expires_at <= ?`,

  /**
   * Applies an ending of src/store/lease-endings.ts to a running job: success, retry, dead, cancelled,
   * unknown. @live says whether the lease must still be live (complete, fail) or already expired (the
   * reaper); with the token that is the fence. PostgreSQL's jobEndLeases takes many rows at once.
   */
  jobEndLease: `UPDATE jobs SET status = @status, last_outcome = @outcome, lease_expires_at = NULL,
      run_after = CASE WHEN @status = 'queued' THEN coalesce(@runAfter, @now) ELSE run_after END,
      finished_at = CASE WHEN @status = 'queued' THEN finished_at ELSE @now END,
      last_error_code = @code, last_error_message = @message, last_error_class = @errorClass
    WHERE seq = @seq AND status = 'running' AND lease_token = @token AND (lease_expires_at > @now) = @live`,
  /** Queued jobs past their deadline are never leased (the lease WHERE); this ends them with QUEUED_DEADLINE. */
  jobQueuedDeadline: `UPDATE jobs SET status = @status, finished_at = @now,
      last_error_code = @code, last_error_message = @message, last_error_class = @errorClass
    WHERE status = 'queued' AND deadline_at IS NOT NULL AND deadline_at <= @now
    RETURNING seq, tenant, kind, status, pending_parents, concurrency_key, has_children`,

  jobRenew: `UPDATE jobs SET lease_expires_at = @leaseExpiresAt, progress = COALESCE(@progress, progress)
    WHERE seq = @seq AND status = 'running' AND lease_token = @token AND lease_expires_at > @now`,
  resultInsert: `INSERT INTO job_results (job_seq, content_type, body, checksum, size_bytes) VALUES (?, ?, ?, ?, ?)`,
  /** Bytes of a job's checkpoint state and progress, to move the tenant's storage counter by the change. */
  jobMutableBytes: `SELECT coalesce(length(CAST(checkpoint_state AS BLOB)), 0) + coalesce(length(CAST(progress AS BLOB)), 0) AS bytes
    FROM jobs WHERE seq = ?`,
  jobCheckpoint: `UPDATE jobs SET checkpoint_step = @step, checkpoint_state = @state
    WHERE seq = @seq AND status = 'running' AND lease_token = @token AND lease_expires_at > @now`,
  jobEffectStarted: `UPDATE jobs SET effect_started_at = COALESCE(effect_started_at, @now)
    WHERE seq = @seq AND status = 'running' AND lease_token = @token AND lease_expires_at > @now`,
  /** @status: queued or waiting (decideStart, for a job with parents or a key), with its parents not yet succeeded. */
  jobRequeue: `UPDATE jobs SET status = @status, pending_parents = @pendingParents, attempts = 0, max_attempts = @maxAttempts, run_after = @now,
      deadline_at = CASE WHEN deadline_ms IS NULL THEN NULL ELSE @now + deadline_ms END,
      finished_at = NULL, lease_expires_at = NULL, cancel_requested = 0, effect_started_at = NULL
    WHERE seq = @seq AND status = @fromStatus`,
  jobCancelNow: `UPDATE jobs SET status = @status, finished_at = @now, lease_expires_at = NULL,
      last_error_code = @code, last_error_message = @message, last_error_class = @errorClass
    WHERE seq = @seq AND status IN ('queued', 'waiting')`,
  jobCancelRequest: `UPDATE jobs SET cancel_requested = 1 WHERE seq = @seq AND status = 'running'`,
  /** An unknown job reconciled as succeeded or dead (reconcileEnding); a requeue uses jobRequeue. */
  jobReconcile: `UPDATE jobs SET status = @status, finished_at = @now,
      last_error_code = @code, last_error_message = @message, last_error_class = @errorClass
    WHERE seq = @seq AND status = 'unknown'`,
} as const;

export type QueryName = keyof typeof SQL;

/** Every statement of SQL, prepared once on the store's connection; the write transaction's functions take it. */
export type Statements = { readonly [K in QueryName]: Statement };

/**
 * The statistics, run only on the stats reader's own connection (stats-reader.ts), so not prepared with SQL
 * above. They read the counter rows the triggers of migration 5 keep, and the head of jobs_queued_by_run_after,
 * so they cost the same whatever the table holds.
 */
export const STATS_SQL = {
  statsCounts: `SELECT status, SUM(jobs) AS n FROM job_counters WHERE tenant = ? GROUP BY status`,
  statsTimes: `SELECT SUM(wait_ms) * 1.0 / NULLIF(SUM(started), 0) AS mean_wait, SUM(run_ms) * 1.0 / NULLIF(SUM(run_jobs), 0) AS mean_run,
      SUM(completion_ms) * 1.0 / NULLIF(SUM(completed), 0) AS mean_completion
    FROM job_counters WHERE tenant = ?`,
  statsAttemptTimes: `SELECT attempt_run_ms * 1.0 / NULLIF(ended_attempts, 0) AS mean_attempt_run FROM tenant_counters WHERE tenant = ?`,
  counterGet: `SELECT lease_expirations, storage_bytes FROM tenant_counters WHERE tenant = ?`,
  statsOldestAvailable: `SELECT MIN(run_after) AS oldest FROM jobs INDEXED BY jobs_queued_by_run_after
    WHERE tenant = ? AND status = 'queued' AND run_after <= ?`,
} as const;

/**
 * A lease statement (jobLeaseAnyKind, jobLeaseKindsSql) with `max` written in place of @max: a bound LIMIT
 * makes SQLite prepare the statement again at every run (lease-statements.ts). `max` is a count the protocol
 * has checked; anything but a positive integer is refused here too, since it becomes SQL text.
 */
export function withLeaseMax(sql: string, max: number): string {
  if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`a lease takes a positive whole number of jobs, not ${String(max)}`);
  return sql.replace(/@max\b/g, String(max));
}

/**
 * The lease of a kinds filter with `kindCount` kinds (bound as @k0, @k1, …): each kind's available jobs are
 * walked in lease order on jobs_available_by_kind, at most @max of each, and the best @max of those are claimed.
 * It reads O(max × kinds) index entries, never another kind's backlog. One statement per kind count.
 *
 * `capped`: the restricted path's statement, with no guard and its own cap per kind (@m0, @m1, …: what the
 * kind's limits allow, flow-limits.ts), so a limited kind's walk stops at its allowance.
 */
export function jobLeaseKindsSql(kindCount: number, capped = false): string {
  const kinds = Array.from({ length: kindCount }, (_, i) => `@k${i}`);
  const walks = kinds.map(
    (
      kind,
      i,
    ) => `SELECT * FROM (SELECT seq, priority, run_after FROM jobs INDEXED BY jobs_available_by_kind WHERE tenant = @tenant AND kind = ${kind} AND status = 'queued'
        AND run_after <= @now AND (deadline_at IS NULL OR deadline_at > @now) ORDER BY priority DESC, run_after, seq LIMIT ${capped ? `@m${i}` : '@max'})`,
  );
  return `UPDATE jobs SET status = 'running', attempts = attempts + 1, epoch = epoch + 1, lease_token = lh_token(),
      lease_owner = @workerId, lease_expires_at = CASE WHEN deadline_at IS NOT NULL AND deadline_at < @now + @leaseMs
        THEN deadline_at ELSE @now + @leaseMs END,
      started_at = COALESCE(started_at, @now), last_outcome = NULL, effect_started_at = NULL
    WHERE seq IN (SELECT seq FROM (${walks.join(' UNION ALL ')}) ORDER BY priority DESC, run_after, seq LIMIT @max)${
      capped
        ? ''
        : `
      AND ${unrestricted(kinds.join(', '))}`
    }
    RETURNING seq, id, kind, payload, attempts, max_attempts, epoch, lease_token, lease_expires_at, deadline_at,
      checkpoint_step, checkpoint_state, priority, run_after`;
}
