/**
 * The storage designs `npm run floor` weighs on SQLite (issue 28), each as a
 * schema and the statements of the hot path with nothing around them, on one
 * connection with the store's durability (WAL, synchronous=FULL):
 *
 *   a  today's schema and the store's own statements (queries.ts)
 *   b  a ready table of queued jobs holding only what the lease reads, with
 *      an index in lease order; the job row written once at enqueue and its
 *      status changed at the end; a running job is a row of job_leases
 *   c  b with the ready table clustered in lease order (WITHOUT ROWID, its
 *      primary key the lease order): one B-tree per ready row instead of two
 *   d  c with the attempt row written once, at the end (the lease row holds
 *      the running attempt), and the counter rows moved once per commit by
 *      code instead of per job by triggers
 *   e  d with each step of a lease or a completion one statement for the
 *      whole batch (json_each) instead of one per job: the statements' shape,
 *      apart from the schema (PostgreSQL's store already works this way)
 *
 * Every candidate keeps the protocol's guarantees: the statement that takes
 * a job bumps its fencing epoch (b–d: the lease row's primary key admits one
 * live lease per job, and the ready row leaves in the same transaction), a
 * completion is a guarded statement on the token and a live lease, and each
 * transaction commits durably. SQLite has no statement that deletes from one
 * table and inserts into another, so b–d take a job in two statements of one
 * write transaction (which holds the database's write lock throughout).
 */

import Database from 'better-sqlite3';
import { newJobId, newLeaseToken } from '../src/core/ids.js';
import { jobLeaseKindsSql, SQL, withLeaseMax } from '../src/store/sqlite/queries.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { KIND, LEASE_MS, payloadOf, TENANT, type FloorDb, type Leased, type NewJob } from './floor-db.js';
import { type ReadyDesign, readySchema } from './floor-sqlite-schema.js';

type Db = Database.Database;
type Statement = Database.Statement;

function durable(db: Db): void {
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('temp_store = MEMORY');
  db.function('lh_token', { deterministic: false }, () => newLeaseToken());
}

