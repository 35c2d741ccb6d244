/**
 * The named statements of the PostgreSQL backend that read jobs or keep the
 * catalog: API keys, kinds, listing, attempt history and stats. The
 * statements that move jobs are in queries.ts.
 */

import { firstReady, JOB_STATUS, JOB_WITH_RESULT_FROM, LIST_COLUMNS, ms, namedQuery, QUEUED_KINDS } from './sql-fragments.js';

const API_KEY_COLUMNS = `id, tenant, user_name, role, key_hash, ${ms('created_at')} AS created_at, ${ms('revoked_at')} AS revoked_at`;

export const API_KEY_INSERT = namedQuery(
  'lh_api_key_insert',
  `INSERT INTO api_keys (id, tenant, user_name, role, key_hash, created_at) VALUES ($1, $2, $3, $4, $5, now())
   RETURNING ${API_KEY_COLUMNS}`,
);

export const API_KEY_BY_HASH = namedQuery('lh_api_key_by_hash', `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE key_hash = $1`);

export const API_KEY_LIST = namedQuery('lh_api_key_list', `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE tenant = $1 ORDER BY created_at, id`);

export const API_KEY_REVOKE = namedQuery('lh_api_key_revoke', `UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id`);

const KIND_COLUMNS = `tenant, kind, payload_schema, max_payload_bytes, max_attempts, lease_ms, backoff_base_ms, backoff_max_ms,
  deadline_ms::float8 AS deadline_ms, max_result_bytes, max_checkpoint_bytes, retention_succeeded_ms::float8 AS retention_succeeded_ms,
  retention_cancelled_ms::float8 AS retention_cancelled_ms, retention_dead_ms::float8 AS retention_dead_ms,
  paused, max_concurrent, rate_limit, rate_per_ms::float8 AS rate_per_ms, group_rules, ${ms('updated_at')} AS updated_at`;

export const KIND_UPSERT = namedQuery(
  'lh_kind_upsert',
  `INSERT INTO kinds AS k (tenant, kind, payload_schema, max_payload_bytes, max_attempts, lease_ms, backoff_base_ms,
                           backoff_max_ms, deadline_ms, max_result_bytes, max_checkpoint_bytes, retention_succeeded_ms,
                           retention_cancelled_ms, retention_dead_ms, max_concurrent, rate_limit, rate_per_ms, group_rules, updated_at)
   VALUES ($1, $2, $3::json, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18::json, now())
   ON CONFLICT (tenant, kind) DO UPDATE SET payload_schema = EXCLUDED.payload_schema,
     max_payload_bytes = EXCLUDED.max_payload_bytes, max_attempts = EXCLUDED.max_attempts, lease_ms = EXCLUDED.lease_ms,
     backoff_base_ms = EXCLUDED.backoff_base_ms, backoff_max_ms = EXCLUDED.backoff_max_ms,
     deadline_ms = EXCLUDED.deadline_ms, max_result_bytes = EXCLUDED.max_result_bytes,
     max_checkpoint_bytes = EXCLUDED.max_checkpoint_bytes, retention_succeeded_ms = EXCLUDED.retention_succeeded_ms,
     retention_cancelled_ms = EXCLUDED.retention_cancelled_ms, retention_dead_ms = EXCLUDED.retention_dead_ms,
     max_concurrent = EXCLUDED.max_concurrent, rate_limit = EXCLUDED.rate_limit, rate_per_ms = EXCLUDED.rate_per_ms,
     group_rules = EXCLUDED.group_rules, updated_at = EXCLUDED.updated_at
   RETURNING ${KIND_COLUMNS}`,
);

/** Pause or resume; the registration (and its updatedAt) stays as it was. */
export const KIND_SET_PAUSED = namedQuery('lh_kind_set_paused', `UPDATE kinds SET paused = $3 WHERE tenant = $1 AND kind = $2 RETURNING ${KIND_COLUMNS}`);

/** The first store to open a database creates its secret; every later one, on any host, reads the same row. */
export const SECRET_INSERT = namedQuery('lh_secret_insert', `INSERT INTO store_secrets (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`);

export const SECRET_GET = namedQuery('lh_secret_get', `SELECT secret FROM store_secrets WHERE name = $1`);

export const KIND_GET = namedQuery('lh_kind_get', `SELECT ${KIND_COLUMNS} FROM kinds WHERE tenant = $1 AND kind = $2`);

export const KIND_LIST = namedQuery('lh_kind_list', `SELECT ${KIND_COLUMNS} FROM kinds WHERE tenant = $1 ORDER BY kind`);

/**
 * Newest first; the cursor is the seq of the last job on the previous page. Run unplanned (see bindUnplanned).
 * The status is the one the API shows: a job with a live lease runs (JOB_STATUS). The running and the queued
 * jobs of a tenant are those of its rows in job_leases and job_ready: planned for the call's own status, each
 * of those conditions is either the listing's source or folds away.
 */
