/**
 * The pieces every PostgreSQL query is built from: the conversion between
 * `timestamptz` and the store's epoch milliseconds, the column lists rows are
 * read with, and the `{ name, text }` shape that makes pg prepare a statement
 * once per connection and reuse its plan.
 */

import type { QueryConfig } from 'pg';
import { MAX_LISTED_CHILDREN } from '../../core/dependencies.js';

export interface NamedQuery {
  readonly name: string;
  readonly text: string;
}

export function namedQuery(name: string, text: string): NamedQuery {
  return Object.freeze({ name, text });
}

export function bind(query: NamedQuery, values: readonly unknown[]): QueryConfig {
  return { name: query.name, text: query.text, values: values.map(pgValue) };
}

/**
 * Without a name pg plans the statement for these very values each time. For
 * queries whose best plan depends on which optional filters are set (a
 * partial index for dead jobs, say), where a cached generic plan would not.
 */
export function bindUnplanned(query: NamedQuery, values: readonly unknown[]): QueryConfig {
  return { text: query.text, values: values.map(pgValue) };
}

/**
 * PostgreSQL text cannot hold U+0000, and a parameter containing it fails the
 * whole statement. Tokens, keys and messages come from clients, so such a
 * character becomes U+FFFD instead: a token or key with it then simply matches
 * nothing, and a message keeps the rest of its text.
 */
export function pgText(value: string): string {
  return value.includes('\u0000') ? value.replaceAll('\u0000', '\ufffd') : value;
}

function pgValue(value: unknown): unknown {
  if (typeof value === 'string') return pgText(value);
  if (Array.isArray(value)) return value.map((v: unknown) => (typeof v === 'string' ? pgText(v) : v));
  return value;
}

/**
 * Milliseconds since the epoch as float8 (exact for every date we store), so
 * pg returns a number rather than a bigint string. `extract` returns numeric
 * in PostgreSQL 14+, so the floor is exact; it truncates microseconds the same
 * way every time, which keeps comparisons made in JavaScript and in SQL equal.
 */
export function ms(expression: string): string {
  return `floor(extract(epoch FROM ${expression}) * 1000)::float8`;
}

/** A float8 millisecond parameter as timestamptz (NULL stays NULL). */
export function ts(parameter: string): string {
  return `to_timestamp(${parameter}::float8 / 1000)`;
}

/** Milliseconds as an interval. */
export function interval(parameter: string): string {
  return `(${parameter}::float8 * interval '1 millisecond')`;
}

/**
 * A job as the API sees it, from `jobs j` and its live lease `l` (JOB_FROM): while a row of job_leases exists the
 * job runs, and the lease holds the running attempt's epoch, number, token, worker, expiry, effect mark and the
 * progress reported during it; the jobs row keeps those of the previous lease until the end writes it
 * (migration 14). `leased` false: a row just inserted, which has no lease.
 */
function jobView(leased: boolean): Record<string, string> {
  if (!leased) {
    return {
      status: 'j.status',
      attempts: 'j.attempts',
      epoch: 'j.epoch',
      lease_owner: 'j.lease_owner',
      lease_expires_at: 'NULL::timestamptz',
      lease_token: 'j.lease_token',
      last_outcome: 'j.last_outcome',
      started_at: 'j.started_at',
      effect_started_at: 'j.effect_started_at',
      progress: 'j.progress',
    };
  }
  const running = 'l.job_seq IS NOT NULL';
  return {
    status: `CASE WHEN ${running} THEN 'running' ELSE j.status END`,
    attempts: 'coalesce(l.attempt, j.attempts)',
    epoch: 'coalesce(l.epoch, j.epoch)',
    lease_owner: 'coalesce(l.worker_id, j.lease_owner)',
    lease_expires_at: 'l.expires_at',
    lease_token: 'coalesce(l.token, j.lease_token)',
    last_outcome: `CASE WHEN ${running} THEN NULL ELSE j.last_outcome END`,
    started_at: 'coalesce(j.started_at, l.started_at)',
    effect_started_at: `CASE WHEN ${running} THEN l.effect_started_at ELSE j.effect_started_at END`,
    progress: 'coalesce(l.progress, j.progress)',
  };
}

/**
 * The job `id` names, as a condition on `alias`.seq: the id's own index finds the seq, and the row is read by
 * its key. A statement that says `j.id = $1 AND j.tenant = $2` instead is planned (once per connection, on a
 * queue that may still be empty) with two indexes that cost the same there, jobs_id_key and jobs_by_tenant;
 * when it keeps the second, every call reads all the tenant's jobs to find one. Whichever index the plan takes
 * for `seq = … AND tenant = $2`, it reads one row.
 */
export const jobWithId = (id: string, alias = 'j'): string => `${alias}.seq = (SELECT seq FROM jobs WHERE id = ${id})`;

/** A job and its live lease, if any (aliases j and l). */
export const JOB_FROM = 'jobs j LEFT JOIN job_leases l ON l.job_seq = j.seq';

