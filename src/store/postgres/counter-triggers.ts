/**
 * The counter rows of the PostgreSQL backend: per (tenant, kind, status,
 * shard) the jobs, the terms of GET /stats' means and the stored bytes, per
 * (tenant, shard) the ended attempts' run time and the result bytes.
 * Migration 5 created them with statement triggers; migration 14 dropped the
 * triggers (DROP_COUNTER_TRIGGERS_SQL), and since then every statement that
 * moves a job moves its counters in a CTE of its own (countJobs, countSums):
 * once per statement, whatever the batch, with no trigger to fire. The
 * conformance recount test (store-counters) holds them to a recount of the
 * stored jobs. sqlite/counter-triggers.ts is SQLite's.
 */

/** Milliseconds since the epoch of a timestamptz, as the API shows them (sql-fragments.ts ms()). */
const msOf = (expression: string): string => `floor(extract(epoch FROM ${expression}) * 1000)::bigint`;

/**
 * What one job row adds to its (tenant, kind, status) counter: the job, the
 * terms of the means GET /stats shows, and its stored bytes. Statement-level
 * triggers add the new rows' terms and subtract the old rows' once per
 * statement, so a batch of a thousand jobs writes a few counter rows, and the
 * counters equal a recount after every statement (a conformance test
 * recounts after random histories). Each connection writes its own shard of
 * a counter (its backend pid modulo SHARDS), so concurrent transactions do
 * not queue on one row until commit; the stats read sums the shards.
 */
const JOB_TERMS = [
  ['jobs', () => '1'],
  ['started', (r) => `(${r}.started_at IS NOT NULL)::int`],
  ['wait_ms', (r) => `coalesce(${msOf(`${r}.started_at`)} - ${msOf(`${r}.created_at`)}, 0)`],
  ['run_jobs', (r) => `(${r}.status = 'succeeded' AND ${r}.started_at IS NOT NULL AND ${r}.finished_at IS NOT NULL)::int`],
  ['run_ms', (r) => `CASE WHEN ${r}.status = 'succeeded' THEN coalesce(${msOf(`${r}.finished_at`)} - ${msOf(`${r}.started_at`)}, 0) ELSE 0 END`],
  ['completed', (r) => `(${r}.status = 'succeeded' AND ${r}.finished_at IS NOT NULL)::int`],
  ['completion_ms', (r) => `CASE WHEN ${r}.status = 'succeeded' THEN coalesce(${msOf(`${r}.finished_at`)} - ${msOf(`${r}.created_at`)}, 0) ELSE 0 END`],
  ['stored_bytes', (r) => `${r}.payload_bytes + coalesce(octet_length(${r}.checkpoint_state::text), 0) + coalesce(octet_length(${r}.progress::text), 0)`],
] as const satisfies readonly (readonly [column: string, term: (row: string) => string])[];

export const COUNTER_SHARDS = 16;

/** A column of job_counters after (tenant, kind, status, shard). */
export type TermColumn = (typeof JOB_TERMS)[number][0];
const JOB_COLUMNS: readonly TermColumn[] = JOB_TERMS.map(([column]) => column);

/**
 * The terms a job that has not succeeded counts, whatever its status: the run and completion terms count
 * succeeded jobs only. A statement that moves jobs between such statuses (a lease) moves these alone.
 */
export const UNFINISHED_TERMS: readonly TermColumn[] = ['jobs', 'started', 'wait_ms', 'stored_bytes'];
/** The terms of a job just inserted: it has neither started nor succeeded. */
export const NEW_JOB_TERMS: readonly TermColumn[] = ['jobs', 'stored_bytes'];
/** A change of stored bytes alone (progress, a checkpoint, a merged payload). */
const BYTES_TERMS: readonly TermColumn[] = ['stored_bytes'];

/**
 * The upsert of the summed terms `columns` of `sources` (each a SELECT of tenant, kind, status and those
 * terms). PostgreSQL builds every expression of a statement again at each execution of its cached plan, so a
 * statement names only the terms it can change (a lease four of the eight, an enqueue two); the other columns
 * keep their values.
 */
function addJobTerms(sources: readonly string[], columns: readonly TermColumn[] = JOB_COLUMNS): string {
  return `INSERT INTO job_counters AS c (tenant, kind, status, shard, ${columns.join(', ')})
    SELECT tenant, kind, status, pg_backend_pid() % ${COUNTER_SHARDS}, ${columns.map((column) => `sum(${column})`).join(', ')}
      FROM (${sources.join(' UNION ALL ')}) AS d
     GROUP BY tenant, kind, status
    HAVING ${columns.map((column) => `sum(${column}) <> 0`).join(' OR ')}
     ORDER BY tenant, kind, status
    ON CONFLICT (tenant, kind, status, shard) DO UPDATE SET ${columns.map((column) => `${column} = c.${column} + EXCLUDED.${column}`).join(', ')};`;
}

