/**
 * Migration 14 (storage_for_the_hot_path) on a PostgreSQL schema written at version 13 that holds a job in
 * every status: queued, delayed, queued again after a failure, running with a live lease (a checkpoint, an
 * effect mark and progress), succeeded (with a result), dead, cancelled, unknown, and a waiting child of
 * the queued job, besides a running job's ended first attempt. Every job keeps its status, fencing epoch and
 * attempts; the running job's token still completes it (its running attempt is its lease); a queued job leases
 * with the next epoch; the waiting child runs once its parent succeeds; the operator actions work on the rest;
 * and the counters equal a recount of the stored jobs before and after.
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { newJobId, newLeaseToken } from '../../src/core/ids.js';
import type { JobStatus } from '../../src/core/states.js';
import { JOB_STATUSES } from '../../src/core/states.js';
import { migrate } from '../../src/store/postgres/migrate.js';
import { MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { JobListItem, Store } from '../../src/store/store.js';

const url = process.env['DATABASE_URL'] ?? '';
const TENANT = 't';
const scope = { tenant: TENANT };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

/** A row of jobs at version 13; columns not named take their defaults. */
type OldJob = Record<string, string | number | boolean | null>;

async function insertJob(client: pg.Client, job: OldJob): Promise<void> {
  const row: OldJob = {
    tenant: TENANT,
    owner: 'u',
    request_hash: 'h',
    kind: 'email',
    payload: '{"to":"a@example.com"}',
    payload_bytes: 22,
    max_attempts: 3,
    status: 'queued',
    run_after: 'now()',
    created_at: 'now()',
    ...job,
  };
  const columns = Object.keys(row);
  // Time expressions are written as SQL (now() and intervals); every other value is bound.
  const values: unknown[] = [];
  const sql = columns.map((column) => {
    const value = row[column];
    if (typeof value === 'string' && /^now\(\)/.test(value)) return value;
    values.push(value);
    return `$${values.length}`;
  });
  await client.query(`INSERT INTO jobs (${columns.join(', ')}) VALUES (${sql.join(', ')})`, values);
}

