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

/** Every column of a job, as the row mappers expect them, from alias `j`. */
export const JOB_COLUMNS = `
  j.id::text AS id, j.seq::float8 AS seq, j.tenant, j.owner, j.kind, j.payload, j.idempotency_key, j.request_hash,
  j.status, j.attempts, j.max_attempts, j.priority,
  ${ms('j.run_after')} AS run_after, ${ms('j.deadline_at')} AS deadline_at,
  j.lease_owner, ${ms('j.lease_expires_at')} AS lease_expires_at, j.epoch, j.lease_token, j.last_outcome,
  ${ms('j.created_at')} AS created_at, ${ms('j.started_at')} AS started_at, ${ms('j.finished_at')} AS finished_at,
  j.last_error_code, j.last_error_message, j.last_error_class, j.progress, j.cancel_requested,
  ${ms('j.effect_started_at')} AS effect_started_at, j.checkpoint_step, j.checkpoint_state,
  j.concurrency_key, j.pending_parents, j.has_children`;

/**
 * A job's parents (those still stored, in enqueue order) and its first children, from alias `j`: read by the
 * single-job reads only (JOB_GET, JOB_BY_KEYS), never by a lease or a listing.
 */
export const JOB_RELATIONS = `
  ARRAY(SELECT d.parent_id::text FROM job_dependencies d JOIN jobs p ON p.id = d.parent_id WHERE d.child_id = j.id ORDER BY p.seq) AS depends_on,
  ARRAY(SELECT d.child_id::text FROM job_dependencies d JOIN jobs c ON c.id = d.child_id WHERE d.parent_id = j.id
         ORDER BY c.seq LIMIT ${MAX_LISTED_CHILDREN}) AS children`;

/** What a listing reads, from `jobs j` and `job_results r`: no payload, checkpoint state or result body. */
export const LIST_COLUMNS = `
  j.id::text AS id, j.seq::float8 AS seq, j.tenant, j.owner, j.kind, j.idempotency_key, j.request_hash,
  j.status, j.attempts, j.max_attempts, j.priority,
  ${ms('j.run_after')} AS run_after, ${ms('j.deadline_at')} AS deadline_at,
  j.lease_owner, ${ms('j.lease_expires_at')} AS lease_expires_at, j.epoch, j.lease_token, j.last_outcome,
  ${ms('j.created_at')} AS created_at, ${ms('j.started_at')} AS started_at, ${ms('j.finished_at')} AS finished_at,
  j.last_error_code, j.last_error_message, j.last_error_class, j.progress, j.cancel_requested,
  ${ms('j.effect_started_at')} AS effect_started_at, j.checkpoint_step, j.concurrency_key,
  r.content_type AS result_content_type, r.size_bytes AS result_bytes`;

/** The result columns, from alias `r` (a LEFT JOIN, so all may be NULL). */
export const RESULT_COLUMNS = 'r.content_type AS result_content_type, r.body AS result_body, r.checksum AS result_checksum';

/** A job with its result, from `jobs j`. */
export const JOB_WITH_RESULT_FROM = `jobs j LEFT JOIN job_results r ON r.job_id = j.id`;

/** Reads the transaction's clock; every time a transaction writes comes from the same now(). */
export const NOW_MS = `${ms('now()')} AS now_ms`;

/** A kind with a pause or a limit: the predicate of the kinds_flow index (migration 7), repeated so that queries use it. */
export const RESTRICTED_KIND = `(paused OR max_concurrent IS NOT NULL OR rate_limit IS NOT NULL)`;

/**
 * The distinct kinds of tenant $1's queued jobs as rows of `k(kind)`, the last one NULL: a skip scan, one index
 * probe per kind, whatever each kind has queued. Callers read `FROM k WHERE k.kind IS NOT NULL`.
 */
export const QUEUED_KINDS = `WITH RECURSIVE k(kind) AS (
     SELECT (SELECT MIN(kind) FROM jobs WHERE tenant = $1 AND status = 'queued')
     UNION ALL
     SELECT (SELECT MIN(kind) FROM jobs WHERE tenant = $1 AND status = 'queued' AND kind > k.kind) FROM k WHERE k.kind IS NOT NULL)`;
