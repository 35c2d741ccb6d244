/**
 * The named statements of the PostgreSQL backend that move jobs. pg prepares
 * each name once per pooled connection. Every statement that changes a leased
 * job repeats, in its WHERE clause, the fencing condition of the decide*
 * function it applies (status = 'running' AND lease_token = $token and the
 * expiry), so a stale snapshot can never apply a transition. Times all come
 * from now(): the start of the statement's transaction on the server.
 *
 * Key, kind, listing and stats statements live in catalog-queries.ts; the
 * lease's own (the due probe, the picks, the restricted path's flow state)
 * in lease-queries.ts, and the dedupe and unique keys' in
 * enqueue-key-queries.ts, both exported from here as well.
 */

import { interval, JOB_COLUMNS, JOB_RELATIONS, JOB_WITH_RESULT_FROM, ms, namedQuery, NOW_MS, RESULT_COLUMNS, ts } from './sql-fragments.js';

export * from './lease-queries.js';
export * from './enqueue-key-queries.js';

export const NOW = namedQuery('lh_now', `SELECT ${NOW_MS}`);

/**
 * Inserts a batch in one statement (so it is one transaction). Rows whose
 * (tenant, owner, idempotency_key) exists, or repeats an earlier row of the
 * same batch, are skipped and looked up afterwards.
 */
export const JOB_INSERT_MANY = namedQuery(
  'lh_job_insert_many',
  `WITH input AS (
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                          $8::int[], $9::int[], $10::int[], $11::float8[], $12::float8[])
       WITH ORDINALITY AS i(id, tenant, owner, idempotency_key, request_hash, kind, payload,
                            payload_bytes, max_attempts, priority, run_after, deadline_ms, ord)
   )
   INSERT INTO jobs AS j (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
                          max_attempts, priority, run_after, deadline_ms, deadline_at, created_at)
   SELECT id, tenant, owner, idempotency_key, request_hash, kind, payload::json, payload_bytes, 'queued',
          max_attempts, priority, coalesce(${ts('run_after')}, now()), deadline_ms::bigint,
          now() + ${interval('deadline_ms')}, now()
     FROM input ORDER BY ord
   ON CONFLICT (tenant, owner, idempotency_key) DO NOTHING
   RETURNING ${JOB_COLUMNS}`,
);

/** The existing rows for idempotency keys that did not insert. */
export const JOB_BY_KEYS = namedQuery(
  'lh_job_by_keys',
  `SELECT ${JOB_COLUMNS}, ${RESULT_COLUMNS}, ${JOB_RELATIONS}
     FROM unnest($1::text[], $2::text[], $3::text[]) AS k(tenant, owner, idempotency_key)
     JOIN ${JOB_WITH_RESULT_FROM}
       ON j.tenant = k.tenant AND j.owner = k.owner AND j.idempotency_key = k.idempotency_key`,
);

export const JOB_GET = namedQuery(
  'lh_job_get',
  `SELECT ${JOB_COLUMNS}, ${RESULT_COLUMNS}, ${JOB_RELATIONS} FROM ${JOB_WITH_RESULT_FROM}
    WHERE j.id = $1 AND j.tenant = $2 AND ($3::text IS NULL OR j.owner = $3)`,
);

/**
 * A job with dependsOn, a concurrencyKey, a dedupe or a unique key (enqueue.ts insertFlowJob), one row inside a
 * transaction: its status comes from decideStart, and a job dead at once (dependency_failed, $14… bound) is
 * finished at its acceptance. Its dedupe window ($20 ms) starts at now(). A row whose idempotency, dedupe or
 * unique key another job took first (the conflict waits for that job's transaction) is not inserted: the
 * caller looks again at what holds the key.
 */
export const JOB_INSERT_FLOW = namedQuery(
  'lh_job_insert_flow',
  `INSERT INTO jobs AS j (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
                         max_attempts, priority, run_after, deadline_ms, deadline_at, created_at, finished_at,
                         last_error_code, last_error_message, last_error_class, pending_parents, concurrency_key,
                         dedupe_key, dedupe_until, unique_key)
   VALUES ($1::uuid, $2, $3, $4, $5, $6, $7::json, $8, $9::text, $10, $11, coalesce(${ts('$12')}, now()), $13::bigint,
           now() + $13::bigint * interval '1 millisecond', now(), CASE WHEN $9::text = 'dead' THEN now() END, $14, $15, $16, $17, $18,
           $19::text, now() + ${interval('$20')}, $21::text)
   ON CONFLICT DO NOTHING
   RETURNING ${JOB_COLUMNS}`,
);

