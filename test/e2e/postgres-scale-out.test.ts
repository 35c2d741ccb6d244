/**
 * Scale-out over PostgreSQL: two `leasehold serve` processes on different
 * ports over one database (a fresh schema), four `leasehold worker` processes
 * split between them, 3,000 jobs enqueued through both. Every handler
 * execution appends to an effects ledger. So that leases really change
 * hands, one worker (2 s leases) is SIGKILLed a quarter of the way through;
 * the jobs it held come back when their leases expire and the other three
 * finish them. Afterwards:
 *   - each job committed exactly once: one succeeded job per id, whose
 *     committed result names exactly one ledger execution of that job, made
 *     under the job's final fence;
 *   - never leased to two live owners: in each job's attempt history (read
 *     through PostgresStore), every attempt began only after the one before it
 *     had ended (by an outcome, or by its lease's expiry being applied), and
 *     exactly one attempt — the last, under the final epoch — succeeded;
 *   - the ledger and the attempt history agree: every execution ran under one
 *     of the job's attempts, and every attempt of a live worker ran exactly
 *     once (the killed worker's last leases ran once or not at all).
 * Runs when DATABASE_URL is set, and then fails rather than skips if the
 * server cannot be reached.
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startWorker, type RunningProcess } from '../../bench/processes.js';
import type { Job } from '../../src/protocol/schemas.js';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { AttemptRecord } from '../../src/store/store.js';
import { allJobs } from '../support/all-jobs.js';
import { waitFor } from '../support/wait-for.js';
import { DATABASE_URL, startPgDeployment, type PgDeployment } from './postgres-deployment.js';
import { byJobId, readJsonLines } from '../support/json-lines.js';

const JOBS = 3_000;
const WORKERS = 4;
/** The worker that is killed; its short leases bring its jobs back soon. */
const VICTIM = 3;
const VICTIM_LEASE_MS = 2_000;
const BATCH = 500;
const HANDLERS = join(ROOT, 'dist', 'test', 'fixtures', 'handlers.js');

interface Execution {
  readonly id: string;
  readonly fence: number;
  readonly pid: number;
}

/** Runs `work` over `items` with at most `lanes` in flight. */
async function inLanes<T, R>(items: readonly T[], lanes: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await work(items[index] as T);
      }
    }),
  );
  return results;
}

/** Why an attempt history breaks "never two live owners", or null when it holds. */
function overlap(attempts: readonly AttemptRecord[]): string | null {
  const sorted = [...attempts].sort((x, y) => x.epoch - y.epoch);
  for (let i = 1; i < sorted.length; i++) {
    const previous = sorted[i - 1] as AttemptRecord;
    const current = sorted[i] as AttemptRecord;
    if (current.epoch <= previous.epoch) return `epoch ${current.epoch} repeats`;
    // A lease ends by an outcome or by expiry, which is recorded when applied (no earlier than the expiry).
    if (previous.endedAt === null) return `epoch ${current.epoch} began while epoch ${previous.epoch} had not ended`;
    if (current.startedAt < previous.endedAt) return `epoch ${current.epoch} began before epoch ${previous.epoch} ended`;
  }
  return null;
}