/** The job's status as the API sees it, from JOB_FROM. */
export const JOB_STATUS = jobView(true)['status'] ?? '';

function columns(leased: boolean, listing: boolean): string {
  const v = jobView(leased);
  return `
  j.id::text AS id, j.seq::float8 AS seq, j.tenant, j.owner, j.kind,${listing ? '' : ' j.payload,'} j.idempotency_key, j.request_hash,
  ${v['status']} AS status, ${v['attempts']} AS attempts, j.max_attempts, j.priority,
  ${ms('j.run_after')} AS run_after, ${ms('j.deadline_at')} AS deadline_at,
  ${v['lease_owner']} AS lease_owner, ${ms(v['lease_expires_at'] ?? '')} AS lease_expires_at, ${v['epoch']} AS epoch,
  ${v['lease_token']} AS lease_token, ${v['last_outcome']} AS last_outcome,
  ${ms('j.created_at')} AS created_at, ${ms(v['started_at'] ?? '')} AS started_at, ${ms('j.finished_at')} AS finished_at,
  j.last_error_code, j.last_error_message, j.last_error_class, ${v['progress']} AS progress, j.cancel_requested,
  ${ms(v['effect_started_at'] ?? '')} AS effect_started_at, j.checkpoint_step,${listing ? '' : ' j.checkpoint_state,'}
  j.concurrency_key, j.group_key${listing ? '' : ', j.pending_parents, j.has_children'}`;
}

/** Every column of a job, as the row mappers expect them, from JOB_FROM (aliases j and l). */
export const JOB_COLUMNS = columns(true, false);

/** JOB_COLUMNS of a row just inserted into `jobs j` (no lease to join): an INSERT's RETURNING. */
export const NEW_JOB_COLUMNS = columns(false, false);

/**
 * A job's parents (those still stored, in enqueue order) and its first children, from alias `j`: read by the
 * single-job reads only (JOB_GET, JOB_BY_KEYS), never by a lease or a listing.
 */
export const JOB_RELATIONS = `
  ARRAY(SELECT d.parent_id::text FROM job_dependencies d JOIN jobs p ON p.id = d.parent_id WHERE d.child_id = j.id ORDER BY p.seq) AS depends_on,
  ARRAY(SELECT d.child_id::text FROM job_dependencies d JOIN jobs c ON c.id = d.child_id WHERE d.parent_id = j.id
         ORDER BY c.seq LIMIT ${MAX_LISTED_CHILDREN}) AS children`;

/** What a listing reads, from JOB_FROM and `job_results r`: no payload, checkpoint state or result body. */
export const LIST_COLUMNS = `${columns(true, true)},
  r.content_type AS result_content_type, r.size_bytes AS result_bytes`;

/** The result columns, from alias `r` (a LEFT JOIN, so all may be NULL). */
export const RESULT_COLUMNS = 'r.content_type AS result_content_type, r.body AS result_body, r.checksum AS result_checksum';

/** A job with its result, from `jobs j`. */
export const JOB_WITH_RESULT_FROM = `${JOB_FROM} LEFT JOIN job_results r ON r.job_id = j.id`;

/** Reads the transaction's clock; every time a transaction writes comes from the same now(). */
export const NOW_MS = `${ms('now()')} AS now_ms`;

/** A kind with a pause or a limit: the predicate of the kinds_flow index (migration 7), repeated so that queries use it. */
export const RESTRICTED_KIND = `(paused OR max_concurrent IS NOT NULL OR rate_limit IS NOT NULL)`;

/**
 * The distinct kinds of tenant $1's queued jobs as rows of `k(kind)`, the last one NULL: a skip scan of
 * job_ready_order, one index probe per kind, whatever each kind has queued. Callers read `FROM k WHERE k.kind IS NOT NULL`.
 */
export const QUEUED_KINDS = `WITH RECURSIVE k(kind) AS (
     SELECT (SELECT MIN(kind) FROM job_ready WHERE tenant = $1)
     UNION ALL
     SELECT (SELECT MIN(kind) FROM job_ready WHERE tenant = $1 AND kind > k.kind) FROM k WHERE k.kind IS NOT NULL)`;

/**
 * The first run_after among tenant $1's ready jobs of kind `kind` (an SQL expression) that meet `condition`
 * (over alias r), as a scalar subquery. job_ready_order is in lease order (group, then priority), so this visits
 * each distinct group of the kind (one for a kind without groups) and each distinct priority within it once (a
 * skip scan) and takes the first entry of each that qualifies.
 */
export function firstReady(kind: string, condition: string): string {
  return `(WITH RECURSIVE gk(group_key) AS (
       SELECT (SELECT min(group_key) FROM job_ready WHERE tenant = $1 AND kind = ${kind})
       UNION ALL
       SELECT (SELECT min(group_key) FROM job_ready WHERE tenant = $1 AND kind = ${kind} AND group_key > gk.group_key) FROM gk WHERE gk.group_key IS NOT NULL),
     ${firstOfEachPriority(kind, condition, 'gk.group_key', ' FROM gk WHERE gk.group_key IS NOT NULL')})`;
}

