/**
 * The counter rows of migration 5 for the SQLite backend: per (tenant, kind,
 * status) the jobs and the terms of GET /stats' means, per tenant the ended
 * attempts' run time, kept by triggers from migration 5 to 13 (migrations 5
 * and 9 create them, so their text stays here). postgres/counter-triggers.ts
 * is PostgreSQL's. Migration 12 dropped the insert trigger and migration 14
 * the others: every write moves the counter rows in code, once per commit
 * (counter-moves.ts, whose terms are JOB_TERMS' expressions in code).
 */

/**
 * What one job row adds to its (tenant, kind, status) counter row: the job
 * itself, and the terms of the means GET /stats shows (stats-reader.ts). Each
 * trigger subtracts the old row's terms and adds the new row's, so the
 * counters equal a recount of the table after any statement (a conformance
 * test recounts after random histories).
 */
const JOB_TERMS: readonly (readonly [column: string, term: (row: string) => string])[] = [
  ['jobs', () => '1'],
  ['started', (r) => `(${r}.started_at IS NOT NULL)`],
  ['wait_ms', (r) => `COALESCE(${r}.started_at - ${r}.created_at, 0)`],
  ['run_jobs', (r) => `(${r}.status = 'succeeded' AND ${r}.started_at IS NOT NULL AND ${r}.finished_at IS NOT NULL)`],
  ['run_ms', (r) => `(CASE WHEN ${r}.status = 'succeeded' AND ${r}.started_at IS NOT NULL THEN COALESCE(${r}.finished_at - ${r}.started_at, 0) ELSE 0 END)`],
  ['completed', (r) => `(${r}.status = 'succeeded' AND ${r}.started_at IS NOT NULL AND ${r}.finished_at IS NOT NULL)`],
  [
    'completion_ms',
    (r) => `(CASE WHEN ${r}.status = 'succeeded' AND ${r}.started_at IS NOT NULL THEN COALESCE(${r}.finished_at - ${r}.created_at, 0) ELSE 0 END)`,
  ],
];

function addJobTerms(row: 'NEW' | 'OLD', sign: '' | '-'): string {
  const columns = JOB_TERMS.map(([column]) => column);
  return `INSERT INTO job_counters (tenant, kind, status, ${columns.join(', ')})
    VALUES (${row}.tenant, ${row}.kind, ${row}.status, ${JOB_TERMS.map(([, term]) => `${sign}${term(row)}`).join(', ')})
    ON CONFLICT (tenant, kind, status) DO UPDATE SET ${columns.map((c) => `${c} = ${c} + excluded.${c}`).join(', ')};`;
}

/** The tenant of an attempt row, for the per-tenant attempt terms. */
const attemptTenant = (row: string): string => `(SELECT tenant FROM jobs WHERE seq = ${row}.job_seq)`;

/** The counter triggers on jobs (migration 5; created again by the rebuild of migration 9). */
export const JOB_COUNTER_TRIGGERS = `CREATE TRIGGER job_counters_insert AFTER INSERT ON jobs BEGIN
  ${addJobTerms('NEW', '')}
END;
CREATE TRIGGER job_counters_update AFTER UPDATE OF status, started_at, finished_at ON jobs
  WHEN OLD.status IS NOT NEW.status OR OLD.started_at IS NOT NEW.started_at OR OLD.finished_at IS NOT NEW.finished_at BEGIN
  ${addJobTerms('OLD', '-')}
  ${addJobTerms('NEW', '')}
END;
CREATE TRIGGER job_counters_delete AFTER DELETE ON jobs BEGIN
  ${addJobTerms('OLD', '-')}
END;`;

/** The attempt triggers, which read jobs (migration 5; dropped and created again around the rebuild of migration 9). */
export const ATTEMPT_COUNTER_TRIGGERS = `-- An attempt's run time counts once it has ended. Deleting a job deletes its attempts first.
CREATE TRIGGER attempt_counters_end AFTER UPDATE OF ended_at ON job_attempts
  WHEN OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL BEGIN
  INSERT INTO tenant_counters (tenant, ended_attempts, attempt_run_ms) VALUES (${attemptTenant('NEW')}, 1, NEW.ended_at - NEW.started_at)
    ON CONFLICT (tenant) DO UPDATE SET ended_attempts = ended_attempts + 1, attempt_run_ms = attempt_run_ms + excluded.attempt_run_ms;
END;
CREATE TRIGGER attempt_counters_delete AFTER DELETE ON job_attempts WHEN OLD.ended_at IS NOT NULL BEGIN
  UPDATE tenant_counters SET ended_attempts = ended_attempts - 1, attempt_run_ms = attempt_run_ms - (OLD.ended_at - OLD.started_at)
    WHERE tenant = ${attemptTenant('OLD')};
END;`;

export const JOB_COUNTERS_SQL = `
CREATE TABLE job_counters (
  tenant        TEXT    NOT NULL,
  kind          TEXT    NOT NULL,
  status        TEXT    NOT NULL,
  ${JOB_TERMS.map(([column]) => `${column} INTEGER NOT NULL DEFAULT 0`).join(',\n  ')},
  PRIMARY KEY (tenant, kind, status)
) WITHOUT ROWID;
ALTER TABLE tenant_counters ADD COLUMN ended_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenant_counters ADD COLUMN attempt_run_ms INTEGER NOT NULL DEFAULT 0;

${JOB_COUNTER_TRIGGERS}
${ATTEMPT_COUNTER_TRIGGERS}

-- Existing rows, counted once.
INSERT INTO job_counters (tenant, kind, status, ${JOB_TERMS.map(([column]) => column).join(', ')})
  SELECT tenant, kind, status, ${JOB_TERMS.map(([, term]) => `SUM(${term('j')})`).join(', ')} FROM jobs j GROUP BY tenant, kind, status;
INSERT INTO tenant_counters (tenant) SELECT DISTINCT tenant FROM jobs WHERE true ON CONFLICT (tenant) DO NOTHING;
UPDATE tenant_counters SET (ended_attempts, attempt_run_ms) = (
  SELECT COUNT(*), COALESCE(SUM(a.ended_at - a.started_at), 0) FROM job_attempts a JOIN jobs j ON j.seq = a.job_seq
   WHERE j.tenant = tenant_counters.tenant AND a.ended_at IS NOT NULL);

-- The oldest available job of a tenant, whatever its priority: the head of this index.
CREATE INDEX jobs_queued_by_run_after ON jobs (tenant, run_after) WHERE status = 'queued';
`;
