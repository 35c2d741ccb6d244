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
 * in lease-queries.ts, those of a running attempt and its end (renew,
 * checkpoint, complete, the ends of leases) in lease-end-queries.ts, and the
 * dedupe and unique keys' in enqueue-key-queries.ts, all exported from here
 * as well.
 */

import { countJobs, countJobTerms, movedTerms, NEW_JOB_TERMS } from './counter-triggers.js';
import { readyCounted, readyUncounted } from './group-queries.js';
import {
  interval,
  JOB_COLUMNS,
  jobInsertCtes,
  JOB_FROM,
  JOB_RELATIONS,
  JOB_STATUS,
  JOB_WITH_RESULT_FROM,
  jobWithId,
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
export * from './lease-end-queries.js';
export * from './enqueue-key-queries.js';
export * from './group-queries.js';

export const NOW = namedQuery('lh_now', `SELECT ${NOW_MS}`);

/**
 * Inserts a batch in one statement (so it is one transaction). Rows whose
 * (tenant, owner, idempotency_key) exists, or repeats an earlier row of the
 * same batch, are skipped and looked up afterwards. With `grouped`, $13 holds
 * each job's group ('' for none) and the statement counts the queued jobs of
 * each group (readyCounted); without, every job is ungrouped and the
 * statement leaves the group rows out of its plan, whose nodes each
 * execution would otherwise start (20–40 µs of an enqueue's 500–550 µs of server CPU, bench/RESULTS.md).
 */
function insertManyStatement(name: string, grouped: boolean): ReturnType<typeof namedQuery> {
  return namedQuery(
    name,
    `WITH ${jobInsertCtes(grouped)}, ready AS (
     ${readyInsert('ins')}
   ), ${grouped ? `${readyCounted('ins')}, ` : ''}counted AS (
     ${countJobTerms(NEW_JOB_TERMS, [['ins', '']])}
   )
   SELECT ${NEW_JOB_COLUMNS} FROM ins j`,
  );
}

export const JOB_INSERT_MANY = insertManyStatement('lh_job_insert_many', true);
export const JOB_INSERT_MANY_UNGROUPED = insertManyStatement('lh_job_insert_many_ungrouped', false);

/**
 * The existing rows for idempotency keys that did not insert (a replay or a conflict). Sent unnamed
 * (bindUnplanned), so it is planned for the queue as it is: a plan kept from an empty queue, where the key's
 * unique index and jobs_by_tenant cost the same, may walk every job of the tenant to find the key.
 */
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
    WHERE ${jobWithId('$1')} AND j.tenant = $2 AND ($3::text IS NULL OR j.owner = $3)`,
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
     ${countJobTerms(NEW_JOB_TERMS, [['ins', '']])}
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
  `SELECT j.id FROM jobs j WHERE ${jobWithId('$1')} AND j.tenant = $2 AND ($3::text IS NULL OR j.owner = $3) FOR UPDATE`,
);

/** Locks in id order, so two batches over the same jobs cannot deadlock. */
export const JOB_LOCK_MANY = namedQuery('lh_job_lock_many', `SELECT j.id FROM jobs j WHERE j.id = ANY($1::uuid[]) ORDER BY j.id FOR UPDATE`);

/** A read without a lock, to say why a guarded statement matched nothing. */
export const JOB_PEEK = namedQuery('lh_job_peek', `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM ${JOB_FROM} WHERE ${jobWithId('$1')} AND j.tenant = $2`);

export const JOB_PEEK_MANY = namedQuery('lh_job_peek_many', `SELECT ${JOB_COLUMNS}, ${NOW_MS} FROM ${JOB_FROM} WHERE j.id = ANY($1::uuid[])`);

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
