/**
 * The named statements of the PostgreSQL backend that move jobs. pg prepares
 * each name once per pooled connection. Every statement that changes a leased
 * job repeats, in its WHERE clause, the fencing condition of the decide*
 * function it applies (a live lease row with the token, and the expiry), so a
 * stale snapshot can never apply a transition. Times all come from now(): the
 * start of the statement's transaction on the server.
 *
 * The tables (migration 14): job_ready holds queued jobs (the lease's walk),
 * job_leases running ones (the running attempt), jobs the record, written at
 * enqueue and at the end; job_attempts the ended attempts. Every statement
 * that moves a job moves its counters in a CTE (counter-triggers.ts). Whatever
 * ends or cancels a job locks its jobs row before its lease or ready row
 * (the one-statement completions lock it first too), so two of them cannot
 * deadlock; a lease locks ready rows only.
 *
 * Key, kind, listing and stats statements live in catalog-queries.ts; the
 * lease's own (the due probe, the picks, the restricted path's flow state)
 * in lease-queries.ts, and the dedupe and unique keys' in
 * enqueue-key-queries.ts, both exported from here as well.
 */

import { countJobs, countSums, jobTerms, movedTerms } from './counter-triggers.js';
import { leasesEnded, leasesFreed, readyCounted, readyUncounted } from './group-queries.js';
import {
  interval,
  JOB_COLUMNS,
  JOB_FROM,
  JOB_RELATIONS,
  JOB_STATUS,
  JOB_WITH_RESULT_FROM,
  ms,
  namedQuery,
  NEW_JOB_COLUMNS,
  NOW_MS,
  RESULT_COLUMNS,
  readyInsert,
  readyRowOf,
  ts,
  endingInsert,
  endingDelete,
} from './sql-fragments.js';

