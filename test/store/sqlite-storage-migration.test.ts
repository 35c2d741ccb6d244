/**
 * Migration 14 (storage_for_the_hot_path) on a SQLite file written at version
 * 13, holding jobs in every status as that schema stored them: queued (due,
 * delayed, with a deadline, retried after a failure), running with a live
 * lease (first and second attempt, with a checkpoint and progress, with an
 * effect started and a cancel requested, with a concurrency key), succeeded
 * with its result, dead, cancelled, unknown, and waiting (a child of a running
 * job, the next job of a busy key). The rows are written as version 13's
 * statements left them, and its counter rows as a recount (migration 5's own
 * query). After the store opens the file: every job is still there with its
 * status, fencing epoch, attempts and the rest of its record; a running job's
 * token still completes it (and its child and its key's next job move on); a
 * stale token is still refused; the queued ones lease with their epoch
 * bumped; the delayed one is next due; an expired lease is reaped; and the
 * counters behind GET /stats still equal a recount at every step.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { JOB_STATUSES, type JobStatus } from '../../src/core/states.js';
import { migrate } from '../../src/store/sqlite/migrate.js';
import { MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { JobRecord, Store } from '../../src/store/store.js';

const TENANT = 't';
const HOUR = 3_600_000;
const dirs: string[] = [];
afterEach(() => {
  while (dirs.length > 0) rmSync(dirs.pop() ?? '', { recursive: true, force: true });
});

const id = (n: number): string => `00000000-0000-7000-8000-${String(n).padStart(12, '0')}`;

/** The old schema's columns a test row sets; the rest take the schema's defaults. */
interface OldJob {
  readonly n: number;
  readonly status: JobStatus;
  readonly kind?: string;
  readonly attempts?: number;
  readonly epoch?: number;
  readonly priority?: number;
  readonly runAfter?: number;
  readonly deadlineAt?: number | null;
  readonly leaseOwner?: string | null;
  readonly leaseToken?: string | null;
  readonly leaseExpiresAt?: number | null;
  readonly lastOutcome?: string | null;
  readonly startedAt?: number | null;
  readonly finishedAt?: number | null;
  readonly error?: readonly [code: string, message: string, errorClass: string] | null;
  readonly progress?: string | null;
  readonly cancelRequested?: number;
  readonly effectStartedAt?: number | null;
  readonly checkpoint?: readonly [step: number, state: string] | null;
  readonly pendingParents?: number;
  readonly hasChildren?: number;
  readonly concurrencyKey?: string | null;
  /** Its attempt rows: [epoch, outcome or null while open, startedAt, endedAt or null]. */
  readonly attemptRows?: readonly (readonly [number, string | null, number, number | null])[];
}

