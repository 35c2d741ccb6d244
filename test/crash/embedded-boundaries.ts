/**
 * The crash boundaries of the library mode, on every backend: a child process
 * that uses leasehold only through `openQueue` (an application enqueuing, with
 * `queue.enqueue` or `enqueueInTransaction`, or a `Worker({ queue })`) is
 * armed with one fault-injection point (src/core/fault-points.ts) and dies by
 * SIGKILL there. A fresh `openQueue` on the same database, in this process,
 * must then show what the boundary promises: no accepted job lost, no result
 * committed twice, and a job whose worker died re-leased, once its lease
 * expires, by a Worker of that fresh Queue, with the one result row of that
 * second execution.
 *
 * Every test checks that the child died by SIGKILL, so a boundary the
 * embedded path does not pass fails here instead of passing unharmed. The
 * result rows are counted in the store's own job_results table. One test file
 * per backend calls describeEmbeddedBoundaries.
 *
 * Where a boundary is not on a path: `enqueue.after-commit` is after the
 * Queue's own commit, so enqueueInTransaction (whose commit is the
 * application's) never passes it. PostgreSQL passes
 * `complete.inside-transaction` only in its multi-statement complete (the
 * single statement is all or nothing: test/crash/postgres-statement-crash.test.ts);
 * the Worker takes that path for a result over its kind's limit, so the
 * PostgreSQL case completes a `big` result.
 */

import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startScript, type RunningProcess } from '../../bench/processes.js';
import { CRASH_AT_VARIABLE, type CrashPointName } from '../../src/core/fault-points.js';
import { openQueue, Worker, type JobContext, type Queue } from '../../src/index.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { StoreBackend } from '../../src/store/store.js';
import { readJsonLines } from '../support/json-lines.js';

export const DATABASE_URL = process.env['DATABASE_URL'] ?? '';

const CHILD = join(ROOT, 'dist', 'test', 'fixtures', 'embedded-crash-child.js');
const TENANT = 't1';
/** The dying worker's lease: short, so its job comes back quickly; long enough for a loaded machine. */
const LOST_LEASE_MS = 500;

interface Execution {
  readonly id: string;
  readonly fence: number;
  readonly pid: number;
}

interface CrashDatabase {
  readonly db: string;
  readonly dir: string;
  resultRows(jobId: string): Promise<number>;
  appRows(key: string): Promise<string[]>;
  drop(): Promise<void>;
}