/** BEGIN IMMEDIATE … COMMIT, or only `work` inside a transaction already open (completeAndLease). */
function transaction<T>(db: Db, work: () => T): T {
  if (db.inTransaction) return work();
  db.exec('BEGIN IMMEDIATE');
  try {
    const result = work();
    db.exec('COMMIT');
    return result;
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
}

/**
 * An enqueue transaction as every design runs it: per job the idempotency key's lookup and `insertJob`, then the
 * counter rows once per commit, as the store's group commit applies them (new-job-counts.ts).
 */
function enqueueWith(db: Db, insertJob: (job: NewJob, payload: string, now: number) => void): (jobs: readonly NewJob[]) => void {
  const lookup = db.prepare(`SELECT id, request_hash FROM jobs WHERE tenant = ? AND owner = ? AND idempotency_key = ?`);
  const jobCounter = db.prepare(SQL.counterAddTerms);
  const storage = db.prepare(SQL.counterAddTenant);
  return (jobs) =>
    transaction(db, () => {
      let bytes = 0;
      for (const job of jobs) {
        const payload = payloadOf(job);
        if (lookup.get(TENANT, '', `k${job.n}`) !== undefined) throw new Error('key exists');
        insertJob(job, payload, Date.now());
        bytes += payload.length;
      }
      jobCounter.run(TENANT, KIND, 'queued', jobs.length, 0, 0, 0, 0, 0, 0);
      storage.run(TENANT, bytes, 0, 0, 0);
    });
}

/** `floor` with completeAndLease: its complete and lease, synchronous on SQLite, in one transaction. */
function withPairedCommit(db: Db, floor: Omit<FloorDb, 'completeAndLease'>): FloorDb {
  return {
    ...floor,
    completeAndLease: (jobs, max) =>
      transaction(db, () => {
        void floor.complete(jobs);
        return floor.lease(max) as Leased[];
      }),
  };
}

function expectOne(changes: number, what: string): void {
  if (changes !== 1) throw new Error(`${what} matched ${changes} rows`);
}

/** SQL.jobInsert's bindings for the no-op job `n` of the bench's tenant. */
export function todayJobBindings(n: number, payload: string, now: number): Record<string, unknown> {
  return {
    id: newJobId(now),
    tenant: TENANT,
    owner: '',
    idempotencyKey: `k${n}`,
    requestHash: 'h'.repeat(64),
    kind: KIND,
    payload,
    payloadBytes: payload.length,
    maxAttempts: 3,
    priority: 0,
    runAfter: now,
    deadlineMs: null,
    deadlineAt: null,
    now,
    groupKey: '',
  };
}

/**
 * (a) The store's schema (migrated by SqliteStore.open) and its own statements: since migration 14 that is d with
 * e's statement shape (a lease statement that inserts the lease rows, one delete of the ready rows and one read of
 * the jobs per batch; a completion's guarded lease end, job end and attempt row per job; counters once per commit).
 */
export async function openToday(path: string): Promise<FloorDb> {
  await SqliteStore.open({ path }).close();
  const db = new Database(path);
  durable(db);
  const p = (sql: string): Statement => db.prepare(sql);
  const insert = p(SQL.jobInsert);
  const ready = p(SQL.readyInsert);
  const expired = p(SQL.jobsExpiredLeases);
  const queuedDeadline = p(SQL.readyPastDeadline);
  const unready = p(SQL.readyDeleteMany);
  const leasedJobs = p(SQL.jobLeasedMany);
  const lock = p(SQL.jobLock);
  const leaseEnd = p(SQL.leaseEnd);
  const end = p(SQL.jobEnd);
  const attempt = p(SQL.attemptInsert);
  const count = p(SQL.counterAddTerms);
  const tenantCount = p(SQL.counterAddTenant);
  const leases = new Map<number, Statement>();
  const enqueueAll = enqueueWith(db, (job, payload, now) => {
    const seq = Number(insert.run(todayJobBindings(job.n, payload, now)).lastInsertRowid);
    ready.run({ tenant: TENANT, kind: KIND, groupKey: '', priority: 0, runAfter: now, seq, deadlineAt: null, attempts: 0, epoch: 0 });
  });
  return withPairedCommit(db, {
    enqueue: enqueueAll,
    enqueueBatch: enqueueAll,
    lease(max) {
      let statement = leases.get(max);
      if (statement === undefined) leases.set(max, (statement = p(withLeaseMax(jobLeaseKindsSql(1), max))));
      const leaseWith = statement;
      return transaction(db, () => {
        const now = Date.now();
        // The store's lease settles due expiries and queued deadlines first (operator-actions.ts reapInTx).
        expired.all(now);
        queuedDeadline.all({ now });
        const rows = leaseWith.all({ tenant: TENANT, workerId: 'floor', leaseMs: LEASE_MS, now, k0: KIND }) as {
          seq: number;
          kind: string;
          priority: number;
          run_after: number;
          token: string;
        }[];
        if (rows.length === 0) return [];
        const keys = JSON.stringify(rows.map((row) => [row.kind, '', row.priority, row.run_after, row.seq]));
        if (unready.run({ tenant: TENANT, rows: keys }).changes !== rows.length) throw new Error('ready rows left behind');
        const ids = new Map((leasedJobs.all({ seqs: JSON.stringify(rows.map((row) => row.seq)) }) as { seq: number; id: string }[]).map((j) => [j.seq, j.id]));
        count.run(TENANT, KIND, 'queued', -rows.length, 0, 0, 0, 0, 0, 0);
        count.run(TENANT, KIND, 'running', rows.length, rows.length, 0, 0, 0, 0, 0);
        return rows.map((row) => ({ seq: row.seq, id: ids.get(row.seq) ?? '', token: row.token }));
      });
    },
    complete(jobs) {
      transaction(db, () => {
        const now = Date.now();
        let runMs = 0;
        for (const job of jobs) {
          const row = lock.get(job.id, TENANT) as { seq: number; status: string; lease_token: string; lease_expires_at: number; run_after: number } | undefined;
          if (row === undefined || row.status !== 'running' || row.lease_token !== job.token || row.lease_expires_at <= now) throw new Error('stale lease');
          const lease = leaseEnd.get({ seq: row.seq, token: job.token, now, live: 1 }) as
            | { epoch: number; attempt: number; worker_id: string; started_at: number; cancel_requested: number; effect_started_at: number | null }
            | undefined;
          if (lease === undefined) throw new Error('the guarded lease end matched nothing');
          const bindings = { seq: row.seq, epoch: lease.epoch, attempt: lease.attempt, workerId: lease.worker_id, startedAt: lease.started_at, now };
          expectOne(
            end.run({
              ...bindings,
              token: job.token,
              status: 'succeeded',
              outcome: 'succeeded',
              runAfter: row.run_after,
              cancelRequested: lease.cancel_requested,
              effectStartedAt: lease.effect_started_at,
              code: null,
              message: null,
              errorClass: null,
            }).changes,
            'jobEnd',
          );
          attempt.run({ ...bindings, outcome: 'succeeded', attemptCode: null });
          runMs += now - lease.started_at;
        }
        if (jobs.length > 0) {
          count.run(TENANT, KIND, 'running', -jobs.length, -jobs.length, 0, 0, 0, 0, 0);
          count.run(TENANT, KIND, 'succeeded', jobs.length, jobs.length, 0, jobs.length, runMs, jobs.length, 0);
          tenantCount.run(TENANT, 0, jobs.length, runMs, 0);
        }
      });
    },
    close: () => void db.close(),
    connection: db,
  });
}

/** b, c and d on a fresh file. */
export function openReady(path: string, design: ReadyDesign): FloorDb {
  const db = new Database(path);
  db.pragma('auto_vacuum = INCREMENTAL');
  durable(db);
  db.exec(readySchema(design));
  const p = (sql: string): Statement => db.prepare(sql);
  const insert = p(`INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status, max_attempts,
      priority, run_after, deadline_ms, deadline_at, created_at)
    VALUES (@id, @tenant, '', @key, @hash, @kind, @payload, @bytes, 'queued', 3, 0, @now, NULL, NULL, @now)`);
  const ready = p(`INSERT INTO job_ready (seq, tenant, kind, priority, run_after, deadline_at, attempts, max_attempts, epoch)
    VALUES (?, ?, ?, 0, ?, NULL, 0, 3, 0)`);
  // The reaper's two probes before each lease, as today's: due expiries and queued deadlines.
  const expired = p(`SELECT seq FROM job_leases WHERE expires_at <= ?`);
  const queuedDeadline = p(`SELECT seq FROM job_ready WHERE deadline_at <= ?`);
  // The guarded statement that takes a job: the ready rows in lease order, each lease with its epoch bumped.
  const leaseSql = (max: number): string => `INSERT INTO job_leases (seq, tenant, kind, priority, run_after, epoch, attempt, max_attempts, token, worker_id,
      started_at, expires_at, deadline_at)
    SELECT seq, tenant, kind, priority, run_after, epoch + 1, attempts + 1, max_attempts, lh_token(), @workerId, @now,
           CASE WHEN deadline_at IS NOT NULL AND deadline_at < @now + @leaseMs THEN deadline_at ELSE @now + @leaseMs END, deadline_at
      FROM job_ready WHERE tenant = @tenant AND kind = @kind AND run_after <= @now AND (deadline_at IS NULL OR deadline_at > @now)
     ORDER BY priority DESC, run_after, seq LIMIT ${max}
    RETURNING seq, tenant, kind, priority, run_after, epoch, attempt, token, worker_id, started_at`;
  const unready = design.clustered
    ? p(`DELETE FROM job_ready WHERE tenant = @tenant AND kind = @kind AND priority = @priority AND run_after = @run_after AND seq = @seq`)
    : p(`DELETE FROM job_ready WHERE seq = @seq`);
  const payload = p(`SELECT id, payload FROM jobs WHERE seq = ?`);
  const attemptStart = p(`INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at) VALUES (?, ?, ?, ?, ?)`);
  const snapshot = p(`SELECT j.seq, j.status, l.token, l.expires_at FROM jobs j LEFT JOIN job_leases l ON l.seq = j.seq WHERE j.id = ? AND j.tenant = ?`);
  const endLease = p(`DELETE FROM job_leases WHERE seq = @seq AND token = @token AND expires_at > @now
    RETURNING epoch, attempt, worker_id, started_at, tenant, kind`);
  const endJob = p(`UPDATE jobs SET status = @status, finished_at = @now, epoch = @epoch, attempts = @attempt, last_outcome = @status,
      started_at = coalesce(started_at, @startedAt)
    WHERE seq = @seq AND status = 'queued'`);
  const attemptEnd = p(`UPDATE job_attempts SET ended_at = ?, outcome = ?, error_code = NULL WHERE job_seq = ? AND epoch = ? AND ended_at IS NULL`);
  const attemptOnce = p(`INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at, ended_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)`);
  const count = p(`INSERT INTO job_counters (tenant, kind, status, jobs, started, wait_ms, run_jobs, run_ms, completed, completion_ms)
      VALUES (@tenant, @kind, @status, @jobs, @started, @waitMs, @runJobs, @runMs, @runJobs, @completionMs)
    ON CONFLICT (tenant, kind, status) DO UPDATE SET jobs = jobs + excluded.jobs, started = started + excluded.started,
      wait_ms = wait_ms + excluded.wait_ms, run_jobs = run_jobs + excluded.run_jobs, run_ms = run_ms + excluded.run_ms,
      completed = completed + excluded.completed, completion_ms = completion_ms + excluded.completion_ms`);
  const attemptSums = p(`INSERT INTO tenant_counters (tenant, ended_attempts, attempt_run_ms) VALUES (?, ?, ?)
    ON CONFLICT (tenant) DO UPDATE SET ended_attempts = ended_attempts + excluded.ended_attempts, attempt_run_ms = attempt_run_ms + excluded.attempt_run_ms`);
  const zero = { started: 0, waitMs: 0, runJobs: 0, runMs: 0, completionMs: 0 };
  const leases = new Map<number, Statement>();
  // e: one statement per step for the whole batch; @rows is a JSON array of arrays.
  const unreadyAll = design.clustered
    ? p(`DELETE FROM job_ready WHERE tenant = @tenant AND kind = @kind
        AND (priority, run_after, seq) IN (SELECT value ->> 1, value ->> 2, value ->> 0 FROM json_each(@rows))`)
    : p(`DELETE FROM job_ready WHERE seq IN (SELECT value ->> 0 FROM json_each(@rows))`);
  const payloads = p(`SELECT seq, id FROM jobs WHERE seq IN (SELECT value ->> 0 FROM json_each(@rows))`);
  const snapshots = p(`SELECT x.value AS id, j.seq, l.token, l.expires_at FROM json_each(@ids) x CROSS
      JOIN jobs j INDEXED BY jobs_id ON j.id = x.value AND j.tenant = @tenant LEFT JOIN job_leases l ON l.seq = j.seq`);
  const endLeases = p(`DELETE FROM job_leases WHERE (seq, token) IN (SELECT value ->> 0, value ->> 1 FROM json_each(@rows)) AND expires_at > @now
    RETURNING seq, epoch, attempt, worker_id, started_at`);
  const endJobs = p(`UPDATE jobs SET status = 'succeeded', finished_at = @now, epoch = e.value ->> 1, attempts = e.value ->> 2,
      last_outcome = 'succeeded', started_at = coalesce(jobs.started_at, e.value ->> 3)
    FROM json_each(@rows) e WHERE jobs.seq = e.value ->> 0 AND jobs.status = 'queued'`);
  const attemptsOnce = p(`INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at, ended_at, outcome)
    SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 4, value ->> 3, @now, 'succeeded' FROM json_each(@rows)`);
  const enqueueAll = enqueueWith(db, (job, payload, now) => {
    const inserted = insert.run({ id: newJobId(now), tenant: TENANT, key: `k${job.n}`, hash: 'h'.repeat(64), kind: KIND, payload, bytes: payload.length, now });
    ready.run(Number(inserted.lastInsertRowid), TENANT, KIND, now);
  });
  /** e's completion: the snapshots, the guarded lease ends, the job ends and the attempt rows, one statement each. */
  const completeBatch = (jobs: readonly Leased[], now: number): number => {
    const found = new Map(
      (
        snapshots.all({ ids: JSON.stringify(jobs.map((j) => j.id)), tenant: TENANT }) as {
          id: string;
          seq: number;
          token: string | null;
          expires_at: number | null;
        }[]
      ).map((row) => [row.id, row]),
    );
    const ends = jobs.map((job) => {
      const row = found.get(job.id);
      if (row === undefined || row.token !== job.token || (row.expires_at ?? 0) <= now) throw new Error('stale lease');
      return [row.seq, job.token];
    });
    const ended = endLeases.all({ rows: JSON.stringify(ends), now }) as {
      seq: number;
      epoch: number;
      attempt: number;
      worker_id: string;
      started_at: number;
    }[];
    if (ended.length !== jobs.length) throw new Error('the guarded lease ends matched fewer rows');
    const rows = JSON.stringify(ended.map((e) => [e.seq, e.epoch, e.attempt, e.started_at, e.worker_id]));
    if (endJobs.run({ rows, now }).changes !== jobs.length) throw new Error('the job ends matched fewer rows');
    attemptsOnce.run({ rows, now });
    return ended.reduce((sum, e) => sum + now - e.started_at, 0);
  };
  return withPairedCommit(db, {
    enqueue: enqueueAll,
    enqueueBatch: enqueueAll,
    lease(max) {
      let statement = leases.get(max);
      if (statement === undefined) leases.set(max, (statement = p(leaseSql(max))));
      const leaseWith = statement;
      return transaction(db, () => {
        const now = Date.now();
        expired.all(now);
        queuedDeadline.all(now);
        const rows = leaseWith.all({ tenant: TENANT, kind: KIND, workerId: 'floor', leaseMs: LEASE_MS, now }) as {
          seq: number;
          tenant: string;
          kind: string;
          priority: number;
          run_after: number;
          epoch: number;
          attempt: number;
          token: string;
          worker_id: string;
          started_at: number;
        }[];
        const leased: Leased[] = [];
        if (design.perBatch === true) {
          const keys = JSON.stringify(rows.map((row) => [row.seq, row.priority, row.run_after]));
          if (unreadyAll.run({ tenant: TENANT, kind: KIND, rows: keys }).changes !== rows.length) throw new Error('ready rows left behind');
          const ids = new Map((payloads.all({ rows: keys }) as { seq: number; id: string }[]).map((job) => [job.seq, job.id]));
          for (const row of rows) leased.push({ seq: row.seq, id: ids.get(row.seq) ?? '', token: row.token });
        }
        for (const row of design.perBatch === true ? [] : rows) {
          expectOne(
            unready.run({ tenant: row.tenant, kind: row.kind, priority: row.priority, run_after: row.run_after, seq: row.seq }).changes,
            'the ready row',
          );
          if (!design.onceAtEnd) attemptStart.run(row.seq, row.epoch, row.attempt, row.worker_id, row.started_at);
          const job = payload.get(row.seq) as { id: string; payload: string };
          leased.push({ seq: row.seq, id: job.id, token: row.token });
        }
        if (design.onceAtEnd && rows.length > 0) {
          count.run({ tenant: TENANT, kind: KIND, status: 'queued', jobs: -rows.length, ...zero });
          count.run({ tenant: TENANT, kind: KIND, status: 'running', jobs: rows.length, ...zero, started: rows.length });
        }
        return leased;
      });
    },
    complete(jobs) {
      transaction(db, () => {
        const now = Date.now();
        let runMs = 0;
        if (design.perBatch === true) runMs = completeBatch(jobs, now);
        for (const job of design.perBatch === true ? [] : jobs) {
          const row = snapshot.get(job.id, TENANT) as { seq: number; status: string; token: string | null; expires_at: number | null } | undefined;
          if (row === undefined || row.token !== job.token || (row.expires_at ?? 0) <= now) throw new Error('stale lease');
          const lease = endLease.get({ seq: row.seq, token: job.token, now }) as
            | { epoch: number; attempt: number; worker_id: string; started_at: number }
            | undefined;
          if (lease === undefined) throw new Error('the guarded lease end matched nothing');
          expectOne(
            endJob.run({ seq: row.seq, status: 'succeeded', now, epoch: lease.epoch, attempt: lease.attempt, startedAt: lease.started_at }).changes,
            'the job end',
          );
          if (design.onceAtEnd) attemptOnce.run(row.seq, lease.epoch, lease.attempt, lease.worker_id, lease.started_at, now, 'succeeded');
          else attemptEnd.run(now, 'succeeded', row.seq, lease.epoch);
          runMs += now - lease.started_at;
        }
        if (design.onceAtEnd && jobs.length > 0) {
          count.run({ tenant: TENANT, kind: KIND, status: 'running', jobs: -jobs.length, ...zero });
          count.run({ tenant: TENANT, kind: KIND, status: 'succeeded', jobs: jobs.length, ...zero, runJobs: jobs.length, runMs });
          attemptSums.run(TENANT, jobs.length, runMs);
        }
      });
    },
    close: () => void db.close(),
    connection: db,
  });
}