const termsOf = (table: string, sign: '' | '-'): string =>
  `SELECT r.tenant, r.kind, r.status, ${JOB_TERMS.map(([column, term]) => `${sign}(${term('r')})::bigint AS ${column}`).join(', ')} FROM ${table} r`;

function triggerFunction(name: string, body: string): string {
  return `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  ${body}
  RETURN NULL;
END $fn$;`;
}

/** Per tenant: ended attempts' run time and result bytes, sharded as the job counters. */
function addTenantSums(select: string): string {
  return `INSERT INTO tenant_sums AS s (tenant, shard, ended_attempts, attempt_run_ms, result_bytes)
    SELECT tenant, pg_backend_pid() % ${COUNTER_SHARDS}, sum(ended_attempts), sum(attempt_run_ms), sum(result_bytes)
      FROM (${select}) AS d GROUP BY tenant ORDER BY tenant
    ON CONFLICT (tenant, shard) DO UPDATE SET ended_attempts = s.ended_attempts + EXCLUDED.ended_attempts,
      attempt_run_ms = s.attempt_run_ms + EXCLUDED.attempt_run_ms, result_bytes = s.result_bytes + EXCLUDED.result_bytes;`;
}

const attemptRunMs = (r: string): string => `${msOf(`${r}.ended_at`)} - ${msOf(`${r}.started_at`)}`;

export const JOB_COUNTERS_SQL = `
CREATE TABLE job_counters (
  tenant text     NOT NULL,
  kind   text     NOT NULL,
  status text     NOT NULL,
  shard  smallint NOT NULL,
  ${JOB_COLUMNS.map((column) => `${column} bigint NOT NULL DEFAULT 0`).join(',\n  ')},
  PRIMARY KEY (tenant, kind, status, shard)
);
CREATE TABLE tenant_sums (
  tenant         text     NOT NULL,
  shard          smallint NOT NULL,
  ended_attempts bigint   NOT NULL DEFAULT 0,
  attempt_run_ms bigint   NOT NULL DEFAULT 0,
  result_bytes   bigint   NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, shard)
);

${triggerFunction('lh_job_counters_insert', addJobTerms([termsOf('new_rows', '')]))}
${triggerFunction('lh_job_counters_update', addJobTerms([termsOf('old_rows', '-'), termsOf('new_rows', '')]))}
${triggerFunction('lh_job_counters_delete', addJobTerms([termsOf('old_rows', '-')]))}
CREATE TRIGGER job_counters_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION lh_job_counters_insert();
CREATE TRIGGER job_counters_update AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION lh_job_counters_update();
CREATE TRIGGER job_counters_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION lh_job_counters_delete();

-- An attempt's run time counts once it has ended; deleting a job deletes its attempts and result first.
${triggerFunction(
  'lh_attempt_sums_update',
  addTenantSums(`SELECT j.tenant, 1 AS ended_attempts, ${attemptRunMs('n')} AS attempt_run_ms, 0 AS result_bytes
        FROM new_rows n JOIN old_rows o USING (job_id, epoch) JOIN jobs j ON j.id = n.job_id
       WHERE o.ended_at IS NULL AND n.ended_at IS NOT NULL`),
)}
${triggerFunction(
  'lh_attempt_sums_delete',
  addTenantSums(`SELECT j.tenant, -1 AS ended_attempts, -(${attemptRunMs('o')}) AS attempt_run_ms, 0 AS result_bytes
        FROM old_rows o JOIN jobs j ON j.id = o.job_id WHERE o.ended_at IS NOT NULL`),
)}
${triggerFunction(
  'lh_result_sums_insert',
  addTenantSums(`SELECT j.tenant, 0 AS ended_attempts, 0 AS attempt_run_ms, n.size_bytes AS result_bytes
        FROM new_rows n JOIN jobs j ON j.id = n.job_id`),
)}
${triggerFunction(
  'lh_result_sums_delete',
  addTenantSums(`SELECT j.tenant, 0 AS ended_attempts, 0 AS attempt_run_ms, -o.size_bytes AS result_bytes
        FROM old_rows o JOIN jobs j ON j.id = o.job_id`),
)}
CREATE TRIGGER attempt_sums_update AFTER UPDATE ON job_attempts REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION lh_attempt_sums_update();
CREATE TRIGGER attempt_sums_delete AFTER DELETE ON job_attempts REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION lh_attempt_sums_delete();
CREATE TRIGGER result_sums_insert AFTER INSERT ON job_results REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION lh_result_sums_insert();
CREATE TRIGGER result_sums_delete AFTER DELETE ON job_results REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION lh_result_sums_delete();

-- Existing rows, counted once (in shard 0).
INSERT INTO job_counters (tenant, kind, status, shard, ${JOB_COLUMNS.join(', ')})
  SELECT tenant, kind, status, 0, ${JOB_COLUMNS.map((column) => `sum(${column})`).join(', ')}
    FROM (${termsOf('jobs', '')}) AS d GROUP BY tenant, kind, status;
INSERT INTO tenant_sums (tenant, shard, ended_attempts, attempt_run_ms, result_bytes)
  SELECT j.tenant, 0,
         (SELECT count(*) FROM job_attempts a JOIN jobs aj ON aj.id = a.job_id WHERE aj.tenant = j.tenant AND a.ended_at IS NOT NULL),
         (SELECT coalesce(sum(${attemptRunMs('a')}), 0) FROM job_attempts a JOIN jobs aj ON aj.id = a.job_id
           WHERE aj.tenant = j.tenant AND a.ended_at IS NOT NULL),
         (SELECT coalesce(sum(r.size_bytes), 0) FROM job_results r JOIN jobs rj ON rj.id = r.job_id WHERE rj.tenant = j.tenant)
    FROM (SELECT DISTINCT tenant FROM jobs) AS j;

-- The oldest available job of a tenant, whatever its priority: the head of this index.
CREATE INDEX jobs_queued_by_run_after ON jobs (tenant, run_after) WHERE status = 'queued';
`;