/** A version-13 database holding `jobs` as that version's statements wrote them, its counters recounted. */
function oldDatabase(path: string, jobs: readonly OldJob[], now: number): void {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  migrate(
    db,
    systemClock,
    MIGRATIONS.filter((m) => m.version <= 13),
  );
  expect(db.prepare('SELECT max(version) AS v FROM schema_migrations').get()).toEqual({ v: 13 });
  const insert = db.prepare(`INSERT INTO jobs (seq, id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status, attempts,
      max_attempts, priority, run_after, deadline_at, lease_owner, lease_expires_at, epoch, lease_token, last_outcome, created_at, started_at, finished_at,
      last_error_code, last_error_message, last_error_class, progress, cancel_requested, effect_started_at, checkpoint_step, checkpoint_state,
      pending_parents, has_children, concurrency_key)
    VALUES (@n, @id, '${TENANT}', 'u', @key, 'h', @kind, @payload, length(@payload), @status, @attempts, 3, @priority, @runAfter, @deadlineAt, @leaseOwner,
      @leaseExpiresAt, @epoch, @leaseToken, @lastOutcome, @createdAt, @startedAt, @finishedAt, @code, @message, @errorClass, @progress, @cancelRequested,
      @effectStartedAt, @step, @state, @pendingParents, @hasChildren, @concurrencyKey)`);
  const attempt = db.prepare(`INSERT INTO job_attempts (job_seq, epoch, attempt, worker_id, started_at, ended_at, outcome, error_code)
    VALUES (?, ?, ?, 'old-worker', ?, ?, ?, NULL)`);
  for (const job of jobs) {
    insert.run({
      n: job.n,
      id: id(job.n),
      key: `key-${job.n}`,
      kind: job.kind ?? 'email',
      payload: JSON.stringify({ n: job.n }),
      status: job.status,
      attempts: job.attempts ?? 0,
      epoch: job.epoch ?? 0,
      priority: job.priority ?? 0,
      runAfter: job.runAfter ?? now - 60_000,
      deadlineAt: job.deadlineAt ?? null,
      leaseOwner: job.leaseOwner ?? null,
      leaseExpiresAt: job.leaseExpiresAt ?? null,
      leaseToken: job.leaseToken ?? null,
      lastOutcome: job.lastOutcome ?? null,
      createdAt: now - 120_000,
      startedAt: job.startedAt ?? null,
      finishedAt: job.finishedAt ?? null,
      code: job.error?.[0] ?? null,
      message: job.error?.[1] ?? null,
      errorClass: job.error?.[2] ?? null,
      progress: job.progress ?? null,
      cancelRequested: job.cancelRequested ?? 0,
      effectStartedAt: job.effectStartedAt ?? null,
      step: job.checkpoint?.[0] ?? null,
      state: job.checkpoint?.[1] ?? null,
      pendingParents: job.pendingParents ?? 0,
      hasChildren: job.hasChildren ?? 0,
      concurrencyKey: job.concurrencyKey ?? null,
    });
    for (const [epoch, outcome, startedAt, endedAt] of job.attemptRows ?? []) attempt.run(job.n, epoch, epoch, startedAt, endedAt, outcome);
  }
  db.prepare(`INSERT INTO job_dependencies (parent_seq, child_seq) VALUES (4, 10)`).run();
  db.prepare(`INSERT INTO job_results (job_seq, content_type, body, checksum, size_bytes) VALUES (6, 'text/plain', x'6f6b', 'c', 2)`).run();
  // Version 13's counter rows as its triggers kept them: a recount (migration 5's own query, counter-triggers.ts).
  const recount = (MIGRATIONS.find((m) => m.version === 5)?.sql ?? '').match(
    /counted once\.\s*(INSERT INTO job_counters[\s\S]*?GROUP BY tenant, kind, status;)/,
  )?.[1];
  if (recount === undefined) throw new Error('migration 5 has no recount');
  db.exec(`DELETE FROM job_counters; ${recount}`);
  db.prepare(`INSERT INTO tenant_counters (tenant, storage_bytes, ended_attempts, attempt_run_ms, lease_expirations)
    SELECT '${TENANT}', (SELECT sum(payload_bytes) FROM jobs) + 2, count(*), sum(ended_at - started_at), 1 FROM job_attempts WHERE ended_at IS NOT NULL`).run();
  db.close();
}

/** The counters behind stats beside a recount of the jobs as the store shows them (their listing and attempts). */
async function expectCountersRecount(store: Store): Promise<void> {
  const jobs: JobRecord[] = [];
  for (let n = 1; n <= 20; n++) {
    const job = await store.jobGet({ scope: { tenant: TENANT }, id: id(n) });
    if (job !== null) jobs.push(job);
  }
  const page = await store.jobList({ scope: { tenant: TENANT }, limit: 100 });
  expect(page.jobs.map((j) => j.id).sort()).toEqual(jobs.map((j) => j.id).sort());
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as Record<JobStatus, number>;
  let started = 0;
  let waitMs = 0;
  let attempts = 0;
  let attemptMs = 0;
  for (const job of page.jobs) {
    counts[job.status]++;
    if (job.startedAt !== null) {
      started++;
      waitMs += job.startedAt - job.createdAt;
    }
    for (const a of (await store.jobAttempts({ scope: { tenant: TENANT }, id: job.id })) ?? []) {
      if (a.endedAt !== null) {
        attempts++;
        attemptMs += a.endedAt - a.startedAt;
      }
    }
  }
  const stats = await store.stats({ tenant: TENANT });
  expect(stats.counts).toEqual(counts);
  expect(stats.meanWaitMs).toBeCloseTo(waitMs / started, 6);
  expect(stats.meanAttemptRunMs).toBeCloseTo(attemptMs / attempts, 6);
  // Every status list agrees with the statuses (queued and running come from their own tables).
  for (const status of JOB_STATUSES) {
    const listed = await store.jobList({ scope: { tenant: TENANT }, status, limit: 100 });
    expect(listed.jobs.length, status).toBe(counts[status]);
  }
}