/**
 * The named parents ($3) the enqueuer may see, locked in id order and marked as having children: a parent's end
 * (which locks its row first) then either committed before and is read here, or sees the mark and this child.
 */
export const JOB_PARENTS_MARK = namedQuery(
  'lh_job_parents_mark',
  `WITH p AS (
     SELECT id, seq, status, has_children FROM jobs
      WHERE tenant = $1 AND ($2::text IS NULL OR owner = $2) AND id = ANY($3::uuid[]) ORDER BY id FOR UPDATE
   ), marked AS (
     -- A parent marked already is not written again (a parent of many children would gain a row version each).
     UPDATE jobs j SET has_children = true FROM p WHERE j.id = p.id AND NOT p.has_children
   )
   SELECT id::text AS id, seq::float8 AS seq, status FROM p`,
);

export const DEPENDENCY_INSERT = namedQuery('lh_dependency_insert', `INSERT INTO job_dependencies (parent_id, child_id) SELECT unnest($1::uuid[]), $2::uuid`);

/** A requeued job's parents that have not succeeded (a purged parent no longer counts). */
export const JOB_PENDING_PARENTS = namedQuery(
  'lh_job_pending_parents',
  `SELECT count(*)::int AS n FROM job_dependencies d JOIN jobs p ON p.id = d.parent_id WHERE d.child_id = $1 AND p.status <> 'succeeded'`,
);

/**
 * Serializes, until the transaction ends, everything that reads a key's turn and acts on it: an enqueue of the
 * key, a keyed job's end releasing the next, a child of the key released by its last parent. Without it an
 * enqueue could miss an end committing beside it (and wait for ever) or two enqueues could both start queued.
 */
export const JOB_KEY_LOCK = namedQuery(
  'lh_job_key_lock',
  `SELECT pg_advisory_xact_lock(hashtextextended($1::text || chr(1) || $2::text || chr(1) || $3::text, 0)) AS locked`,
);

const KEY_TURN = `status IN ('queued', 'waiting', 'running')`;
const KEY_ACTIVE = `status IN ('queued', 'running')`;

/**
 * A key's two probes (KeyFacts): an earlier job holding its turn (jobs_key_turn), another queued or running
 * (jobs_key_active). Each is the first row in seq order rather than an EXISTS: the order is the index's, so the
 * planner walks the index and stops at one entry, where for an EXISTS over a hot key it may prefer a sequential
 * scan that reads the table until it meets a match.
 */
export const JOB_KEY_FACTS = namedQuery(
  'lh_job_key_facts',
  `SELECT (SELECT seq FROM jobs WHERE tenant = $1 AND kind = $2 AND concurrency_key = $3 AND ${KEY_TURN} AND seq < $4::bigint
            ORDER BY seq LIMIT 1) IS NOT NULL AS earlier_holder,
          (SELECT seq FROM jobs WHERE tenant = $1 AND kind = $2 AND concurrency_key = $3 AND ${KEY_ACTIVE} AND seq <> $4::bigint
            ORDER BY seq LIMIT 1) IS NOT NULL AS other_active`,
);

const FLOW_COLUMNS = `j.id::text AS id, j.seq::float8 AS seq, j.tenant, j.kind, j.status, j.pending_parents, j.concurrency_key, j.has_children`;

/** The earliest job of a key that holds its turn: the next to run once the turn passes. */
export const JOB_KEY_HEAD = namedQuery(
  'lh_job_key_head',
  `SELECT ${FLOW_COLUMNS} FROM jobs j WHERE j.tenant = $1 AND j.kind = $2 AND j.concurrency_key = $3 AND j.${KEY_TURN} ORDER BY j.seq LIMIT 1`,
);

/** A parent succeeded: its waiting children have one pending parent fewer. */
export const JOB_DEPENDENCY_SATISFY = namedQuery(
  'lh_job_dependency_satisfy',
  `UPDATE jobs j SET pending_parents = j.pending_parents - 1
     FROM job_dependencies d WHERE d.parent_id = $1 AND j.id = d.child_id AND j.status = 'waiting'
   RETURNING ${FLOW_COLUMNS}`,
);

