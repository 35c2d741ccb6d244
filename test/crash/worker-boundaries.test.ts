/**
 * Crash boundaries of a worker, on SQLite (the worker speaks only HTTP, so the
 * backend does not change what it sees): a real `leasehold worker` process
 * dies by SIGKILL after its claim, inside its handler, or after its handler
 * and before its complete; a second worker process must then run the job
 * again once the first lease expires, and the result committed is the second
 * execution's, once. The effects ledger (one line per handler execution, from
 * the fixture handlers) shows how often the work ran and in which process.
 *
 * The last test crashes the coordinator instead, after it committed a real
 * worker's complete: the worker's own retry reaches the restarted coordinator
 * and is answered 200, and the work is not done again.
 */

import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.js';
import { startCrashDeployment, type CrashDeployment } from './crash-deployment.js';
import { readJsonLines } from '../support/json-lines.js';

interface Execution {
  readonly id: string;
  readonly fence: number;
  readonly pid: number;
}

function executions(ledger: string): Execution[] {
  return readJsonLines<Execution>(ledger);
}

/** A lease short enough that a dead worker's job comes back quickly, long enough for a loaded machine. */
const LOST_LEASE_MS = 500;

describe('worker crash boundaries (sqlite)', () => {
  let d: CrashDeployment;

  beforeAll(async () => {
    d = await startCrashDeployment('sqlite');
    await d.serve();
  });

  afterAll(async () => {
    await d?.stop();
  });

  /**
   * Enqueues one job, lets worker `lost` (started with `env`) die by SIGKILL,
   * checks that no result exists, then lets worker `second` finish the job.
   */
  async function loseFirstWorker(
    name: string,
    kind: string,
    env: NodeJS.ProcessEnv,
  ): Promise<{ jobId: string; ledger: string; lostPid: number; secondPid: number }> {
    const ledger = join(d.dir, `${name}.jsonl`);
    const lost = d.worker({ workerId: `${name}-lost`, leaseMs: LOST_LEASE_MS, env: { LEDGER_FILE: ledger, ...env } });
    await lost.ready;
    const { job } = await d.client(d.keys.producer).enqueue({ kind, payload: {} }, { idempotencyKey: name });
    expect(await lost.exited).toBe('SIGKILL');
    const admin = d.client(d.keys.admin);
    const afterCrash = await admin.getJob(job.id);
    expect(afterCrash).toMatchObject({ attempts: 1, epoch: 1, result: null });
    expect(afterCrash.status).not.toBe('succeeded');
    expect(await d.resultRows(job.id)).toBe(0);

    const second = d.worker({ workerId: `${name}-second`, leaseMs: 10_000, env: { LEDGER_FILE: ledger } });
    await waitFor('the second worker to finish the job', async () => (await admin.getJob(job.id)).status === 'succeeded', { timeoutMs: 15_000 });
    await second.stop('SIGKILL');
    const done = await admin.getJob(job.id);
    expect(done).toMatchObject({ attempts: 2, epoch: 2, result: { fence: 2, pid: second.child.pid } });
    expect(await d.resultRows(job.id)).toBe(1);
    expect((await admin.attempts(job.id)).map((a) => [a.workerId, a.outcome])).toEqual([
      [`${name}-lost`, 'expired'],
      [`${name}-second`, 'succeeded'],
    ]);
    return { jobId: job.id, ledger, lostPid: lost.child.pid ?? -1, secondPid: second.child.pid ?? -1 };
  }

  it('after the claim commit, before work starts: the lease expires and another worker claims and runs it once', async () => {
    const run = await loseFirstWorker('after-claim', 'ledger', { LEASEHOLD_CRASH_AT: 'worker.after-claim' });
    expect(executions(run.ledger)).toEqual([{ id: run.jobId, fence: 2, pid: run.secondPid }]);
  });

  it('inside the handler: no result; the job is retried by another worker', async () => {
    const run = await loseFirstWorker('in-handler', 'ledger-die', { DIE_IN_HANDLER: '1' });
    expect(executions(run.ledger)).toEqual([
      { id: run.jobId, fence: 1, pid: run.lostPid },
      { id: run.jobId, fence: 2, pid: run.secondPid },
    ]);
  });

  it('after the handler, before the complete: no result; another worker recomputes it', async () => {
    const run = await loseFirstWorker('after-handler', 'ledger', { LEASEHOLD_CRASH_AT: 'worker.after-handler' });
    expect(executions(run.ledger)).toEqual([
      { id: run.jobId, fence: 1, pid: run.lostPid },
      { id: run.jobId, fence: 2, pid: run.secondPid },
    ]);
  });

  it("coordinator dies after committing a worker's complete: the worker's retry is answered 200, the work is not redone", async () => {
    await d.serve('complete.after-commit');
    const ledger = join(d.dir, 'after-complete.jsonl');
    const worker = d.worker({ workerId: 'patient', leaseMs: 20_000, env: { LEDGER_FILE: ledger }, logLevel: 'debug' });
    await worker.ready;
    const { job } = await d.client(d.keys.producer).enqueue({ kind: 'ledger', payload: {} }, { idempotencyKey: 'after-complete' });
    expect(await d.coordinator.exited).toBe('SIGKILL');

    await d.serve();
    await waitFor('the worker to hear that its complete succeeded', () => worker.output().includes('"msg":"job completed"'), { timeoutMs: 20_000 });
    await worker.stop('SIGKILL');
    expect(worker.output()).toContain('coordinator call failed; retrying');
    expect(worker.output()).not.toContain('completion refused');
    const admin = d.client(d.keys.admin);
    expect(await admin.getJob(job.id)).toMatchObject({ status: 'succeeded', attempts: 1, result: { fence: 1, pid: worker.child.pid } });
    expect(await d.resultRows(job.id)).toBe(1);
    expect(executions(ledger)).toEqual([{ id: job.id, fence: 1, pid: worker.child.pid }]);
  });

  it('answered no request with a 5xx: no coordinator logged a warning or an error', () => {
    expect(d.coordinatorWarnings()).toEqual([]);
  });
});