/**
 * firstReady for a kind whose ready jobs have no group (group_key ''): only the skip scan over its priorities. The
 * plain lease statements may use it, since their guard sends every kind with groups to the group plan.
 */
export function firstUngroupedReady(kind: string, condition: string): string {
  return `(WITH RECURSIVE ${firstOfEachPriority(kind, condition, "''::text", '')})`;
}

/**
 * The priority level of firstReady: from each group `group` (an SQL expression, over the rows of `from`), the
 * skip scan of its distinct priorities (CTE p), then the earliest qualifying entry among their first entries.
 */
function firstOfEachPriority(kind: string, condition: string, group: string, from: string): string {
  return `p(group_key, priority) AS (
       SELECT ${group}, (SELECT max(priority) FROM job_ready WHERE tenant = $1 AND kind = ${kind} AND group_key = ${group})${from}
       UNION ALL
       SELECT p.group_key, (SELECT max(priority) FROM job_ready WHERE tenant = $1 AND kind = ${kind} AND group_key = p.group_key AND priority < p.priority)
         FROM p WHERE p.priority IS NOT NULL)
     SELECT min((SELECT r.run_after FROM job_ready r WHERE r.tenant = $1 AND r.kind = ${kind} AND r.group_key = p.group_key
                  AND r.priority = p.priority AND ${condition} ORDER BY r.run_after LIMIT 1)) FROM p WHERE p.priority IS NOT NULL`;
}

/**
 * A job's row in job_ready, found by job_ready_order's key: the jobs row `j` holds the same tenant, kind, group,
 * priority, run_after and seq as long as the job is queued.
 */
export function readyRowOf(r: string, j: string): string {
  return `${r}.tenant = ${j}.tenant AND ${r}.kind = ${j}.kind AND ${r}.group_key = ${j}.group_key AND ${r}.priority = ${j}.priority
    AND ${r}.run_after = ${j}.run_after AND ${r}.seq = ${j}.seq`;
}

/** The ready row of each job of `source` (a CTE of new job rows whose status is 'queued'). */
export function readyInsert(source: string): string {
  return `INSERT INTO job_ready (tenant, kind, group_key, priority, run_after, seq, deadline_at)
     SELECT tenant, kind, group_key, priority, run_after, seq, deadline_at FROM ${source} WHERE status = 'queued'`;
}

/**
 * The CTEs `input` (the unnest of $1-$12, and $13 each job's group with `grouped`) and `ins` (the INSERT into
 * jobs of those rows, queued, skipping an idempotency key that exists, RETURNING j.*): what every plain
 * enqueue statement starts with.
 */
export function jobInsertCtes(grouped: boolean): string {
  return `input AS (
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                          $8::int[], $9::int[], $10::int[], $11::float8[], $12::float8[]${grouped ? ', $13::text[]' : ''})
       WITH ORDINALITY AS i(id, tenant, owner, idempotency_key, request_hash, kind, payload,
                            payload_bytes, max_attempts, priority, run_after, deadline_ms, ${grouped ? 'group_key, ' : ''}ord)
   ), ins AS (
     INSERT INTO jobs AS j (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status,
                            max_attempts, priority, run_after, deadline_ms, deadline_at, created_at, group_key)
     SELECT id, tenant, owner, idempotency_key, request_hash, kind, payload::json, payload_bytes, 'queued',
            max_attempts, priority, coalesce(${ts('run_after')}, now()), deadline_ms::bigint,
            now() + ${interval('deadline_ms')}, now(), ${grouped ? 'group_key' : "''"}
       FROM input ORDER BY ord
     ON CONFLICT (tenant, owner, idempotency_key) DO NOTHING
     RETURNING j.*
   )`;
}

/** The job_endings rows of the jobs of `source` (new job rows) that have just ended (migration 14). */
export function endingInsert(source: string): string {
  return `INSERT INTO job_endings (status, finished_at, seq)
     SELECT status, ${ENDED_AT('')}, seq FROM ${source} WHERE status IN ('succeeded', 'dead', 'cancelled', 'unknown')`;
}

/** When a job ended, as job_endings has it (an ended job always has finished_at; created_at stands in otherwise). */
const ENDED_AT = (j: string): string => `coalesce(${j}finished_at, ${j}created_at)`;

/** The job_endings row of the ended job `j` (a row of jobs as the statement's snapshot sees it), deleted by its key. */
export function endingDelete(j: string): string {
  return `DELETE FROM job_endings e USING ${j} WHERE e.status = ${j}.status AND e.finished_at = ${ENDED_AT(`${j}.`)} AND e.seq = ${j}.seq`;
}