/**
 * GET /jobs?status=queued: the tenant's ready rows newest first from the cursor (job_ready_listing, migration 15),
 * each joined to its job: a page reads its own rows, however many jobs are queued. A ready row's job is queued.
 */
export const JOB_LIST_QUEUED = namedQuery(
  'lh_job_list_queued',
  `SELECT ${LIST_COLUMNS} FROM job_ready q JOIN jobs j ON j.seq = q.seq LEFT JOIN job_leases l ON l.job_seq = j.seq
    LEFT JOIN job_results r ON r.job_id = j.id
    WHERE q.tenant = $1 AND ($2::text IS NULL OR j.owner = $2) AND ($3::text IS NULL OR q.kind = $3) AND ($4::bigint IS NULL OR q.seq < $4)
    ORDER BY q.seq DESC LIMIT $5`,
);

export const JOB_LIST = namedQuery(
  'lh_job_list',
  `SELECT ${LIST_COLUMNS} FROM ${JOB_WITH_RESULT_FROM}
    WHERE j.tenant = $1 AND ($2::text IS NULL OR j.owner = $2) AND ($3::text IS NULL OR ${JOB_STATUS} = $3)
      AND ($3::text IS DISTINCT FROM 'running' OR j.seq IN (SELECT job_seq FROM job_leases WHERE tenant = $1))
      AND ($4::text IS NULL OR j.kind = $4) AND ($5::bigint IS NULL OR j.seq < $5)
    ORDER BY j.seq DESC LIMIT $6`,
);

/** The ended attempts (job_attempts) and the running one, which is the job's live lease. */
export const ATTEMPT_LIST = namedQuery(
  'lh_attempt_list',
  `SELECT a.attempt, a.epoch, a.worker_id, ${ms('a.started_at')} AS started_at, ${ms('a.ended_at')} AS ended_at, a.outcome, a.error_code
     FROM jobs j JOIN job_attempts a ON a.job_seq = j.seq WHERE j.id = $1
   UNION ALL
   SELECT l.attempt, l.epoch, l.worker_id, ${ms('l.started_at')}, NULL::float8, NULL::text, NULL::text
     FROM jobs j JOIN job_leases l ON l.job_seq = j.seq WHERE j.id = $1
   ORDER BY epoch`,
);

/**
 * The counter rows the statements keep (counter-triggers.ts, summed over
 * their shards), the first due entry of each (kind, priority) of the tenant's
 * ready jobs (firstReady over QUEUED_KINDS), and the lease-expiry counter:
 * the same cost whatever the tables hold. The means use the same
 * millisecond values the API shows; storage counts payloads, checkpoint
 * state, progress and results of jobs still stored.
 */
export const STATS = namedQuery(
  'lh_stats',
  `${QUEUED_KINDS}, c AS (
     SELECT status, sum(jobs) AS jobs, sum(started) AS started, sum(wait_ms) AS wait_ms, sum(run_jobs) AS run_jobs,
            sum(run_ms) AS run_ms, sum(completed) AS completed, sum(completion_ms) AS completion_ms, sum(stored_bytes) AS stored_bytes
       FROM job_counters WHERE tenant = $1 GROUP BY status
   ), t AS (
     SELECT sum(ended_attempts) AS ended_attempts, sum(attempt_run_ms) AS attempt_run_ms, sum(result_bytes) AS result_bytes
       FROM tenant_sums WHERE tenant = $1
   )
   SELECT
     (SELECT coalesce(json_object_agg(status, jobs), '{}'::json) FROM c) AS counts,
     (SELECT sum(wait_ms)::float8 / nullif(sum(started), 0) FROM c) AS mean_wait,
     (SELECT sum(run_ms)::float8 / nullif(sum(run_jobs), 0) FROM c) AS mean_run,
     (SELECT sum(completion_ms)::float8 / nullif(sum(completed), 0) FROM c) AS mean_completion,
     (SELECT attempt_run_ms::float8 / nullif(ended_attempts, 0) FROM t) AS mean_attempt_run,
     (${ms('now()')} - (SELECT ${ms(`min(${firstReady('k.kind', 'r.run_after <= now()')})`)} FROM k WHERE k.kind IS NOT NULL)) AS oldest_age,
     (coalesce((SELECT sum(stored_bytes) FROM c), 0) + coalesce((SELECT result_bytes FROM t), 0))::float8 AS storage_bytes,
     (SELECT coalesce(max(lease_expirations), 0) FROM tenant_counters WHERE tenant = $1)::float8 AS lease_expirations`,
);

/**
 * The store's own tables in its schema, with their indexes and TOAST: the file sizes PostgreSQL keeps, no scan.
 * Not pg_database_size, which counts every schema of the database (an application's own tables in library mode,
 * other queues beside this one).
 */
export const DATABASE_SIZE = namedQuery(
  'lh_database_size',
  `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::float8 AS bytes FROM pg_class c
    WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind = 'r'`,
);