/** A parent ended dead or cancelled: its waiting children end with DEPENDENCY_FAILED ($2…, lease-endings.ts). */
export const JOB_DEPENDENCY_FAIL = namedQuery(
  'lh_job_dependency_fail',
  `UPDATE jobs j SET status = $2, finished_at = now(), last_error_code = $3, last_error_message = $4, last_error_class = $5
     FROM job_dependencies d WHERE d.parent_id = $1 AND j.id = d.child_id AND j.status = 'waiting'
   RETURNING ${FLOW_COLUMNS}`,
);

/** decideRelease's 'release': no parent pending and the key's turn. Available now, or at its own later run-after. */
export const JOB_RELEASE = namedQuery(
  'lh_job_release',
  `UPDATE jobs j SET status = 'queued', run_after = GREATEST(j.run_after, now())
    WHERE j.id = $1 AND j.status = 'waiting' AND j.pending_parents = 0
   RETURNING j.id`,
);

/** The snapshot a decide* function reads, locked for the rest of the transaction. */
export const JOB_LOCK = namedQuery(
  'lh_job_lock',
  `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM jobs j
    WHERE j.id = $1 AND j.tenant = $2 AND ($3::text IS NULL OR j.owner = $3)
    FOR UPDATE`,
);

/** Locks in id order, so two batches over the same jobs cannot deadlock. */
export const JOB_LOCK_MANY = namedQuery(
  'lh_job_lock_many',
  `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM jobs j WHERE j.id = ANY($1::uuid[]) ORDER BY j.id FOR UPDATE`,
);

/** A read without a lock, to say why a guarded statement matched nothing. */
export const JOB_PEEK = namedQuery('lh_job_peek', `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM jobs j WHERE j.id = $1 AND j.tenant = $2`);

export const JOB_PEEK_MANY = namedQuery('lh_job_peek_many', `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM jobs j WHERE j.id = ANY($1::uuid[])`);

/**
 * The status guard of the statements that name their jobs by id (renew, the completions, checkpoint, effect,
 * the ends of leases, a cancel request): an InitPlan, not the literal. With the literal the planner can prove
 * the reaper's partial index (`jobs_lease_expiry … WHERE status = 'running'`) and scan it instead of looking
 * the jobs up by id; that index keeps an entry for every job that stopped running since the last vacuum, and
 * statistics taken while few jobs ran make the scan look cheap. Measured: 7,000–10,000 entries read for a
 * batch of 16 (5 ms a statement). The reaper's own statements keep the literal: that index is theirs.
 */
const RUNNING = `(SELECT 'running'::text)`;

/**
 * Renew in one statement: the WHERE is decideRenew's 'renew' branch (live
 * lease, no cancel requested, deadline not passed), the new expiry is capped at
 * the deadline as there. When it matches nothing the store reads the row and
 * lets decideRenew name the reason.
 */
export const JOB_RENEW = namedQuery(
  'lh_job_renew',
  `UPDATE jobs j SET lease_expires_at = LEAST(now() + ${interval('$4')}, j.deadline_at),
          progress = CASE WHEN $5::boolean THEN $6::json ELSE j.progress END
    WHERE j.id = $1 AND j.tenant = $2 AND j.status = ${RUNNING} AND j.lease_token = $3 AND j.lease_expires_at > now()
      AND NOT j.cancel_requested AND (j.deadline_at IS NULL OR j.deadline_at > now())
   RETURNING ${ms('j.lease_expires_at')} AS lease_expires_at`,
);

/**
 * The one-statement completions take jobs without children or a key only: the others have jobs to move in the
 * same transaction (dependencies.ts), so guarded-statements.ts sends them to the locked path.
 */
const WITHOUT_FLOW = `NOT j.has_children AND j.concurrency_key IS NULL`;

/**
 * Complete in one statement, mirroring decideCompletion's 'commit' branch
 * (live lease and deadline not passed): the job, its result and its attempt
 * row change together.
 */
export const JOB_COMPLETE_ONE = namedQuery(
  'lh_job_complete_one',
  `WITH done AS (
     UPDATE jobs j SET status = 'succeeded', finished_at = now(), lease_expires_at = NULL, last_outcome = 'succeeded',
            last_error_code = NULL, last_error_message = NULL, last_error_class = NULL
      WHERE j.id = $1 AND j.tenant = $2 AND j.status = ${RUNNING} AND j.lease_token = $3 AND j.lease_expires_at > now()
        AND (j.deadline_at IS NULL OR j.deadline_at > now()) AND ${WITHOUT_FLOW}
     RETURNING j.id, j.epoch
   ), result_row AS (
     INSERT INTO job_results (job_id, content_type, body, checksum, size_bytes)
     SELECT id, $4::text, $5::bytea, $6::text, octet_length($5::bytea) FROM done WHERE $4::text IS NOT NULL
   ), attempt_row AS (
     UPDATE job_attempts a SET ended_at = now(), outcome = 'succeeded', error_code = NULL
       FROM done WHERE a.job_id = done.id AND a.epoch = done.epoch AND a.ended_at IS NULL
   )
   SELECT id::text AS id FROM done`,
);