describe('SQLite migration 14 (storage_for_the_hot_path) on a version-13 database', () => {
  it('keeps every job with its fencing epoch; running tokens complete, queued jobs lease, counters still recount', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lh-migration-14-'));
    dirs.push(dir);
    const path = join(dir, 'jobs.db');
    const now = Date.now();
    const T = (n: number): string => `token-of-job-${n}-xxxxxx`;
    const jobs: OldJob[] = [
      { n: 1, status: 'queued' },
      { n: 2, status: 'queued', runAfter: now + HOUR },
      {
        n: 3,
        status: 'queued',
        attempts: 1,
        epoch: 1,
        lastOutcome: 'failed',
        leaseOwner: 'old-worker',
        leaseToken: T(3),
        startedAt: now - 100_000,
        error: ['smtp_down', 'refused', 'transient'],
        attemptRows: [[1, 'failed', now - 100_000, now - 99_000]],
      },
      {
        n: 4,
        status: 'running',
        attempts: 1,
        epoch: 1,
        leaseOwner: 'old-worker',
        leaseToken: T(4),
        leaseExpiresAt: now + HOUR,
        startedAt: now - 50_000,
        hasChildren: 1,
        progress: '{"done":3}',
        checkpoint: [2, '{"cursor":"abc"}'],
        attemptRows: [[1, null, now - 50_000, null]],
      },
      {
        n: 5,
        status: 'running',
        attempts: 2,
        epoch: 2,
        leaseOwner: 'old-worker',
        leaseToken: T(5),
        leaseExpiresAt: now + HOUR,
        startedAt: now - 90_000,
        cancelRequested: 1,
        effectStartedAt: now - 10_000,
        error: ['lease_expired', 'the lease ran out', 'lease_expired'],
        attemptRows: [
          [1, 'expired', now - 90_000, now - 60_000],
          [2, null, now - 20_000, null],
        ],
      },
      {
        n: 6,
        status: 'succeeded',
        attempts: 1,
        epoch: 1,
        lastOutcome: 'succeeded',
        leaseOwner: 'old-worker',
        leaseToken: T(6),
        startedAt: now - 80_000,
        finishedAt: now - 79_000,
        attemptRows: [[1, 'succeeded', now - 80_000, now - 79_000]],
      },
      {
        n: 7,
        status: 'dead',
        attempts: 3,
        epoch: 3,
        lastOutcome: 'failed',
        leaseOwner: 'old-worker',
        leaseToken: T(7),
        startedAt: now - 70_000,
        finishedAt: now - 65_000,
        error: ['bad_input', 'no', 'permanent'],
        attemptRows: [
          [1, 'failed', now - 70_000, now - 69_000],
          [2, 'failed', now - 68_000, now - 67_000],
          [3, 'failed', now - 66_000, now - 65_000],
        ],
      },
      { n: 8, status: 'cancelled', finishedAt: now - 30_000, error: ['cancelled', 'cancelled', 'cancelled'] },
      {
        n: 9,
        status: 'unknown',
        attempts: 1,
        epoch: 1,
        lastOutcome: 'expired',
        leaseOwner: 'old-worker',
        leaseToken: T(9),
        startedAt: now - 40_000,
        finishedAt: now - 35_000,
        effectStartedAt: now - 39_000,
        error: ['effect_unknown', 'unknown', 'effect_unknown'],
        attemptRows: [[1, 'expired', now - 40_000, now - 35_000]],
      },
      { n: 10, status: 'waiting', pendingParents: 1 },
      {
        n: 11,
        status: 'running',
        kind: 'keyed',
        attempts: 1,
        epoch: 1,
        leaseOwner: 'old-worker',
        leaseToken: T(11),
        leaseExpiresAt: now + HOUR,
        startedAt: now - 5_000,
        concurrencyKey: 'k1',
        attemptRows: [[1, null, now - 5_000, null]],
      },
      { n: 12, status: 'waiting', kind: 'keyed', concurrencyKey: 'k1' },
      { n: 13, status: 'queued', priority: 5, deadlineAt: now + HOUR },
      {
        n: 14,
        status: 'running',
        attempts: 1,
        epoch: 1,
        leaseOwner: 'old-worker',
        leaseToken: T(14),
        leaseExpiresAt: now - 1,
        startedAt: now - 6_000,
        attemptRows: [[1, null, now - 6_000, null]],
      },
    ];
    oldDatabase(path, jobs, now);
    const before = new Database(path, { readonly: true });
    const countersBefore = before.prepare('SELECT * FROM job_counters ORDER BY tenant, kind, status').all();
    before.close();

    const store = SqliteStore.open({ path });
    try {
      const db = new Database(path, { readonly: true });
      try {
        // The counters count each job under the status the store shows: the move changes none of them.
        expect(db.prepare('SELECT * FROM job_counters ORDER BY tenant, kind, status').all()).toEqual(countersBefore);
        expect(db.prepare(`SELECT count(*) AS n FROM jobs WHERE status = 'running'`).get()).toEqual({ n: 0 });
        expect(db.prepare('SELECT seq FROM job_ready ORDER BY seq').all()).toEqual([{ seq: 1 }, { seq: 2 }, { seq: 3 }, { seq: 13 }]);
        expect(db.prepare('SELECT seq, epoch, attempt, token, worker_id FROM job_leases ORDER BY seq').all()).toEqual(
          [4, 5, 11, 14].map((n) => {
            const job = jobs.find((j) => j.n === n);
            return { seq: n, epoch: job?.epoch, attempt: job?.attempts, token: T(n), worker_id: 'old-worker' };
          }),
        );
        expect(db.prepare('SELECT count(*) AS n FROM job_attempts WHERE ended_at IS NULL').get()).toEqual({ n: 0 });
        // A running job's row keeps its last ended attempt's epoch and count, as a lease leaves it.
        expect(
          db.prepare('SELECT count(*) AS n FROM job_leases l JOIN jobs j ON j.seq = l.seq WHERE l.epoch <> j.epoch + 1 OR l.attempt <> j.attempts + 1').get(),
        ).toEqual({ n: 0 });
        expect(db.pragma('foreign_key_check')).toEqual([]);
        expect(db.prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name`).all()).toEqual([{ name: 'job_results_only_for_succeeded' }]);
      } finally {
        db.close();
      }

      // Every job as the store shows it: status, fencing epoch, attempts, lease and the rest of its record.
      const scope = { tenant: TENANT };
      for (const old of jobs) {
        const job = await store.jobGet({ scope, id: id(old.n) });
        expect(job, `job ${old.n}`).toMatchObject({
          status: old.status,
          epoch: old.epoch ?? 0,
          attempts: old.attempts ?? 0,
          priority: old.priority ?? 0,
          leaseExpiresAt: old.status === 'running' ? old.leaseExpiresAt : null,
          leaseOwner: old.leaseOwner ?? null,
          startedAt: old.startedAt ?? null,
          finishedAt: old.finishedAt ?? null,
          cancelRequested: old.cancelRequested === 1,
          effectStartedAt: old.effectStartedAt ?? null,
          concurrencyKey: old.concurrencyKey ?? null,
          lastError: old.error === undefined || old.error === null ? null : { code: old.error[0], message: old.error[1], class: old.error[2] },
        });
        const attempts = await store.jobAttempts({ scope, id: id(old.n) });
        expect(
          attempts?.map((a) => [a.epoch, a.outcome, a.startedAt, a.endedAt]),
          `attempts of job ${old.n}`,
        ).toEqual((old.attemptRows ?? []).map(([epoch, outcome, startedAt, endedAt]) => [epoch, outcome, startedAt, endedAt]));
      }
      expect(await store.jobGet({ scope, id: id(4) })).toMatchObject({
        checkpoint: { step: 2, state: { cursor: 'abc' } },
        progress: { done: 3 },
        children: [id(10)],
      });
      expect(await store.jobGet({ scope, id: id(6) })).toMatchObject({ result: { contentType: 'text/plain', body: Buffer.from('ok') } });
      expect(await store.jobGet({ scope, id: id(10) })).toMatchObject({ dependsOn: [id(4)] });
      await expectCountersRecount(store);

      // A running job's token still holds its lease: renew, checkpoint and complete under it; its child is released.
      expect(await store.jobRenew({ tenant: TENANT, id: id(4), token: T(4), leaseMs: HOUR, progress: { done: 4 } })).toMatchObject({ kind: 'renewed' });
      expect(await store.jobCheckpoint({ tenant: TENANT, id: id(4), token: T(4), checkpoint: { step: 3, state: null } })).toEqual({ kind: 'ok' });
      expect(await store.jobComplete({ tenant: TENANT, id: id(4), token: T(4) })).toEqual({ kind: 'completed', replayed: false });
      expect(await store.jobComplete({ tenant: TENANT, id: id(4), token: T(4) })).toEqual({ kind: 'completed', replayed: true });
      expect(await store.jobGet({ scope, id: id(4) })).toMatchObject({ status: 'succeeded', epoch: 1, attempts: 1 });
      expect(await store.jobGet({ scope, id: id(10) })).toMatchObject({ status: 'queued' });
      // The keyed job's end passes its key's turn on.
      expect(
        await store.jobFail({
          tenant: TENANT,
          id: id(11),
          token: T(11),
          error: { code: 'x', message: 'y' },
          retryable: false,
          backoff: { baseMs: 1, maxMs: 1 },
        }),
      ).toMatchObject({ kind: 'failed', status: 'dead' });
      expect(await store.jobGet({ scope, id: id(12) })).toMatchObject({ status: 'queued' });
      // The second attempt's token is the live one; the first attempt's is refused. The effect declared before comes first.
      expect(await store.jobComplete({ tenant: TENANT, id: id(5), token: 'the first attempt token' })).toEqual({ kind: 'rejected', code: 'stale_lease' });
      expect(
        await store.jobFail({ tenant: TENANT, id: id(5), token: T(5), error: { code: 'x', message: 'y' }, retryable: true, backoff: { baseMs: 1, maxMs: 1 } }),
      ).toMatchObject({ kind: 'failed', status: 'unknown' });
      await expectCountersRecount(store);

      // The expired lease is reaped; the queued jobs lease with their epochs bumped, in lease order; the delayed one waits.
      expect(await store.jobReapExpired()).toMatchObject({ requeued: 1 });
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'new-worker', leaseMs: HOUR, max: 10 });
      expect(leased.map((job) => [job.id, job.epoch, job.attempt])).toEqual([
        [id(13), 1, 1],
        [id(1), 1, 1],
        [id(3), 2, 2],
        [id(10), 1, 1],
        [id(12), 1, 1],
        [id(14), 2, 2],
      ]);
      expect(await store.jobNextDue({ tenant: TENANT })).toMatchObject({ runAfter: now + HOUR });
      for (const job of leased) expect(await store.jobComplete({ tenant: TENANT, id: job.id, token: job.token })).toMatchObject({ kind: 'completed' });
      // An unknown job reconciles back into the queue, a dead one requeues: both lease again.
      expect(await store.jobReconcile({ scope, id: id(9), outcome: 'requeue' })).toMatchObject({ kind: 'reconciled', job: { status: 'queued' } });
      expect(await store.jobRequeue({ scope, id: id(7) })).toMatchObject({ kind: 'requeued', job: { status: 'queued', epoch: 3 } });
      const again = await store.jobLease({ tenant: TENANT, workerId: 'new-worker', leaseMs: HOUR, max: 10 });
      expect(again.map((job) => [job.id, job.epoch]).sort()).toEqual([
        [id(7), 4],
        [id(9), 2],
      ]);
      await expectCountersRecount(store);
    } finally {
      await store.close();
    }
  });
});