export * from './lease-queries.js';
export * from './enqueue-key-queries.js';
export * from './group-queries.js';

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
                          $8::int[], $9::int[], $10::int[], $11::float8[], $12::float8[], $13::text[])
       WITH ORDINALITY AS i(id, tenant, owner, idempotency_key, request_hash, kind, payload,
                            payload_bytes, max_attempts, priority, run_after, deadline_ms, group_key, ord)
   ), ins AS (
     INSERT INTO jobs AS j (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
                            max_attempts, priority, run_after, deadline_ms, deadline_at, created_at, group_key)
     SELECT id, tenant, owner, idempotency_key, request_hash, kind, payload::json, payload_bytes, 'queued',
            max_attempts, priority, coalesce(${ts('run_after')}, now()), deadline_ms::bigint,
            now() + ${interval('deadline_ms')}, now(), group_key
       FROM input ORDER BY ord
     ON CONFLICT (tenant, owner, idempotency_key) DO NOTHING
     RETURNING j.*
   ), ready AS (
     ${readyInsert('ins')}
   ), ${readyCounted('ins')}, counted AS (
     ${countJobs([jobTerms('ins', '')])}
   )
   SELECT ${NEW_JOB_COLUMNS} FROM ins j`,
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
  `WITH ins AS (
     INSERT INTO jobs AS j (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
                           max_attempts, priority, run_after, deadline_ms, deadline_at, created_at, finished_at,
                           last_error_code, last_error_message, last_error_class, pending_parents, concurrency_key,
                           dedupe_key, dedupe_until, unique_key, key_turn, key_active, group_key)
     VALUES ($1::uuid, $2, $3, $4, $5, $6, $7::json, $8, $9::text, $10, $11, coalesce(${ts('$12')}, now()), $13::bigint,
             now() + $13::bigint * interval '1 millisecond', now(), CASE WHEN $9::text = 'dead' THEN now() END, $14, $15, $16, $17, $18,
             $19::text, now() + ${interval('$20')}, $21::text,
             CASE WHEN $9::text IN ('queued', 'waiting') THEN $18 END, CASE WHEN $9::text = 'queued' THEN $18 END, $22::text)
     ON CONFLICT DO NOTHING
     RETURNING j.*
   ), ready AS (
     ${readyInsert('ins')}
   ), ${readyCounted('ins')}, ended AS (
     ${endingInsert('ins')}
   ), counted AS (
     ${countJobs([jobTerms('ins', '')])}
   )
   SELECT ${NEW_JOB_COLUMNS} FROM ins j`,
);

/**
 * The named parents ($3) the enqueuer may see, locked in id order and marked as having children: a parent's end
 * (which locks its row first) then either committed before and is read here, or sees the mark and this child.
 */
export const JOB_PARENTS_MARK = namedQuery(
  'lh_job_parents_mark',
  `WITH p AS (
     SELECT j.id, j.seq, ${JOB_STATUS} AS status, j.has_children FROM ${JOB_FROM}
      WHERE j.tenant = $1 AND ($2::text IS NULL OR j.owner = $2) AND j.id = ANY($3::uuid[]) ORDER BY j.id FOR UPDATE OF j
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

// key_turn is the key while the job is queued, waiting or running; key_active while it is queued or running
// (a running job's row says 'queued'); both NULL once it ends (migration 14: no index of jobs reads status).
const KEY_TURN = (key: string): string => `key_turn = ${key}`;
const KEY_ACTIVE = (key: string): string => `key_active = ${key}`;

/**
 * A key's two probes (KeyFacts): an earlier job holding its turn (jobs_key_turn), another queued or running
 * (jobs_key_active). Each is the first row in seq order rather than an EXISTS: the order is the index's, so the
 * planner walks the index and stops at one entry, where for an EXISTS over a hot key it may prefer a sequential
 * scan that reads the table until it meets a match.
 */
export const JOB_KEY_FACTS = namedQuery(
  'lh_job_key_facts',
  `SELECT (SELECT seq FROM jobs WHERE tenant = $1 AND kind = $2 AND ${KEY_TURN('$3')} AND seq < $4::bigint
            ORDER BY seq LIMIT 1) IS NOT NULL AS earlier_holder,
          (SELECT seq FROM jobs WHERE tenant = $1 AND kind = $2 AND ${KEY_ACTIVE('$3')} AND seq <> $4::bigint
            ORDER BY seq LIMIT 1) IS NOT NULL AS other_active`,
);

const FLOW_COLUMNS = `j.id::text AS id, j.seq::float8 AS seq, j.tenant, j.kind, j.status, j.pending_parents, j.concurrency_key, j.has_children`;

/** The earliest job of a key that holds its turn: the next to run once the turn passes. */
export const JOB_KEY_HEAD = namedQuery(
  'lh_job_key_head',
  `SELECT ${FLOW_COLUMNS} FROM jobs j WHERE j.tenant = $1 AND j.kind = $2 AND j.${KEY_TURN('$3')} ORDER BY j.seq LIMIT 1`,
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
  `WITH moved AS (
     UPDATE jobs j SET status = $2, finished_at = now(), last_error_code = $3, last_error_message = $4, last_error_class = $5,
            key_turn = NULL, key_active = NULL
       FROM job_dependencies d WHERE d.parent_id = $1 AND j.id = d.child_id AND j.status = 'waiting'
     RETURNING j.*
   ), ended AS (
     ${endingInsert('moved')}
   ), counted AS (
     ${countJobs(movedTerms('moved', "'waiting'"))}
   )
   SELECT ${FLOW_COLUMNS} FROM moved j`,
);

/** decideRelease's 'release': no parent pending and the key's turn. Available now, or at its own later run-after. */
export const JOB_RELEASE = namedQuery(
  'lh_job_release',
  `WITH moved AS (
     UPDATE jobs j SET status = 'queued', run_after = GREATEST(j.run_after, now()), key_active = j.key_turn
      WHERE j.id = $1 AND j.status = 'waiting' AND j.pending_parents = 0
     RETURNING j.*
   ), ready AS (
     ${readyInsert('moved')}
   ), ${readyCounted('moved')}, counted AS (
     ${countJobs(movedTerms('moved', "'waiting'"))}
   )
   SELECT id FROM moved`,
);

/** Locks the job's row for the rest of the transaction (locked-rows.ts then reads it, with its lease, in a statement of its own). */
export const JOB_LOCK = namedQuery(
  'lh_job_lock',
  `SELECT j.id FROM jobs j WHERE j.id = $1 AND j.tenant = $2 AND ($3::text IS NULL OR j.owner = $3) FOR UPDATE`,
);

/** Locks in id order, so two batches over the same jobs cannot deadlock. */
export const JOB_LOCK_MANY = namedQuery('lh_job_lock_many', `SELECT j.id FROM jobs j WHERE j.id = ANY($1::uuid[]) ORDER BY j.id FOR UPDATE`);

/** A read without a lock, to say why a guarded statement matched nothing. */
export const JOB_PEEK = namedQuery('lh_job_peek', `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM ${JOB_FROM} WHERE j.id = $1 AND j.tenant = $2`);

export const JOB_PEEK_MANY = namedQuery('lh_job_peek_many', `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM ${JOB_FROM} WHERE j.id = ANY($1::uuid[])`);

/** A live lease `l` before its deadline: the fence of the statements that need one (decide*'s 'go ahead'). */
const LIVE = `l.expires_at > now() AND (l.deadline_at IS NULL OR l.deadline_at > now())`;

/** The stored bytes of a job's progress and checkpoint state, as the counters count them. */
const jsonBytes = (expression: string): string => `coalesce(octet_length((${expression})::text), 0)`;

/** A change of `source`'s stored bytes (its column `delta`) for status `status`, as a countJobs source. */
function bytesTerms(source: string, status: string): string {
  return `SELECT r.tenant, r.kind, ${status}::text AS status, 0::bigint AS jobs, 0::bigint AS started, 0::bigint AS wait_ms,
            0::bigint AS run_jobs, 0::bigint AS run_ms, 0::bigint AS completed, 0::bigint AS completion_ms, r.delta::bigint AS stored_bytes
       FROM ${source} r`;
}

/**
 * Renew in one statement on the lease row: the WHERE is decideRenew's 'renew' branch (live lease, no cancel
 * requested, deadline not passed), the new expiry is capped at the deadline as there. Progress reported during
 * an attempt stays on its lease row until the end writes it into jobs; its bytes move the running counter.
 * When it matches nothing the store reads the row and lets decideRenew name the reason.
 */
export const JOB_RENEW = namedQuery(
  'lh_job_renew',
  `WITH o AS (
     SELECT l.job_seq, j.tenant, j.kind, ${jsonBytes('coalesce(l.progress, j.progress)')} AS old_bytes
       FROM jobs j JOIN job_leases l ON l.job_seq = j.seq
      WHERE j.id = $1 AND j.tenant = $2 AND l.token = $3 AND ${LIVE} AND NOT j.cancel_requested
   ), renewed AS (
     UPDATE job_leases l SET expires_at = LEAST(now() + ${interval('$4')}, l.deadline_at),
            progress = CASE WHEN $5::boolean THEN $6::json ELSE l.progress END
       FROM o WHERE l.job_seq = o.job_seq AND l.token = $3 AND ${LIVE}
     RETURNING l.expires_at, o.tenant, o.kind, CASE WHEN $5::boolean THEN ${jsonBytes('$6::json')} - o.old_bytes ELSE 0 END AS delta
   ), counted AS (
     ${countJobs([bytesTerms('renewed', "'running'")])}
   )
   SELECT ${ms('expires_at')} AS lease_expires_at FROM renewed`,
);

/** The end of an attempt: the lease row `e` written into the job's row (its epoch, attempt, token, worker, start, effect mark, progress). */
const LEASE_INTO_JOB = `epoch = e.epoch, attempts = e.attempt, lease_token = e.token, lease_owner = e.worker_id,
            started_at = coalesce(j.started_at, e.started_at), effect_started_at = e.effect_started_at,
            progress = coalesce(e.progress, j.progress)`;

/** The ended attempts of `ended` (deleted lease rows with `outcome` and `attempt_code` columns). */
function attemptRows(ended: string, outcome: string, code: string): string {
  return `INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at, ended_at, outcome, error_code)
     SELECT job_seq, epoch, attempt, worker_id, started_at, now(), ${outcome}, ${code} FROM ${ended}`;
}

/** What an end adds to tenant_sums: each ended attempt's run time, and the results inserted (`results` with job_id and size_bytes). */
function endSums(ended: string, moved: string, results: string): string {
  return countSums(`SELECT e.tenant, 1 AS ended_attempts, ${ms('now()')}::bigint - ${ms('e.started_at')}::bigint AS attempt_run_ms, 0 AS result_bytes
        FROM ${ended} e
      UNION ALL
      SELECT m.tenant, 0, 0, x.size_bytes FROM ${results} x JOIN ${moved} m ON m.id = x.job_id`);
}

/**
 * Complete in one statement, mirroring decideCompletion's 'commit' branch (live lease and deadline not passed):
 * the lease row deleted by its token, the job's row written once, its result and its ended attempt inserted,
 * the counters moved. The jobs rows are locked first, in id order, like every path that ends a lease. Jobs
 * with children or a key take the locked path (dependencies.ts), so they are left out here; items that match
 * nothing are explained afterwards from JOB_PEEK or JOB_PEEK_MANY.
 */
function completeStatement(name: string, input: string): ReturnType<typeof namedQuery> {
  return namedQuery(
    name,
    `WITH c AS (
       ${input}
     ), target AS MATERIALIZED (
       SELECT j.seq, c.token FROM c JOIN jobs j ON j.id = c.id AND j.tenant = c.tenant
        WHERE NOT j.has_children AND j.concurrency_key IS NULL ORDER BY j.id FOR UPDATE OF j
     ), ended AS (
       DELETE FROM job_leases l USING target t WHERE l.job_seq = t.seq AND l.token = t.token AND ${LIVE}
       RETURNING l.*
     ), ${leasesFreed('ended')}, done AS (
       UPDATE jobs j SET status = 'succeeded', finished_at = now(), last_outcome = 'succeeded',
              last_error_code = NULL, last_error_message = NULL, last_error_class = NULL, ${LEASE_INTO_JOB}
         FROM ended e WHERE j.seq = e.job_seq
       RETURNING j.*
     ), result_rows AS (
       INSERT INTO job_results (job_id, content_type, body, checksum, size_bytes)
       SELECT c.id, c.content_type, c.body, c.checksum, octet_length(c.body) FROM c JOIN done ON done.id = c.id WHERE c.content_type IS NOT NULL
       RETURNING job_id, size_bytes
     ), ending_rows AS (
       ${endingInsert('done')}
     ), attempt_rows AS (
       ${attemptRows('ended', "'succeeded'", 'NULL')}
     ), counted AS (
       ${countJobs(movedTerms('done', "'running'"))}
     ), summed AS (
       ${endSums('ended', 'done', 'result_rows')}
     )
     SELECT id::text AS id FROM done`,
  );
}

export const JOB_COMPLETE_ONE = completeStatement(
  'lh_job_complete_one',
  `SELECT $1::uuid AS id, $2::text AS tenant, $3::text AS token, $4::text AS content_type, $5::bytea AS body, $6::text AS checksum`,
);

/** JOB_COMPLETE_ONE for a batch of distinct jobs. */
export const JOB_COMPLETE_MANY = completeStatement(
  'lh_job_complete_many',
  `SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[]) AS c(id, tenant, token, content_type, body, checksum)`,
);

/**
 * Applies decisions that end a lease, for many jobs at once: success (with results), retry, dead, cancelled,
 * unknown. The callers hold the jobs rows locked. $9 says whether the lease must still be live (complete,
 * fail) or already expired (the reaper); with the token in the WHERE clause that is the fence. A retry goes
 * back to job_ready.
 */
export const JOB_END_LEASES = namedQuery(
  'lh_job_end_leases',
  `WITH d AS (
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::text[], $14::text[])
       AS d(id, token, status, outcome, code, message, run_after, attempt_code, error_class)
   ), ended AS (
     DELETE FROM job_leases l USING d, jobs j
      WHERE j.id = d.id AND l.job_seq = j.seq AND l.token = d.token AND (l.expires_at > now()) = $9
     RETURNING l.*, d.status AS new_status, d.outcome, d.code, d.message, d.run_after AS retry_at, d.attempt_code, d.error_class
   ), moved AS (
     UPDATE jobs j SET status = e.new_status, last_outcome = e.outcome,
            run_after = CASE WHEN e.new_status = 'queued' THEN coalesce(${ts('e.retry_at')}, now()) ELSE j.run_after END,
            finished_at = CASE WHEN e.new_status = 'queued' THEN j.finished_at ELSE now() END,
            last_error_code = e.code, last_error_message = e.message, last_error_class = e.error_class, ${LEASE_INTO_JOB},
            key_turn = CASE WHEN e.new_status = 'queued' THEN j.key_turn END, key_active = CASE WHEN e.new_status = 'queued' THEN j.key_active END
       FROM ended e WHERE j.seq = e.job_seq
     RETURNING j.*
   ), ready AS (
     ${readyInsert('moved')}
   ), ${leasesEnded('ended', 'moved')}, ending_rows AS (
     ${endingInsert('moved')}
   ), result_rows AS (
     INSERT INTO job_results (job_id, content_type, body, checksum, size_bytes)
     SELECT r.id, r.content_type, r.body, r.checksum, octet_length(r.body)
       FROM unnest($10::uuid[], $11::text[], $12::bytea[], $13::text[]) AS r(id, content_type, body, checksum)
       JOIN moved ON moved.id = r.id AND moved.status = 'succeeded'
     RETURNING job_id, size_bytes
   ), attempt_rows AS (
     ${attemptRows('ended', 'outcome', 'attempt_code')}
   ), counted AS (
     ${countJobs(movedTerms('moved', "'running'"))}
   ), summed AS (
     ${endSums('ended', 'moved', 'result_rows')}
   )
   SELECT id::text AS id, tenant, status FROM moved`,
);

/** Checkpoint and effect marks need a live lease before the deadline (decideLiveLeaseWrite's 'apply'). */
const LIVE_LEASE_GUARD = `j.id = $1 AND j.tenant = $2 AND l.job_seq = j.seq AND l.token = $3 AND ${LIVE}`;

/** The checkpoint is the job's (later attempts resume from it), so it goes into jobs; its bytes move the running counter. */
export const JOB_CHECKPOINT = namedQuery(
  'lh_job_checkpoint',
  `WITH o AS (
     SELECT j.seq, ${jsonBytes('j.checkpoint_state')} AS old_bytes FROM jobs j WHERE j.id = $1 AND j.tenant = $2
   ), saved AS (
     UPDATE jobs j SET checkpoint_step = $4, checkpoint_state = $5::json FROM job_leases l, o
      WHERE ${LIVE_LEASE_GUARD} AND o.seq = j.seq
     RETURNING j.id, j.tenant, j.kind, ${jsonBytes('j.checkpoint_state')} - o.old_bytes AS delta
   ), counted AS (
     ${countJobs([bytesTerms('saved', "'running'")])}
   )
   SELECT id FROM saved`,
);

/** The effect mark belongs to the attempt: on its lease row, written into jobs at the end. */
export const JOB_EFFECT_STARTED = namedQuery(
  'lh_job_effect_started',
  `UPDATE job_leases l SET effect_started_at = coalesce(l.effect_started_at, now()) FROM jobs j WHERE ${LIVE_LEASE_GUARD} RETURNING j.id`,
);

/**
 * Leases that ran out, oldest first, from job_leases_expiry; their jobs rows and the leases themselves locked
 * (a lease ended or renewed by a transaction that committed meanwhile is passed over, not read from the
 * snapshot), SKIP LOCKED so concurrent reapers split the work.
 */
export const JOBS_EXPIRED_LEASES = namedQuery(
  'lh_jobs_expired_leases',
  `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM job_leases l JOIN jobs j ON j.seq = l.job_seq
    WHERE l.expires_at <= now() AND ($1::text IS NULL OR l.tenant = $1)
    ORDER BY l.expires_at LIMIT $2
    FOR UPDATE OF j, l SKIP LOCKED`,
);

/** Tenant order, so two reapers updating the same counters cannot deadlock. */
export const COUNTER_ADD_EXPIRATIONS = namedQuery(
  'lh_counter_add_expirations',
  `INSERT INTO tenant_counters AS c (tenant, lease_expirations)
   SELECT tenant, count(*) FROM unnest($1::text[]) AS e(tenant) GROUP BY tenant ORDER BY tenant
   ON CONFLICT (tenant) DO UPDATE SET lease_expirations = c.lease_expirations + EXCLUDED.lease_expirations`,
);

/**
 * Queued jobs past their deadline are never leased (the lease WHERE); this ends them with QUEUED_DEADLINE
 * (lease-endings.ts). job_ready_deadline finds them; their jobs rows are locked first (SKIP LOCKED), then their
 * ready rows deleted: one that a lease took meanwhile is gone, and its job is left to run.
 */
export const JOB_QUEUED_DEADLINE = namedQuery(
  'lh_job_queued_deadline',
  `WITH candidates AS (
     SELECT r.ctid AS ready_ctid, r.seq FROM job_ready r WHERE r.deadline_at <= now() AND ($1::text IS NULL OR r.tenant = $1) LIMIT $2
   ), locked AS MATERIALIZED (
     SELECT c.ready_ctid FROM candidates c JOIN jobs j ON j.seq = c.seq WHERE j.status = 'queued' ORDER BY j.seq FOR UPDATE OF j SKIP LOCKED
   ), gone AS (
     DELETE FROM job_ready r WHERE r.ctid = ANY (ARRAY(SELECT ready_ctid FROM locked)) AND r.deadline_at <= now()
     RETURNING r.seq, r.tenant, r.kind, r.group_key
   ), ${readyUncounted('gone')}, moved AS (
     UPDATE jobs j SET status = $3, finished_at = now(), last_error_code = $4, last_error_message = $5, last_error_class = $6,
            key_turn = NULL, key_active = NULL
       FROM gone WHERE j.seq = gone.seq
     RETURNING j.*
   ), ended AS (
     ${endingInsert('moved')}
   ), counted AS (
     ${countJobs(movedTerms('moved', "'queued'"))}
   )
   SELECT ${FLOW_COLUMNS} FROM moved j`,
);

/** dead (requeue) or unknown (reconcile → requeue) → queued or waiting ($4, decideStart) with a fresh budget and deadline. */
export const JOB_REQUEUE = namedQuery(
  'lh_job_requeue',
  `WITH was AS (
     SELECT seq, status, finished_at, created_at FROM jobs WHERE id = $1 AND status = $3
   ), unended AS (
     ${endingDelete('was')}
   ), moved AS (
     UPDATE jobs j SET status = $4, pending_parents = $5, attempts = 0, max_attempts = $2, run_after = now(),
            deadline_at = now() + ${interval('j.deadline_ms')},
            finished_at = NULL, cancel_requested = false, effect_started_at = NULL,
            key_turn = j.concurrency_key, key_active = CASE WHEN $4 = 'queued' THEN j.concurrency_key END
      WHERE j.id = $1 AND j.status = $3
     RETURNING j.*
   ), ready AS (
     ${readyInsert('moved')}
   ), ${readyCounted('moved')}, counted AS (
     ${countJobs(movedTerms('moved', '$3::text'))}
   )
   SELECT id FROM moved`,
);

/**
 * A queued or waiting job cancelled at once; $2… are CANCELLED_NOW's status and last error (lease-endings.ts).
 * A queued job's ready row goes with it (the caller locked it, locked-rows.ts).
 */
export const JOB_CANCEL_NOW = namedQuery(
  'lh_job_cancel_now',
  `WITH gone AS (
     DELETE FROM job_ready r USING jobs j WHERE j.id = $1 AND j.status = 'queued' AND ${readyRowOf('r', 'j')}
     RETURNING r.seq, r.tenant, r.kind, r.group_key
   ), ${readyUncounted('gone')}, moved AS (
     UPDATE jobs j SET status = $2, finished_at = now(), last_error_code = $3, last_error_message = $4, last_error_class = $5,
            key_turn = NULL, key_active = NULL
      WHERE j.id = $1 AND (j.status = 'waiting' OR (j.status = 'queued' AND j.seq IN (SELECT seq FROM gone)))
     RETURNING j.*
   ), ended AS (
     ${endingInsert('moved')}
   ), counted AS (
     ${countJobs(movedTerms('moved', `CASE WHEN r.seq IN (SELECT seq FROM gone) THEN 'queued' ELSE 'waiting' END`))}
   )
   SELECT id FROM moved`,
);

export const JOB_CANCEL_REQUEST = namedQuery(
  'lh_job_cancel_request',
  `UPDATE jobs j SET cancel_requested = true WHERE j.id = $1 AND EXISTS (SELECT 1 FROM job_leases l WHERE l.job_seq = j.seq) RETURNING j.id`,
);

/** An unknown job reconciled as succeeded or dead (reconcileEnding); a requeue uses JOB_REQUEUE. */
export const JOB_RECONCILE = namedQuery(
  'lh_job_reconcile',
  `WITH was AS (
     SELECT seq, status, finished_at, created_at FROM jobs WHERE id = $1 AND status = 'unknown'
   ), unended AS (
     ${endingDelete('was')}
   ), moved AS (
     UPDATE jobs j SET status = $2, finished_at = now(), last_error_code = $3, last_error_message = $4, last_error_class = $5
      WHERE j.id = $1 AND j.status = 'unknown'
     RETURNING j.*
   ), ended AS (
     ${endingInsert('moved')}
   ), counted AS (
     ${countJobs(movedTerms('moved', "'unknown'"))}
   )
   SELECT id FROM moved`,
);

/** Sent on its own after the write commits (see coalesced-notifier.ts for why not inside it): one notification per payload, in one round trip. */
export const NOTIFY = namedQuery('lh_notify', `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`);

/** One notification per finished job, `tenant` and `id` as JSON (finished-channel.ts); identical payloads in one statement fold into one. */
export const NOTIFY_FINISHED = namedQuery('lh_notify_finished', `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`);
