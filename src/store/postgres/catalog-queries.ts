/**
 * The named statements of the PostgreSQL backend that read jobs or keep the
 * catalog: API keys, kinds, listing, attempt history and stats. The
 * statements that move jobs are in queries.ts.
 */

import { JOB_WITH_RESULT_FROM, LIST_COLUMNS, ms, namedQuery } from './sql-fragments.js';

const API_KEY_COLUMNS = `id, tenant, user_name, role, key_hash, ${ms('created_at')} AS created_at, ${ms('revoked_at')} AS revoked_at`;

export const API_KEY_INSERT = namedQuery(
  'lh_api_key_insert',
  `INSERT INTO api_keys (id, tenant, user_name, role, key_hash, created_at) VALUES ($1, $2, $3, $4, $5, now())
   RETURNING ${API_KEY_COLUMNS}`,
);

export const API_KEY_BY_HASH = namedQuery('lh_api_key_by_hash', `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE key_hash = $1`);

export const API_KEY_REVOKE = namedQuery(
  'lh_api_key_revoke',
  `UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id`,
);

const KIND_COLUMNS = `tenant, kind, payload_schema, max_payload_bytes, max_attempts, lease_ms, backoff_base_ms, backoff_max_ms,
  deadline_ms::float8 AS deadline_ms, max_result_bytes, max_checkpoint_bytes, retention_succeeded_ms::float8 AS retention_succeeded_ms,
  retention_cancelled_ms::float8 AS retention_cancelled_ms, retention_dead_ms::float8 AS retention_dead_ms, ${ms('updated_at')} AS updated_at`;

export const KIND_UPSERT = namedQuery(
  'lh_kind_upsert',
  `INSERT INTO kinds AS k (tenant, kind, payload_schema, max_payload_bytes, max_attempts, lease_ms, backoff_base_ms,
                           backoff_max_ms, deadline_ms, max_result_bytes, max_checkpoint_bytes, retention_succeeded_ms,
                           retention_cancelled_ms, retention_dead_ms, updated_at)
   VALUES ($1, $2, $3::json, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, now())
   ON CONFLICT (tenant, kind) DO UPDATE SET payload_schema = EXCLUDED.payload_schema,
     max_payload_bytes = EXCLUDED.max_payload_bytes, max_attempts = EXCLUDED.max_attempts, lease_ms = EXCLUDED.lease_ms,
     backoff_base_ms = EXCLUDED.backoff_base_ms, backoff_max_ms = EXCLUDED.backoff_max_ms,
     deadline_ms = EXCLUDED.deadline_ms, max_result_bytes = EXCLUDED.max_result_bytes,
     max_checkpoint_bytes = EXCLUDED.max_checkpoint_bytes, retention_succeeded_ms = EXCLUDED.retention_succeeded_ms,
     retention_cancelled_ms = EXCLUDED.retention_cancelled_ms, retention_dead_ms = EXCLUDED.retention_dead_ms,
     updated_at = EXCLUDED.updated_at
   RETURNING ${KIND_COLUMNS}`,
);

/** The first store to open a database creates its secret; every later one, on any host, reads the same row. */
export const SECRET_INSERT = namedQuery('lh_secret_insert', `INSERT INTO store_secrets (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`);

export const SECRET_GET = namedQuery('lh_secret_get', `SELECT secret FROM store_secrets WHERE name = $1`);

export const KIND_GET = namedQuery('lh_kind_get', `SELECT ${KIND_COLUMNS} FROM kinds WHERE tenant = $1 AND kind = $2`);

export const KIND_LIST = namedQuery('lh_kind_list', `SELECT ${KIND_COLUMNS} FROM kinds WHERE tenant = $1 ORDER BY kind`);

/** Newest first; the cursor is the seq of the last job on the previous page. Run unplanned (see bindUnplanned). */
export const JOB_LIST = namedQuery(
  'lh_job_list',
  `SELECT ${LIST_COLUMNS} FROM ${JOB_WITH_RESULT_FROM}
    WHERE j.tenant = $1 AND ($2::text IS NULL OR j.owner = $2) AND ($3::text IS NULL OR j.status = $3)
      AND ($4::text IS NULL OR j.kind = $4) AND ($5::bigint IS NULL OR j.seq < $5)
    ORDER BY j.seq DESC LIMIT $6`,
);

export const ATTEMPT_LIST = namedQuery(
  'lh_attempt_list',
  `SELECT attempt, epoch, worker_id, ${ms('started_at')} AS started_at, ${ms('ended_at')} AS ended_at, outcome, error_code
     FROM job_attempts WHERE job_id = $1 ORDER BY epoch`,
);

/**
 * One pass over the tenant's jobs. The means use the same millisecond values
 * the API shows; storage counts payloads, checkpoint state, progress and
 * results of jobs still stored.
 */
export const STATS = namedQuery(
  'lh_stats',
  `SELECT
     (SELECT coalesce(json_object_agg(status, n), '{}'::json)
        FROM (SELECT status, count(*) AS n FROM jobs WHERE tenant = $1 GROUP BY status) AS c) AS counts,
     avg(${ms('j.started_at')} - ${ms('j.created_at')}) FILTER (WHERE j.started_at IS NOT NULL)::float8 AS mean_wait,
     avg(${ms('j.finished_at')} - ${ms('j.started_at')})
       FILTER (WHERE j.status = 'succeeded' AND j.started_at IS NOT NULL AND j.finished_at IS NOT NULL)::float8 AS mean_run,
     avg(${ms('j.finished_at')} - ${ms('j.created_at')})
       FILTER (WHERE j.status = 'succeeded' AND j.finished_at IS NOT NULL)::float8 AS mean_completion,
     (SELECT avg(${ms('a.ended_at')} - ${ms('a.started_at')})::float8
        FROM job_attempts a JOIN jobs aj ON aj.id = a.job_id WHERE aj.tenant = $1 AND a.ended_at IS NOT NULL) AS mean_attempt_run,
     (${ms('now()')} - ${ms("min(j.run_after) FILTER (WHERE j.status = 'queued' AND j.run_after <= now())")}) AS oldest_age,
     coalesce(sum(j.payload_bytes + coalesce(octet_length(j.checkpoint_state::text), 0) + coalesce(octet_length(j.progress::text), 0)), 0)::float8
       + (SELECT coalesce(sum(r.size_bytes), 0) FROM job_results r JOIN jobs rj ON rj.id = r.job_id WHERE rj.tenant = $1)::float8
       AS storage_bytes,
     (SELECT coalesce(max(lease_expirations), 0) FROM tenant_counters WHERE tenant = $1)::float8 AS lease_expirations
   FROM jobs j WHERE j.tenant = $1`,
);