/**
 * JOB_COMPLETE_ONE for a batch of distinct jobs (the caller sends them in id
 * order, so two batches over the same rows lock them in the same order).
 * Items that match nothing are explained afterwards from JOB_PEEK_MANY.
 */
export const JOB_COMPLETE_MANY = namedQuery(
  'lh_job_complete_many',
  `WITH c AS (
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[])
       AS c(id, tenant, token, content_type, body, checksum)
   ), done AS (
     UPDATE jobs j SET status = 'succeeded', finished_at = now(), lease_expires_at = NULL, last_outcome = 'succeeded',
            last_error_code = NULL, last_error_message = NULL, last_error_class = NULL
       FROM c
      WHERE j.id = c.id AND j.tenant = c.tenant AND j.status = ${RUNNING} AND j.lease_token = c.token
        AND j.lease_expires_at > now() AND (j.deadline_at IS NULL OR j.deadline_at > now()) AND ${WITHOUT_FLOW}
     RETURNING j.id, j.epoch
   ), result_rows AS (
     INSERT INTO job_results (job_id, content_type, body, checksum, size_bytes)
     SELECT c.id, c.content_type, c.body, c.checksum, octet_length(c.body)
       FROM c JOIN done ON done.id = c.id WHERE c.content_type IS NOT NULL
   ), attempt_rows AS (
     UPDATE job_attempts a SET ended_at = now(), outcome = 'succeeded', error_code = NULL
       FROM done WHERE a.job_id = done.id AND a.epoch = done.epoch AND a.ended_at IS NULL
   )
   SELECT id::text AS id FROM done`,
);

/**
 * Applies decisions that end a lease, for many jobs at once: success (with
 * results), retry, dead, cancelled, unknown. $9 says whether the lease must
 * still be live (complete, fail) or already expired (the reaper); with the
 * token in the WHERE clause that is the fence.
 */
export const JOB_END_LEASES = namedQuery(
  'lh_job_end_leases',
  `WITH d AS (
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::text[], $14::text[])
       AS d(id, token, status, outcome, code, message, run_after, attempt_code, error_class)
   ), moved AS (
     UPDATE jobs j SET status = d.status, last_outcome = d.outcome, lease_expires_at = NULL,
            run_after = CASE WHEN d.status = 'queued' THEN coalesce(${ts('d.run_after')}, now()) ELSE j.run_after END,
            finished_at = CASE WHEN d.status = 'queued' THEN j.finished_at ELSE now() END,
            last_error_code = d.code, last_error_message = d.message, last_error_class = d.error_class
       FROM d
      WHERE j.id = d.id AND j.status = ${RUNNING} AND j.lease_token = d.token AND (j.lease_expires_at > now()) = $9
     RETURNING j.id, j.epoch, j.tenant, d.status, d.outcome, d.attempt_code
   ), result_rows AS (
     INSERT INTO job_results (job_id, content_type, body, checksum, size_bytes)
     SELECT r.id, r.content_type, r.body, r.checksum, octet_length(r.body)
       FROM unnest($10::uuid[], $11::text[], $12::bytea[], $13::text[]) AS r(id, content_type, body, checksum)
       JOIN moved ON moved.id = r.id AND moved.status = 'succeeded'
   ), attempt_rows AS (
     UPDATE job_attempts a SET ended_at = now(), outcome = moved.outcome, error_code = moved.attempt_code
       FROM moved WHERE a.job_id = moved.id AND a.epoch = moved.epoch AND a.ended_at IS NULL
   )
   SELECT id::text AS id, tenant, status FROM moved`,
);

/** Checkpoint and effect marks need a live lease before the deadline (decideLiveLeaseWrite's 'apply'). */
const LIVE_LEASE_GUARD = `j.id = $1 AND j.tenant = $2 AND j.status = ${RUNNING} AND j.lease_token = $3
      AND j.lease_expires_at > now() AND (j.deadline_at IS NULL OR j.deadline_at > now())`;