describe.skipIf(DATABASE_URL === '')('scale-out over PostgreSQL (DATABASE_URL)', () => {
  let deployment: PgDeployment;
  let store: PostgresStore;
  let dir: string;
  const workers: RunningProcess[] = [];

  beforeAll(async () => {
    deployment = await startPgDeployment();
    dir = mkdtempSync(join(tmpdir(), 'leasehold-scale-out-'));
  });

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    await store?.close();
    await deployment?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('commits each of 3,000 jobs exactly once with 2 coordinators and 4 workers, never leasing a job to two live owners', async () => {
    const started = performance.now();
    // Keys go straight into the schema (what `leasehold keys create --db` does), sparing two CLI start-ups.
    store = await PostgresStore.connect({ connectionString: deployment.db, poolSize: 8 });
    const adminKey = newApiKey();
    const workerKey = newApiKey();
    await store.apiKeyInsert({ id: 'scale-admin', tenant: 't1', user: 'ops', role: 'admin', keyHash: hashApiKey(adminKey) });
    await store.apiKeyInsert({ id: 'scale-worker', tenant: 't1', user: 'w', role: 'worker', keyHash: hashApiKey(workerKey) });
    const urls = [(await deployment.serve()).url, (await deployment.serve()).url];
    expect(new Set(urls).size).toBe(2);

    const ledgerFile = join(dir, 'ledger.jsonl');
    writeFileSync(ledgerFile, '');
    const started4 = Array.from({ length: WORKERS }, (_, i) =>
      startWorker({
        url: urls[i % urls.length] as string,
        key: workerKey,
        handlers: HANDLERS,
        concurrency: 8,
        workerId: `scale-${i}`,
        // The victim's handlers take a moment after their effect, so it still holds leases when it is killed.
        env: i === VICTIM ? { LEDGER_FILE: ledgerFile, LEDGER_HOLD_MS: '200' } : { LEDGER_FILE: ledgerFile },
        ...(i === VICTIM ? { extraArgs: ['--lease-ms', String(VICTIM_LEASE_MS)] } : {}),
      }),
    );
    workers.push(...started4);
    await Promise.all(started4.map((w) => w.ready));

    // Enqueued through both coordinators, two batches in flight.
    const admins = urls.map((url) => deployment.client(url, adminKey, { connections: 2 }));
    const batches = Array.from({ length: JOBS / BATCH }, (_, b) => b);
    const ids = (
      await inLanes(batches, 2, async (b) => {
        const jobs = Array.from({ length: BATCH }, (_, k) => ({ idempotencyKey: `job-${b * BATCH + k}`, kind: 'ledger', payload: { n: b * BATCH + k } }));
        const answer = await (admins[b % admins.length] as (typeof admins)[number]).enqueueBatch(jobs);
        return answer.results.map((result) => {
          expect(result.status).toBe(202);
          return result.job?.id ?? '';
        });
      })
    ).flat();
    expect(new Set(ids).size).toBe(JOBS);

    const admin = admins[0] as (typeof admins)[number];
    // Stats scan the table: polled gently.
    await waitFor('a quarter of the jobs to succeed', async () => ((await admin.stats()).counts['succeeded'] ?? 0) >= JOBS / 4, {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    const victim = workers[VICTIM] as RunningProcess;
    const victimPid = victim.child.pid;
    const victimId = `scale-${VICTIM}`;
    // Killed while it holds leases, so some jobs must change hands.
    await waitFor('the victim to hold a lease', async () => {
      const running = await store.jobList({ scope: { tenant: 't1' }, status: 'running', limit: 1000 });
      return running.jobs.some((job) => job.leaseOwner === victimId);
    });
    await victim.stop('SIGKILL');
    await waitFor('all jobs to succeed', async () => (await admin.stats()).counts['succeeded'] === JOBS, { timeoutMs: 120_000, intervalMs: 500 });
    const drained = performance.now();
    await Promise.all(workers.map((w) => w.stop('SIGTERM')));

    // Each job committed exactly once.
    const jobs = await allJobs(admin);
    expect(jobs.size).toBe(JOBS);

    const executions = readJsonLines<Execution>(ledgerFile);
    const byJob = byJobId(executions);

    const workerPids = new Set(workers.map((w) => w.child.pid));
    const committedBy = new Map<number, number>();
    for (const id of ids) {
      const job = jobs.get(id);
      expect(job?.status).toBe('succeeded');
      const committed = job?.result as Execution | undefined;
      expect(committed?.fence).toBe(job?.epoch);
      const matching = (byJob.get(id) ?? []).filter((e) => e.fence === committed?.fence && e.pid === committed?.pid);
      expect(matching, `job ${id}`).toHaveLength(1);
      committedBy.set(committed?.pid ?? 0, (committedBy.get(committed?.pid ?? 0) ?? 0) + 1);
    }
    expect([...committedBy.keys()].every((pid) => workerPids.has(pid))).toBe(true);
    // Every worker process, and so both coordinators, did part of the work (the victim before it died).
    expect(committedBy.size).toBe(WORKERS);

    // Never leased to two live owners: each attempt history, read from the database.
    const histories = await inLanes(ids, 8, (id) => store.jobAttempts({ scope: { tenant: 't1' }, id }));
    let attemptCount = 0;
    let released = 0;
    const problems: string[] = [];
    histories.forEach((attempts, i) => {
      const id = ids[i] as string;
      const job = jobs.get(id) as Job;
      if (attempts === null || attempts.length === 0) {
        problems.push(`${id}: no attempts`);
        return;
      }
      attemptCount += attempts.length;
      if (attempts.length > 1) released += 1;
      const why = overlap(attempts);
      if (why !== null) problems.push(`${id}: ${why}`);
      const succeeded = attempts.filter((a) => a.outcome === 'succeeded');
      const last = attempts.reduce((x, y) => (y.epoch > x.epoch ? y : x));
      if (succeeded.length !== 1 || succeeded[0] !== last || last.epoch !== job.epoch) problems.push(`${id}: the succeeded attempt is not the last one`);
      // Earlier attempts can only be leases that expired: the victim's.
      for (const a of attempts)
        if (a !== last && (a.outcome !== 'expired' || a.workerId !== victimId)) problems.push(`${id}: attempt ${a.epoch} ended ${a.outcome} on ${a.workerId}`);
      // The ledger against the history: executions only under this job's leases, one per live worker's lease.
      const runs = byJob.get(id) ?? [];
      for (const a of attempts) {
        const under = runs.filter((e) => e.fence === a.epoch);
        const expected = a.workerId === victimId && a !== last ? [0, 1] : [1];
        if (!expected.includes(under.length)) problems.push(`${id}: attempt ${a.epoch} on ${a.workerId} ran ${under.length} times`);
        if (under.some((e) => (e.pid === victimPid) !== (a.workerId === victimId))) problems.push(`${id}: attempt ${a.epoch} ran in the wrong process`);
      }
      if (runs.some((e) => !attempts.some((a) => a.epoch === e.fence))) problems.push(`${id}: an execution under no attempt`);
    });
    expect(problems.slice(0, 10)).toEqual([]);
    expect(executions.length).toBeLessThanOrEqual(attemptCount);
    // The histories above did include leases that changed hands.
    expect(released).toBeGreaterThan(0);

    const seconds = (ms: number): string => (ms / 1000).toFixed(1);
    process.stdout.write(
      `scale-out: ${JOBS} jobs, ${attemptCount} attempts, ${executions.length} executions, ${released} jobs leased again after the kill; ` +
        `drained in ${seconds(drained - started)} s, whole test ${seconds(performance.now() - started)} s; ` +
        `commits per worker ${[...committedBy.values()].join('/')}\n`,
    );
  }, 180_000);
});