async function sqliteDatabase(): Promise<CrashDatabase> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-ecrash-'));
  const db = join(dir, 'app.db');
  const queue = await openQueue({ db, tenant: TENANT });
  await queue.close();
  const app = new Database(db);
  app.exec('CREATE TABLE app_rows (key TEXT NOT NULL, job_id TEXT NOT NULL)');
  app.close();
  const read = <T>(work: (file: Database.Database) => T): T => {
    const file = new Database(db, { readonly: true });
    try {
      return work(file);
    } finally {
      file.close();
    }
  };
  return {
    db,
    dir,
    resultRows: async (jobId) =>
      read((file) => (file.prepare('SELECT count(*) AS n FROM job_results r JOIN jobs j ON j.seq = r.job_seq WHERE j.id = ?').get(jobId) as { n: number }).n),
    appRows: async (key) => read((file) => (file.prepare('SELECT job_id FROM app_rows WHERE key = ?').all(key) as { job_id: string }[]).map((r) => r.job_id)),
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function postgresDatabase(): Promise<CrashDatabase> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-ecrash-'));
  const schema = `lh_ecrash_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = new URL(DATABASE_URL);
  url.searchParams.set('schema', schema);
  const db = url.toString();
  const queue = await openQueue({ db, tenant: TENANT });
  await queue.close();
  const reader = new pg.Client({ connectionString: DATABASE_URL });
  await reader.connect();
  await reader.query(`CREATE TABLE ${schema}.app_rows (key text NOT NULL, job_id text NOT NULL)`);
  return {
    db,
    dir,
    resultRows: async (jobId) =>
      (await reader.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.job_results WHERE job_id = $1`, [jobId])).rows[0]?.n ?? 0,
    appRows: async (key) => (await reader.query<{ job_id: string }>(`SELECT job_id FROM ${schema}.app_rows WHERE key = $1`, [key])).rows.map((r) => r.job_id),
    drop: async () => {
      await reader.end();
      await PostgresStore.dropSchema({ connectionString: DATABASE_URL, schema });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function describeEmbeddedBoundaries(backend: StoreBackend): void {
  describe(`embedded crash boundaries (${backend}, openQueue in child processes)`, () => {
    let d: CrashDatabase;
    const children: RunningProcess[] = [];
    const queues: Queue[] = [];

    beforeAll(async () => {
      d = backend === 'sqlite' ? await sqliteDatabase() : await postgresDatabase();
      // Every kind of the file is registered (a tenant with one registered kind refuses the others); `big` has a small result limit.
      const queue = await openQueue({ db: d.db, tenant: TENANT });
      for (const kind of ['e-before', 'e-after', 'tx-before', 'ledger', 'ledger-die']) await queue.putKind(kind, {});
      await queue.putKind('big', { maxResultBytes: 32 });
      await queue.close();
    });

    afterEach(async () => {
      await Promise.all(children.splice(0).map((c) => c.stop('SIGKILL')));
      await Promise.all(queues.splice(0).map((q) => q.close()));
    });

    afterAll(async () => {
      await d?.drop();
    });

    function child(
      mode: 'enqueue' | 'enqueue-tx' | 'worker',
      args: readonly string[],
      crashAt: CrashPointName | '',
      env: NodeJS.ProcessEnv = {},
    ): RunningProcess & { ready: Promise<string> } {
      const started = startScript(CHILD, [mode, d.db, ...args], {
        env: { [CRASH_AT_VARIABLE]: crashAt, ...env },
        ...(mode === 'worker' ? { readyPattern: /^ready$/m } : {}),
      });
      started.ready.catch(() => undefined);
      children.push(started.process);
      return Object.assign(started.process, { ready: started.ready });
    }

    /** The child died by its own SIGKILL at the armed point (within a bound, so a point never passed fails clearly). */
    async function expectKilled(process: RunningProcess, point: string): Promise<void> {
      const timeout = new Promise<string>((resolve) => setTimeout(() => resolve(`still running 30 s later: ${point} was never passed`), 30_000));
      const outcome = await Promise.race([process.exited, timeout]);
      expect(outcome, process.output().slice(-2000)).toBe('SIGKILL');
    }

    async function freshQueue(): Promise<Queue> {
      const queue = await openQueue({ db: d.db, tenant: TENANT });
      queues.push(queue);
      return queue;
    }

    /** A Worker of `queue`, in this process, that runs `kind` once into `ledger`; resolves with the job once it is terminal. */
    async function finishInThisProcess(queue: Queue, kind: string, jobId: string, ledger: string, workerId: string) {
      const worker = new Worker({
        queue,
        workerId,
        concurrency: 1,
        leaseMs: 10_000,
        waitMs: 200,
        handlers: {
          [kind]: async (context: JobContext): Promise<{ fence: number; pid: number }> => {
            appendFileSync(ledger, `${JSON.stringify({ id: context.id, fence: context.fence, pid: process.pid })}\n`);
            return { fence: context.fence, pid: process.pid };
          },
        },
      });
      const running = worker.run();
      try {
        const done = await queue.waitFor(jobId, { timeoutMs: 20_000 });
        expect(done.status).toBe('succeeded');
        return done;
      } finally {
        await worker.stop({ graceMs: 1_000 });
        await running;
      }
    }

    // --- the application's side -------------------------------------------------------------------------

    it('queue.enqueue killed before its commit: no job; the retry with the same key creates it once', async () => {
      const kind = 'e-before';
      await expectKilled(child('enqueue', ['before-1', kind], 'enqueue.before-commit'), 'enqueue.before-commit');

      const queue = await freshQueue();
      expect((await queue.list({ kind })).jobs).toEqual([]);
      const created = await queue.enqueue({ kind, payload: {}, idempotencyKey: 'before-1' });
      expect(created.status).toBe('queued');
      expect((await queue.enqueue({ kind, payload: {}, idempotencyKey: 'before-1' })).id).toBe(created.id);
      expect((await queue.list({ kind })).jobs.map((j) => j.id)).toEqual([created.id]);
    });

    it('queue.enqueue killed after its commit, before it answers: the job exists; the retry returns that job', async () => {
      const kind = 'e-after';
      await expectKilled(child('enqueue', ['after-1', kind], 'enqueue.after-commit'), 'enqueue.after-commit');

      const queue = await freshQueue();
      const committed = (await queue.list({ kind })).jobs;
      expect(committed.map((j) => j.status)).toEqual(['queued']);
      const retry = await queue.enqueue({ kind, payload: {}, idempotencyKey: 'after-1' });
      expect(retry.id).toBe(committed[0]?.id);
      expect((await queue.list({ kind })).jobs).toHaveLength(1);
    });

    it('enqueueInTransaction killed inside the application’s transaction: neither the job nor the application’s row; the retry makes both once', async () => {
      const kind = 'tx-before';
      await expectKilled(child('enqueue-tx', ['tx-1', kind], 'enqueue.before-commit'), 'enqueue.before-commit');

      const queue = await freshQueue();
      expect((await queue.list({ kind })).jobs).toEqual([]);
      expect(await d.appRows('tx-1')).toEqual([]);
      // The key was not reserved by the dead transaction: the application's retry creates the job.
      const retry = child('enqueue-tx', ['tx-1', kind], '');
      expect(await retry.exited).toBe(0);
      const jobs = (await queue.list({ kind })).jobs;
      expect(jobs.map((j) => j.status)).toEqual(['queued']);
      expect(await d.appRows('tx-1')).toEqual([jobs[0]?.id]);
      expect(retry.output()).toContain(`enqueued ${jobs[0]?.id}`);
      // Once more: the key replays the same job inside a new transaction.
      const again = child('enqueue-tx', ['tx-1', kind], '');
      expect(await again.exited).toBe(0);
      expect(await d.appRows('tx-1')).toEqual([jobs[0]?.id, jobs[0]?.id]);
      expect((await queue.list({ kind })).jobs).toHaveLength(1);
    });

    // --- the worker's side --------------------------------------------------------------------------------

    /**
     * Enqueues one `kind` job, lets a child Worker (armed with `crashAt`, or `env`) die on it, checks that
     * nothing was committed for it, then has a Worker of a fresh Queue finish it after the lease expired.
     */
    async function loseWorker(
      name: string,
      kind: string,
      crashAt: CrashPointName | '',
      env: NodeJS.ProcessEnv = {},
    ): Promise<{ jobId: string; ledger: string; lostPid: number }> {
      const ledger = join(d.dir, `${name}.jsonl`);
      const setup = await freshQueue();
      const job = await setup.enqueue({ kind, payload: {}, idempotencyKey: name });
      const lost = child('worker', [`${name}-lost`, String(LOST_LEASE_MS)], crashAt, { LEDGER_FILE: ledger, ...env });
      await expectKilled(lost, crashAt === '' ? 'the handler' : crashAt);

      const queue = await freshQueue();
      const afterCrash = await queue.get(job.id);
      // Still running under the dead lease, or already queued again if a reaper saw it expire (the lease is short).
      expect(afterCrash).toMatchObject({ attempts: 1, epoch: 1, result: null });
      expect(['running', 'queued']).toContain(afterCrash.status);
      expect(await d.resultRows(job.id)).toBe(0);

      const done = await finishInThisProcess(queue, kind, job.id, ledger, `${name}-second`);
      expect(done).toMatchObject({ attempts: 2, epoch: 2, result: { fence: 2, pid: process.pid } });
      expect(await d.resultRows(job.id)).toBe(1);
      const history = await queue.attempts(job.id);
      expect(history.map((a) => [a.workerId, a.outcome])).toEqual([
        [`${name}-lost`, 'expired'],
        [`${name}-second`, 'succeeded'],
      ]);
      return { jobId: job.id, ledger, lostPid: lost.child.pid ?? -1 };
    }

    it('worker killed after the lease commit, before the Worker hears of it: re-leased after expiry, run once', async () => {
      const run = await loseWorker('lease-after', 'ledger', 'lease.after-commit');
      expect(readJsonLines<Execution>(run.ledger)).toEqual([{ id: run.jobId, fence: 2, pid: process.pid }]);
    });

    it('worker killed after its claim, before the handler starts: re-leased after expiry, run once', async () => {
      const run = await loseWorker('after-claim', 'ledger', 'worker.after-claim');
      expect(readJsonLines<Execution>(run.ledger)).toEqual([{ id: run.jobId, fence: 2, pid: process.pid }]);
    });

    it('worker killed inside its handler: no result; re-leased and run again, one result row', async () => {
      const run = await loseWorker('in-handler', 'ledger-die', '', { DIE_IN_HANDLER: '1' });
      expect(readJsonLines<Execution>(run.ledger)).toEqual([
        { id: run.jobId, fence: 1, pid: run.lostPid },
        { id: run.jobId, fence: 2, pid: process.pid },
      ]);
    });

    it('worker killed after its handler, before the complete: no result; recomputed, one result row', async () => {
      const run = await loseWorker('after-handler', 'ledger', 'worker.after-handler');
      expect(readJsonLines<Execution>(run.ledger)).toEqual([
        { id: run.jobId, fence: 1, pid: run.lostPid },
        { id: run.jobId, fence: 2, pid: process.pid },
      ]);
    });

    it('worker killed inside the result-and-success transaction: neither committed; re-leased after expiry, one result row', async () => {
      // SQLite's complete passes the point on every success; PostgreSQL's only on the locked path, taken by a result over the limit.
      const kind = backend === 'postgres' ? 'big' : 'ledger';
      const run = await loseWorker('complete-inside', kind, 'complete.inside-transaction');
      expect(readJsonLines<Execution>(run.ledger)).toEqual([
        { id: run.jobId, fence: 1, pid: run.lostPid },
        { id: run.jobId, fence: 2, pid: process.pid },
      ]);
    });

    it('worker killed after the complete commit: succeeded with its one result; never run again', async () => {
      const name = 'complete-after';
      const ledger = join(d.dir, `${name}.jsonl`);
      const setup = await freshQueue();
      const job = await setup.enqueue({ kind: 'ledger', payload: {}, idempotencyKey: name });
      const dying = child('worker', [`${name}-lost`, String(LOST_LEASE_MS)], 'complete.after-commit', { LEDGER_FILE: ledger });
      await expectKilled(dying, 'complete.after-commit');

      const queue = await freshQueue();
      const pid = dying.child.pid;
      expect(await queue.get(job.id)).toMatchObject({ status: 'succeeded', attempts: 1, epoch: 1, result: { fence: 1, pid } });
      expect(await d.resultRows(job.id)).toBe(1);
      // A Worker leasing on the fresh Queue after the dead one's lease would have run out: the job is not handed out again.
      await new Promise((resolve) => setTimeout(resolve, LOST_LEASE_MS * 2));
      const marker = await queue.enqueue({ kind: 'ledger', payload: {}, idempotencyKey: `${name}-marker` });
      await finishInThisProcess(queue, 'ledger', marker.id, ledger, `${name}-second`);
      expect(readJsonLines<Execution>(ledger)).toEqual([
        { id: job.id, fence: 1, pid },
        { id: marker.id, fence: 1, pid: process.pid },
      ]);
      expect((await queue.attempts(job.id)).map((a) => [a.workerId, a.outcome])).toEqual([[`${name}-lost`, 'succeeded']]);
      expect(await d.resultRows(job.id)).toBe(1);
    });
  });
}