/** Migration 14: the statements move the counters themselves (countJobs, countSums below). */
export const DROP_COUNTER_TRIGGERS_SQL = `
DROP TRIGGER job_counters_insert ON jobs;
DROP TRIGGER job_counters_update ON jobs;
DROP TRIGGER job_counters_delete ON jobs;
DROP TRIGGER attempt_sums_update ON job_attempts;
DROP TRIGGER attempt_sums_delete ON job_attempts;
DROP TRIGGER result_sums_insert ON job_results;
DROP TRIGGER result_sums_delete ON job_results;
DROP FUNCTION lh_job_counters_insert(), lh_job_counters_update(), lh_job_counters_delete(), lh_attempt_sums_update(),
  lh_attempt_sums_delete(), lh_result_sums_insert(), lh_result_sums_delete();`;

/**
 * The terms of the job rows of `source` (a CTE or table with the columns of jobs: tenant, kind, status,
 * started_at, created_at, finished_at, payload_bytes, checkpoint_state, progress), negated when `sign` is '-',
 * counted under `status` (an SQL expression over alias r; the row's own status when absent).
 */
export function jobTerms(source: string, sign: '' | '-', status?: string, columns: readonly TermColumn[] = JOB_COLUMNS): string {
  return termsSelect(source, sign, status ?? 'r.status', columns, columns);
}

/** The SELECT of `columns`' terms; a column not in `live` is known to be 0 there and is written as a constant. */
function termsSelect(source: string, sign: '' | '-', statusOf: string, columns: readonly TermColumn[], live: readonly TermColumn[]): string {
  const terms = JOB_TERMS.filter(([column]) => columns.includes(column)).map(([column, term]) => {
    if (!live.includes(column)) return `0::bigint AS ${column}`;
    const expression = term('r').replaceAll('r.status', `(${statusOf})`);
    return `${sign}(${expression})::bigint AS ${column}`;
  });
  return `SELECT r.tenant, r.kind, (${statusOf})::text AS status, ${terms.join(', ')} FROM ${source} r`;
}

/**
 * A job that changed status without changing what its other terms read (a lease apart, which may set
 * started_at): its terms move from the status `from` (an SQL expression over alias r) to its new one. Not for
 * a job leaving 'succeeded': `from`'s run and completion terms are taken to be 0.
 */
export function movedTerms(source: string, from: string): readonly string[] {
  return [jobTerms(source, ''), termsSelect(source, '-', from, JOB_COLUMNS, UNFINISHED_TERMS)];
}

/**
 * countJobs of the job rows of `sources` (each a jobTerms source, sign and status), all with the terms `columns`:
 * the columns are named once for the selects and the upsert alike.
 */
export function countJobTerms(columns: readonly TermColumn[], sources: readonly (readonly [source: string, sign: '' | '-', status?: string])[]): string {
  return countJobs(
    sources.map(([source, sign, status]) => jobTerms(source, sign, status, columns)),
    columns,
  );
}

/**
 * The CTE body that counts a change of stored bytes alone: `source`'s column `delta`, under `status` (an SQL
 * expression over alias r; the row's own status when absent).
 */
export function countStoredBytes(source: string, status = 'r.status'): string {
  return countJobs([`SELECT r.tenant, r.kind, ${status}::text AS status, r.delta::bigint AS stored_bytes FROM ${source} r`], BYTES_TERMS);
}

/**
 * The statement's CTE body that adds the summed terms of `sources` (jobTerms selects of the same `columns`) to
 * job_counters. `columns` must hold every term the statement can change (the store-counters conformance test
 * recounts after random histories).
 */
export function countJobs(sources: readonly string[], columns: readonly TermColumn[] = JOB_COLUMNS): string {
  return addJobTerms(sources, columns).replace(/;$/, '');
}

/**
 * The CTE body that adds `select`'s rows (tenant, ended_attempts, attempt_run_ms, result_bytes) to
 * tenant_sums, one row per tenant.
 */
export function countSums(select: string): string {
  return addTenantSums(select).replace(/;$/, '');
}