async function allJobs(store: Store): Promise<JobListItem[]> {
  const jobs: JobListItem[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.jobList({ scope, limit: 100, ...(cursor === undefined ? {} : { cursor }) });
    jobs.push(...page.jobs);
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
  return jobs;
}

/** The stats' counts and means against a recount of the stored jobs and attempts (as test/conformance/store-counters does). */
async function expectCountersRecount(store: Store): Promise<void> {
  const jobs = await allJobs(store);
  const counts = Object.fromEntries(JOB_STATUSES.map((status) => [status, 0])) as Record<JobStatus, number>;
  const waits: number[] = [];
  const attemptRuns: number[] = [];
  for (const job of jobs) {
    counts[job.status]++;
    if (job.startedAt !== null) waits.push(job.startedAt - job.createdAt);
    for (const attempt of (await store.jobAttempts({ scope, id: job.id })) ?? []) {
      if (attempt.endedAt !== null) attemptRuns.push(attempt.endedAt - attempt.startedAt);
    }
  }
  const mean = (values: readonly number[]): number | null => (values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length);
  const stats = await store.stats({ tenant: TENANT });
  expect(stats.counts).toEqual(counts);
  const expectClose = (actual: number | null, expected: number | null): void => {
    if (expected === null) expect(actual).toBeNull();
    else expect(actual).toBeCloseTo(expected, 6);
  };
  expectClose(stats.meanWaitMs, mean(waits));
  expectClose(stats.meanAttemptRunMs, mean(attemptRuns));
}

describe.skipIf(url === '')('migration 14 on a version-13 PostgreSQL schema', () => {
  it('keeps every job with its epoch, and the store runs them all', async () => {
    const schema = `lh_test_storage_migration_${randomBytes(6).toString('hex')}`;
    cleanups.push(() => PostgresStore.dropSchema({ connectionString: url, schema }));
    const ids = {
      queued: newJobId(),
      delayed: newJobId(),
      retry: newJobId(),
      running: newJobId(),
      succeeded: newJobId(),
      dead: newJobId(),
      cancelled: newJobId(),
      unknown: newJobId(),
      waiting: newJobId(),
      keyHead: newJobId(),
      keyNext: newJobId(),
    };
    const token = newLeaseToken();
    // The version-13 store's own statement triggers keep the counters while these rows go in.
    const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
    await client.connect();
    try {
      await migrate(
        client,
        schema,
        MIGRATIONS.filter((m) => m.version <= 13),
      );
      await insertJob(client, { id: ids.queued, idempotency_key: 'queued', priority: 5 });
      await insertJob(client, { id: ids.delayed, idempotency_key: 'delayed', run_after: "now() + interval '1 hour'" });
      await insertJob(client, {
        id: ids.retry,
        idempotency_key: 'retry',
        attempts: 1,
        epoch: 1,
        lease_token: 'old-token',
        lease_owner: 'w0',
        last_outcome: 'failed',
        last_error_code: 'smtp_down',
        last_error_message: 'refused',
        last_error_class: 'transient',
        started_at: "now() - interval '1 minute'",
      });
      await insertJob(client, {
        id: ids.running,
        idempotency_key: 'running',
        status: 'running',
        attempts: 2,
        epoch: 2,
        lease_token: token,
        lease_owner: 'w1',
        lease_expires_at: "now() + interval '10 minutes'",
        started_at: "now() - interval '2 minutes'",
        checkpoint_step: 3,
        checkpoint_state: '{"page":3}',
        progress: '{"done":30}',
        effect_started_at: "now() - interval '5 seconds'",
      });
      // Attempts as version 13 wrote them: inserted at the lease, ended by an update (which its trigger counts).
      await client.query(
        `INSERT INTO job_attempts (job_id, epoch, attempt, worker_id, started_at) VALUES
           ($1, 1, 1, 'w0', now() - interval '2 minutes'), ($1, 2, 2, 'w1', now() - interval '1 minute')`,
        [ids.running],
      );
      await client.query(
        `UPDATE job_attempts SET ended_at = now() - interval '90 seconds', outcome = 'failed', error_code = 'smtp_down' WHERE job_id = $1 AND epoch = 1`,
        [ids.running],
      );
      await insertJob(client, {
        id: ids.succeeded,
        idempotency_key: 'succeeded',
        status: 'succeeded',
        attempts: 1,
        epoch: 1,
        lease_token: 'done-token',
        lease_owner: 'w1',
        last_outcome: 'succeeded',
        started_at: "now() - interval '3 minutes'",
        finished_at: "now() - interval '2 minutes'",
      });
      await client.query(`INSERT INTO job_attempts (job_id, epoch, attempt, worker_id, started_at) VALUES ($1, 1, 1, 'w1', now() - interval '3 minutes')`, [
        ids.succeeded,
      ]);
      await client.query(`UPDATE job_attempts SET ended_at = now() - interval '2 minutes', outcome = 'succeeded' WHERE job_id = $1`, [ids.succeeded]);
      await client.query(`INSERT INTO job_results (job_id, content_type, body, checksum, size_bytes) VALUES ($1, 'text/plain', 'ok', 'x', 2)`, [ids.succeeded]);
      await insertJob(client, {
        id: ids.dead,
        idempotency_key: 'dead',
        status: 'dead',
        attempts: 3,
        epoch: 3,
        last_outcome: 'failed',
        last_error_code: 'boom',
        last_error_message: 'boom',
        last_error_class: 'permanent',
        finished_at: 'now()',
      });
      await insertJob(client, { id: ids.cancelled, idempotency_key: 'cancelled', status: 'cancelled', finished_at: 'now()' });
      await insertJob(client, {
        id: ids.unknown,
        idempotency_key: 'unknown',
        status: 'unknown',
        attempts: 1,
        epoch: 4,
        last_outcome: 'expired',
        effect_started_at: "now() - interval '1 minute'",
        finished_at: 'now()',
      });
      await client.query(`UPDATE jobs SET has_children = true WHERE id = $1`, [ids.queued]);
      await insertJob(client, { id: ids.waiting, idempotency_key: 'waiting', status: 'waiting', pending_parents: 1, kind: 'report' });
      await client.query(`INSERT INTO job_dependencies (parent_id, child_id) VALUES ($1, $2)`, [ids.queued, ids.waiting]);
      // Two jobs of one concurrency key: the head queued, the next waiting for its turn.
      await insertJob(client, { id: ids.keyHead, idempotency_key: 'key-head', kind: 'sync', concurrency_key: 'acct-1' });
      await insertJob(client, { id: ids.keyNext, idempotency_key: 'key-next', kind: 'sync', concurrency_key: 'acct-1', status: 'waiting' });
    } finally {
      await client.end();
    }

    const store = await PostgresStore.connect({ connectionString: url, schema, poolSize: 2 });
    cleanups.push(() => store.close());
    const get = async (id: string): Promise<NonNullable<Awaited<ReturnType<Store['jobGet']>>>> => {
      const job = await store.jobGet({ scope, id });
      if (job === null) throw new Error(`job ${id} is gone`);
      return job;
    };

    // Every job is there with its status, epoch and attempts.
    const expected: Record<keyof typeof ids, { status: JobStatus; epoch: number; attempts: number }> = {
      queued: { status: 'queued', epoch: 0, attempts: 0 },
      delayed: { status: 'queued', epoch: 0, attempts: 0 },
      retry: { status: 'queued', epoch: 1, attempts: 1 },
      running: { status: 'running', epoch: 2, attempts: 2 },
      succeeded: { status: 'succeeded', epoch: 1, attempts: 1 },
      dead: { status: 'dead', epoch: 3, attempts: 3 },
      cancelled: { status: 'cancelled', epoch: 0, attempts: 0 },
      unknown: { status: 'unknown', epoch: 4, attempts: 1 },
      waiting: { status: 'waiting', epoch: 0, attempts: 0 },
      keyHead: { status: 'queued', epoch: 0, attempts: 0 },
      keyNext: { status: 'waiting', epoch: 0, attempts: 0 },
    };
    for (const [name, id] of Object.entries(ids) as [keyof typeof ids, string][]) {
      expect({ name, ...(await get(id)) }).toMatchObject({ name, ...expected[name] });
    }
    const running = await get(ids.running);
    expect(running).toMatchObject({ leaseOwner: 'w1', checkpoint: { step: 3, state: { page: 3 } }, progress: { done: 30 } });
    expect(running.leaseExpiresAt).toBeGreaterThan(Date.now());
    expect(running.effectStartedAt).not.toBeNull();
    expect(await get(ids.retry)).toMatchObject({ lastError: { code: 'smtp_down' } });
    expect(await get(ids.succeeded)).toMatchObject({ result: { contentType: 'text/plain' } });
    // The running attempt is the lease; the ended one stays.
    expect((await store.jobAttempts({ scope, id: ids.running }))?.map((a) => [a.epoch, a.outcome, a.endedAt === null])).toEqual([
      [1, 'failed', false],
      [2, null, true],
    ]);
    await expectCountersRecount(store);

    // The running job's token still fences it: a stale token is refused, its own completes it.
    expect(await store.jobRenew({ tenant: TENANT, id: ids.running, token: 'stale', leaseMs: 60_000 })).toEqual({ kind: 'rejected', code: 'stale_lease' });
    expect((await store.jobRenew({ tenant: TENANT, id: ids.running, token, leaseMs: 60_000 })).kind).toBe('renewed');
    expect(await store.jobComplete({ tenant: TENANT, id: ids.running, token })).toEqual({ kind: 'completed', replayed: false });
    expect(await get(ids.running)).toMatchObject({ status: 'succeeded', epoch: 2, attempts: 2, progress: { done: 30 } });
    expect(await store.jobComplete({ tenant: TENANT, id: ids.running, token })).toEqual({ kind: 'completed', replayed: true });

    // The queued jobs lease in lease order, with the next epoch; the delayed one is not due.
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'w2', leaseMs: 60_000, max: 5, kinds: ['email'] });
    expect(leased.map((j) => [j.id, j.epoch, j.attempt])).toEqual([
      [ids.queued, 1, 1],
      [ids.retry, 2, 2],
    ]);
    expect((await store.jobNextDue({ tenant: TENANT, kinds: ['email'] }))?.runAfter).toBe((await get(ids.delayed)).runAfter);

    // The parent's success releases its waiting child, which then leases.
    const parent = leased[0];
    if (parent === undefined) throw new Error('the queued job did not lease');
    expect(await store.jobComplete({ tenant: TENANT, id: parent.id, token: parent.token })).toEqual({ kind: 'completed', replayed: false });
    expect((await store.jobLease({ tenant: TENANT, workerId: 'w2', leaseMs: 60_000, max: 1, kinds: ['report'] })).map((j) => j.id)).toEqual([ids.waiting]);

    // The key's head runs alone; its end gives the turn to the next job of the key.
    const sync = { tenant: TENANT, workerId: 'w2', leaseMs: 60_000, max: 2, kinds: ['sync'] };
    const head = await store.jobLease(sync);
    expect(head.map((j) => j.id)).toEqual([ids.keyHead]);
    expect(await store.jobComplete({ tenant: TENANT, id: ids.keyHead, token: head[0]?.token ?? '' })).toEqual({ kind: 'completed', replayed: false });
    expect((await store.jobLease(sync)).map((j) => j.id)).toEqual([ids.keyNext]);

    // Retention finds the jobs that had ended before the migration.
    expect(await store.jobPurge({ status: 'cancelled', olderThanMs: 0, kindRetention: false, limit: 10 })).toEqual({ deleted: 1 });
    expect(await store.jobGet({ scope, id: ids.cancelled })).toBeNull();

    // Operator actions on the ended jobs.
    expect((await store.jobRequeue({ scope, id: ids.dead })).kind).toBe('requeued');
    expect((await store.jobReconcile({ scope, id: ids.unknown, outcome: 'succeeded' })).kind).toBe('reconciled');
    expect((await store.jobLease({ tenant: TENANT, workerId: 'w3', leaseMs: 60_000, max: 1 })).map((j) => [j.id, j.epoch])).toEqual([[ids.dead, 4]]);
    await expectCountersRecount(store);
  });
});
