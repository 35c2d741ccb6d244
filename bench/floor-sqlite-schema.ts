/**
 * The SQLite schema of `npm run floor`'s candidates b to e (floor-sqlite.ts
 * describes them): the job record, the ready table of queued jobs in lease
 * order, the lease table of running jobs, the attempt rows and the counter
 * rows, with the counter triggers where the design keeps them.
 */

export interface ReadyDesign {
  /** c, d, e: the ready table clustered in lease order. */
  readonly clustered: boolean;
  /** d, e: the attempt row written once at the end, counters moved per commit in code. */
  readonly onceAtEnd: boolean;
  /** e: d with each step of a lease or a completion one statement for the whole batch (json_each), not one per job. */
  readonly perBatch?: boolean;
}

/** The counter rows' columns (counter-triggers.ts's JOB_TERMS), kept so every design writes rows of today's width. */
const COUNTERS = `CREATE TABLE job_counters (
  tenant TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL,
  jobs INTEGER NOT NULL DEFAULT 0, started INTEGER NOT NULL DEFAULT 0, wait_ms INTEGER NOT NULL DEFAULT 0, run_jobs INTEGER NOT NULL DEFAULT 0,
  run_ms INTEGER NOT NULL DEFAULT 0, completed INTEGER NOT NULL DEFAULT 0, completion_ms INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, kind, status)
) WITHOUT ROWID;
CREATE TABLE tenant_counters (
  tenant TEXT PRIMARY KEY, storage_bytes INTEGER NOT NULL DEFAULT 0, ended_attempts INTEGER NOT NULL DEFAULT 0,
  attempt_run_ms INTEGER NOT NULL DEFAULT 0, lease_expirations INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;`;

/** An upsert of one job row's terms into its counter row, as a trigger body writes it. */
function count(row: 'NEW' | 'OLD', status: string, jobs: string, started = '0', waitMs = '0'): string {
  return `INSERT INTO job_counters (tenant, kind, status, jobs, started, wait_ms) VALUES (${row}.tenant, ${row}.kind, ${status}, ${jobs}, ${started}, ${waitMs})
    ON CONFLICT (tenant, kind, status) DO UPDATE SET jobs = jobs + excluded.jobs, started = started + excluded.started, wait_ms = wait_ms + excluded.wait_ms;`;
}

/**
 * The schema of b, c and d. jobs keeps the record and the indexes that do not churn (public id, idempotency key,
 * the listings by tenant and by owner, finished jobs for retention); status changes once, at the end.
 */
export function readySchema(design: ReadyDesign): string {
  const ready = design.clustered
    ? `CREATE TABLE job_ready (
  tenant TEXT NOT NULL, kind TEXT NOT NULL, priority INTEGER NOT NULL, run_after INTEGER NOT NULL, seq INTEGER NOT NULL,
  deadline_at INTEGER, attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL, epoch INTEGER NOT NULL,
  PRIMARY KEY (tenant, kind, priority DESC, run_after, seq)
) WITHOUT ROWID;`
    : `CREATE TABLE job_ready (
  seq INTEGER PRIMARY KEY, tenant TEXT NOT NULL, kind TEXT NOT NULL, priority INTEGER NOT NULL, run_after INTEGER NOT NULL,
  deadline_at INTEGER, attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL, epoch INTEGER NOT NULL
);
CREATE INDEX job_ready_order ON job_ready (tenant, kind, priority DESC, run_after, seq);`;
  const triggers = design.onceAtEnd
    ? ''
    : `CREATE TRIGGER lease_counters_start AFTER INSERT ON job_leases BEGIN
  ${count('NEW', "'queued'", '-1')}
  ${count('NEW', "'running'", '1', '1', 'NEW.started_at - (SELECT created_at FROM jobs WHERE seq = NEW.seq)')}
END;
CREATE TRIGGER lease_counters_end AFTER DELETE ON job_leases BEGIN
  ${count('OLD', "'running'", '-1')}
END;
CREATE TRIGGER job_counters_end AFTER UPDATE OF status ON jobs WHEN OLD.status IS NOT NEW.status BEGIN
  ${count('NEW', 'NEW.status', '1')}
END;
CREATE TRIGGER attempt_counters_end AFTER UPDATE OF ended_at ON job_attempts WHEN OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL BEGIN
  INSERT INTO tenant_counters (tenant, ended_attempts, attempt_run_ms) VALUES ((SELECT tenant FROM jobs WHERE seq = NEW.job_seq), 1, NEW.ended_at - NEW.started_at)
    ON CONFLICT (tenant) DO UPDATE SET ended_attempts = ended_attempts + 1, attempt_run_ms = attempt_run_ms + excluded.attempt_run_ms;
END;`;
  return `
CREATE TABLE jobs (
  seq INTEGER PRIMARY KEY, id TEXT NOT NULL, tenant TEXT NOT NULL, owner TEXT NOT NULL, idempotency_key TEXT NOT NULL,
  request_hash TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL, payload_bytes INTEGER NOT NULL CHECK (payload_bytes >= 0),
  -- queued, or running while a row of job_leases exists; the ending statuses once it ends.
  status TEXT NOT NULL CHECK (status IN ('queued', 'waiting', 'succeeded', 'dead', 'cancelled', 'unknown')),
  attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1), priority INTEGER NOT NULL,
  run_after INTEGER NOT NULL, deadline_ms INTEGER, deadline_at INTEGER, epoch INTEGER NOT NULL DEFAULT 0, last_outcome TEXT,
  created_at INTEGER NOT NULL, started_at INTEGER, finished_at INTEGER, last_error_code TEXT, last_error_message TEXT, last_error_class TEXT
);
CREATE UNIQUE INDEX jobs_id ON jobs (id);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (tenant, owner, idempotency_key);
CREATE INDEX jobs_by_tenant ON jobs (tenant, seq);
CREATE INDEX jobs_by_owner ON jobs (tenant, owner, seq);
CREATE INDEX jobs_finished ON jobs (status, finished_at) WHERE status IN ('succeeded', 'cancelled', 'dead');
${ready}
CREATE INDEX job_ready_deadline ON job_ready (deadline_at) WHERE deadline_at IS NOT NULL;
-- A running job: at most one live lease per job (the primary key), found by expiry for the reaper.
CREATE TABLE job_leases (
  seq INTEGER PRIMARY KEY REFERENCES jobs (seq), tenant TEXT NOT NULL, kind TEXT NOT NULL, priority INTEGER NOT NULL,
  run_after INTEGER NOT NULL, epoch INTEGER NOT NULL CHECK (epoch >= 1), attempt INTEGER NOT NULL, max_attempts INTEGER NOT NULL,
  token TEXT NOT NULL, worker_id TEXT NOT NULL, started_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, deadline_at INTEGER,
  CHECK (attempt <= max_attempts)
);
CREATE INDEX job_leases_expiry ON job_leases (expires_at);
CREATE TABLE job_attempts (
  job_seq INTEGER NOT NULL REFERENCES jobs (seq), epoch INTEGER NOT NULL, attempt INTEGER NOT NULL CHECK (attempt >= 1),
  worker_id TEXT NOT NULL, started_at INTEGER NOT NULL, ended_at INTEGER, outcome TEXT, error_code TEXT,
  PRIMARY KEY (job_seq, epoch)
) WITHOUT ROWID;
${COUNTERS}
${triggers}`;
}
