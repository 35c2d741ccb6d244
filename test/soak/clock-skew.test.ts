/**
 * A worker whose clock is hours off changes nothing: real worker processes
 * whose Date and performance clocks are shifted by five hours (ahead and
 * behind, preloaded with test/fixtures/shifted-clock.ts) lease, renew and
 * complete as usual, on SQLite and on PostgreSQL. Lease decisions read only
 * the coordinator's (SQLite) or the database server's (PostgreSQL) clock:
 *   - a job held past its lease length on renewals alone keeps its single
 *     attempt, although the worker ahead would think the lease long gone;
 *   - a lease whose holder (clock behind, which would think the lease has
 *     hours left) is frozen with SIGSTOP expires after its length and goes to
 *     another worker; the frozen worker, resumed, is refused as stale and the
 *     committed result is the second worker's.
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, ROOT, startWorker } from '../../bench/processes.js';
import type { LeaseholdClient } from '../../src/client/index.js';
import type { Job } from '../../src/protocol/schemas.js';
import { startCluster } from '../e2e/cluster.js';
import { DATABASE_URL, startPgDeployment } from '../e2e/postgres-deployment.js';
import type { ClockRun } from '../fixtures/clock-handlers.js';
import { waitFor } from '../support/wait-for.js';
import { readJsonLines } from '../support/json-lines.js';

const HOURS_5 = 5 * 3_600_000;
const HANDLERS = join(ROOT, 'dist', 'test', 'fixtures', 'clock-handlers.js');
const SHIFTED_CLOCK = pathToFileURL(join(ROOT, 'dist', 'test', 'fixtures', 'shifted-clock.js')).href;

interface Deployment {
  readonly url: string;
  readonly workerKey: string;
  readonly admin: LeaseholdClient;
  stop(): Promise<void>;
}

const SERVE_ARGS = ['--reaper-interval-ms', '200'];

async function deploy(backend: 'sqlite' | 'postgres'): Promise<Deployment> {
  if (backend === 'sqlite') {
    const cluster = await startCluster(SERVE_ARGS);
    return { url: cluster.url, workerKey: cluster.keys.worker, admin: cluster.client(cluster.keys.admin), stop: () => cluster.stop() };
  }
  const pg = await startPgDeployment();
  const { url } = await pg.serve(SERVE_ARGS);
  return { url, workerKey: createKey(pg.db, 't1', 'w', 'worker'), admin: pg.client(url, createKey(pg.db, 't1', 'ops', 'admin')), stop: () => pg.stop() };
}

const backends = [{ name: 'sqlite' as const }, ...(DATABASE_URL === '' ? [] : [{ name: 'postgres' as const }])];

describe.each(backends)('a worker whose clock is five hours off ($name)', ({ name }) => {
  let deployment: Deployment;
  let dir: string;
  const workers: ReturnType<typeof startWorker>[] = [];

  beforeAll(async () => {
    deployment = await deploy(name);
    dir = mkdtempSync(join(tmpdir(), 'leasehold-clock-'));
  });

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    await deployment?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  function skewedWorker(
    kind: string,
    shiftMs: number,
    leaseMs: number,
    ledger: string,
    { rate = 1, concurrency = 4 }: { rate?: number; concurrency?: number } = {},
  ): ReturnType<typeof startWorker> {
    const worker = startWorker({
      url: deployment.url,
      key: deployment.workerKey,
      handlers: HANDLERS,
      concurrency,
      workerId: `${kind}-${shiftMs > 0 ? 'ahead' : 'behind'}-${workers.length}`,
      extraArgs: ['--lease-ms', String(leaseMs)],
      env: {
        NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --import=${SHIFTED_CLOCK}`.trim(),
        CLOCK_SHIFT_MS: String(shiftMs),
        CLOCK_RATE: String(rate),
        CLOCK_KIND: kind,
        LEDGER_FILE: ledger,
      },
    });
    workers.push(worker);
    return worker;
  }

  function ledgerOf(file: string): ClockRun[] {
    return readJsonLines<ClockRun>(file);
  }

  /** The worker really ran on a clock shiftMs off: what its handler read against this process's clock. */
  function expectShifted(run: ClockRun, shiftMs: number, readAt: number): void {
    expect(Math.abs(run.now - shiftMs - readAt)).toBeLessThan(60_000);
  }

  it.concurrent('leases, renews past the lease length and completes with one attempt, ahead and behind, with and without a deadline', async () => {
    const ledger = join(dir, 'renew.jsonl');
    writeFileSync(ledger, '');
    const leaseMs = 3_000; // renewed every second: a loaded machine's stalls stay well inside it
    const holdMs = 4_000; // past the lease length: the job survives only on renewals
    const cases = [
      { kind: 'ahead', shiftMs: HOURS_5 },
      { kind: 'behind', shiftMs: -HOURS_5 },
    ];
    const started = cases.map((c) => ({ ...c, worker: skewedWorker(c.kind, c.shiftMs, leaseMs, ledger) }));
    await Promise.all(started.map((c) => c.worker.ready));
    const jobs: { id: string; shiftMs: number; pid: number | undefined }[] = [];
    for (const c of started) {
      for (const deadlineMs of [undefined, 300_000]) {
        const { job } = await deployment.admin.enqueue({ kind: c.kind, payload: { holdMs }, ...(deadlineMs === undefined ? {} : { deadlineMs }) });
        jobs.push({ id: job.id, shiftMs: c.shiftMs, pid: c.worker.child.pid });
      }
    }
    const finished = await waitFor(
      'the four jobs to end',
      async () => {
        const all = await Promise.all(jobs.map((j) => deployment.admin.getJob(j.id)));
        return all.every((job) => job.status !== 'queued' && job.status !== 'running') ? all : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    const readAt = Date.now();
    for (const [index, job] of finished.entries()) {
      const expected = jobs[index]!;
      expect({ status: job.status, attempts: job.attempts, epoch: job.epoch }).toEqual({ status: 'succeeded', attempts: 1, epoch: 1 });
      const result = job.result as ClockRun;
      expect(result.pid).toBe(expected.pid);
      expectShifted(result, expected.shiftMs, readAt);
      const attempts = await deployment.admin.attempts(job.id);
      expect(attempts.map((a) => a.outcome)).toEqual(['succeeded']);
      // On the coordinator's clock the attempt outlived the lease it started with: renewals, not the worker's clock, kept it.
      expect(Date.parse(attempts[0]!.endedAt!) - Date.parse(attempts[0]!.startedAt)).toBeGreaterThan(leaseMs);
    }
    expect(ledgerOf(ledger)).toHaveLength(jobs.length);
  });

  it.concurrent('a frozen lease holder (clock behind) loses its lease after the lease length on the coordinator clock, and is refused as stale when it wakes', async () => {
    const ledger = join(dir, 'stale.jsonl');
    writeFileSync(ledger, '');
    const leaseMs = 1_500;
    // Behind, and slow: frozen for seconds, its clock moves a tenth as far, so by its own reckoning its lease is still live.
    // One slot: busy with the job, it has no long poll parked at the coordinator that could lease the job again while frozen.
    const holder = skewedWorker('stale', -HOURS_5, leaseMs, ledger, { rate: 0.1, concurrency: 1 });
    await holder.ready;
    const { job: enqueued } = await deployment.admin.enqueue({ kind: 'stale', payload: { holdMs: 2_500 } });
    const first = await waitFor('the holder to start the job', () => ledgerOf(ledger).find((r) => r.id === enqueued.id));
    holder.child.kill('SIGSTOP');
    const frozenAt = Date.now();
    expect(first.pid).toBe(holder.child.pid);
    expectShifted(first, -HOURS_5, frozenAt);

    // A long lease for the rescuer: only the holder's lease is meant to expire, however slow the machine.
    const rescuer = skewedWorker('stale', HOURS_5, 20_000, ledger);
    const done = await waitFor(
      'the rescuer to complete the job',
      async () => {
        const job = await deployment.admin.getJob(enqueued.id);
        return job.status === 'succeeded' ? job : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    holder.child.kill('SIGCONT');
    // The resumed holder renews or completes with its old token, and is told its lease is gone.
    await waitFor('the resumed holder to be refused', () => /stale_lease/.test(holder.output()), { timeoutMs: 15_000 });

    const final: Job = await deployment.admin.getJob(enqueued.id);
    const attempts = await deployment.admin.attempts(enqueued.id);
    expect(attempts.map((a) => [a.epoch, a.outcome, a.workerId])).toEqual([
      [1, 'expired', expect.stringContaining('stale-behind')],
      [2, 'succeeded', expect.stringContaining('stale-ahead')],
    ]);
    expect({ status: final.status, epoch: final.epoch, attempts: final.attempts }).toEqual({ status: 'succeeded', epoch: 2, attempts: 2 });
    expect(final.result).toEqual(done.result);
    expect((final.result as ClockRun).pid).toBe(rescuer.child.pid);
    expect((final.result as ClockRun).fence).toBe(2);
    expect(attempts.map((a) => [a.epoch, a.outcome])).toEqual([
      [1, 'expired'],
      [2, 'succeeded'],
    ]);
    const held = attempts[0]!;
    const endedAt = Date.parse(held.endedAt!);
    // Not early: the lease lasted at least its length on the coordinator's clock.
    expect(endedAt - Date.parse(held.startedAt)).toBeGreaterThanOrEqual(leaseMs);
    // Not kept alive: it ended within a lease length (and the reaper's period, and a loaded machine's slack) of the freeze,
    // although the holder's own clock put the end of its lease five hours away.
    expect(endedAt - frozenAt).toBeLessThan(leaseMs + 5_000);
    expect(
      ledgerOf(ledger)
        .filter((r) => r.id === enqueued.id)
        .map((r) => [r.fence, r.pid]),
    ).toEqual([
      [1, holder.child.pid],
      [2, rescuer.child.pid],
    ]);
  });
});