export const JOB_CHECKPOINT = namedQuery(
  'lh_job_checkpoint',
  `UPDATE jobs j SET checkpoint_step = $4, checkpoint_state = $5::json WHERE ${LIVE_LEASE_GUARD} RETURNING j.id`,
);

export const JOB_EFFECT_STARTED = namedQuery(
  'lh_job_effect_started',
  `UPDATE jobs j SET effect_started_at = coalesce(j.effect_started_at, now()) WHERE ${LIVE_LEASE_GUARD} RETURNING j.id`,
);

/** Leases that ran out, oldest first; SKIP LOCKED so concurrent reapers split the work. */
export const JOBS_EXPIRED_LEASES = namedQuery(
  'lh_jobs_expired_leases',
  `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM jobs j
    WHERE j.status = 'running' AND j.lease_expires_at <= now() AND ($1::text IS NULL OR j.tenant = $1)
    ORDER BY j.lease_expires_at LIMIT $2
    FOR UPDATE OF j SKIP LOCKED`,
);

/** Tenant order, so two reapers updating the same counters cannot deadlock. */
export const COUNTER_ADD_EXPIRATIONS = namedQuery(
  'lh_counter_add_expirations',
  `INSERT INTO tenant_counters AS c (tenant, lease_expirations)
   SELECT tenant, count(*) FROM unnest($1::text[]) AS e(tenant) GROUP BY tenant ORDER BY tenant
   ON CONFLICT (tenant) DO UPDATE SET lease_expirations = c.lease_expirations + EXCLUDED.lease_expirations`,
);

/** Queued jobs past their deadline are never leased (the lease WHERE); this ends them with QUEUED_DEADLINE (lease-endings.ts). */
export const JOB_QUEUED_DEADLINE = namedQuery(
  'lh_job_queued_deadline',
  `UPDATE jobs j SET status = $3, finished_at = now(), last_error_code = $4, last_error_message = $5, last_error_class = $6
    WHERE j.id IN (SELECT id FROM jobs WHERE status = 'queued' AND deadline_at <= now() AND ($1::text IS NULL OR tenant = $1)
                   LIMIT $2 FOR UPDATE SKIP LOCKED)
      AND j.status = 'queued' AND j.deadline_at <= now()
   RETURNING ${FLOW_COLUMNS}`,
);

/** dead (requeue) or unknown (reconcile → requeue) → queued or waiting ($4, decideStart) with a fresh budget and deadline. */
export const JOB_REQUEUE = namedQuery(
  'lh_job_requeue',
  `UPDATE jobs j SET status = $4, pending_parents = $5, attempts = 0, max_attempts = $2, run_after = now(),
          deadline_at = now() + ${interval('j.deadline_ms')},
          finished_at = NULL, lease_expires_at = NULL, cancel_requested = false, effect_started_at = NULL
    WHERE j.id = $1 AND j.status = $3
   RETURNING j.id`,
);

/** A queued or waiting job cancelled at once; $2… are CANCELLED_NOW's status and last error (lease-endings.ts). */
export const JOB_CANCEL_NOW = namedQuery(
  'lh_job_cancel_now',
  `UPDATE jobs j SET status = $2, finished_at = now(), lease_expires_at = NULL,
          last_error_code = $3, last_error_message = $4, last_error_class = $5
    WHERE j.id = $1 AND j.status IN ('queued', 'waiting')
   RETURNING j.id`,
);

export const JOB_CANCEL_REQUEST = namedQuery(
  'lh_job_cancel_request',
  `UPDATE jobs j SET cancel_requested = true WHERE j.id = $1 AND j.status = ${RUNNING} RETURNING j.id`,
);

/** An unknown job reconciled as succeeded or dead (reconcileEnding); a requeue uses JOB_REQUEUE. */
export const JOB_RECONCILE = namedQuery(
  'lh_job_reconcile',
  `UPDATE jobs j SET status = $2, finished_at = now(), last_error_code = $3, last_error_message = $4, last_error_class = $5
    WHERE j.id = $1 AND j.status = 'unknown'
   RETURNING j.id`,
);

/** Sent on its own after the write commits (see coalesced-notifier.ts for why not inside it): one notification per payload, in one round trip. */
export const NOTIFY = namedQuery('lh_notify', `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`);

/** One notification per finished job, `tenant` and `id` as JSON (finished-channel.ts); identical payloads in one statement fold into one. */
export const NOTIFY_FINISHED = namedQuery('lh_notify_finished', `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`);
