/**
 * Parts of the job contract (issue 3) that need real processes: a worker
 * process SIGKILLed between two checkpoints, whose job resumes from the
 * second in another worker process; and backpressure configured on the
 * `leasehold serve` command line, refusing enqueues with 503 while reads,
 * leases and completions keep answering.
 */

import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT, startWorker, type RunningProcess } from '../../bench/processes.js';
import { LeaseholdApiError } from '../../src/client/index.js';
import { waitFor } from '../support/wait-for.js';
import { startCluster, type Cluster } from './cluster.js';
import { readJsonLines } from '../support/json-lines.js';

const CHECKPOINT_HANDLERS = join(ROOT, 'dist', 'test', 'fixtures', 'checkpoint-handlers.js');

let cluster: Cluster | undefined;
const workers: RunningProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop('SIGKILL')));
  await cluster?.stop();
  cluster = undefined;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('checkpoints across a crash', () => {
  it('resumes a job from its second checkpoint after its worker was SIGKILLed between the second and the third', async () => {
    cluster = await startCluster();
    const admin = cluster.client(cluster.keys.admin);
    const markers = join(cluster.dir, 'markers');
    mkdirSync(markers);
    const stepLog = join(cluster.dir, 'steps.log');
    writeFileSync(stepLog, '');
    const env = { MARKER_DIR: markers, STEP_LOG: stepLog };
    const workerArgs = { url: cluster.url, key: cluster.keys.worker, handlers: CHECKPOINT_HANDLERS, concurrency: 1, env };

    const doomed = startWorker({ ...workerArgs, workerId: 'doomed', extraArgs: ['--lease-ms', '1000'] });
    workers.push(doomed);
    const { job } = await admin.enqueue({ kind: 'steps', payload: { steps: 3, haltAfter: 1 } }, { idempotencyKey: 'steps' });
    // The marker is written only after checkpoint 1 (the second) is stored; step 2 has not begun.
    await waitFor('the second checkpoint', () => existsSync(join(markers, job.id)));
    doomed.child.kill('SIGKILL');
    await doomed.exited;
    expect((await admin.getJob(job.id)).status).toBe('running');

    const rescuer = startWorker({ ...workerArgs, workerId: 'rescuer', extraArgs: ['--lease-ms', '1000'] });
    workers.push(rescuer);
    const done = await waitFor('the job to succeed', async () => {
      const current = await admin.getJob(job.id);
      return current.status === 'succeeded' ? current : null;
    });

    const first = doomed.child.pid;
    const second = rescuer.child.pid;
    // Steps 0 and 1 ran once, in the killed process; only step 2 ran in the rescuer.
    const executed = readJsonLines<{ step: number; pid: number }>(stepLog);
    expect(executed.map((e) => [e.step, e.pid])).toEqual([
      [0, first],
      [1, first],
      [2, second],
    ]);
    expect(done.result).toEqual({
      done: [
        { step: 0, pid: first },
        { step: 1, pid: first },
        { step: 2, pid: second },
      ],
    });
    const attempts = await admin.attempts(job.id);
    expect(attempts.map((a) => [a.workerId, a.outcome])).toEqual([
      ['doomed', 'expired'],
      ['rescuer', 'succeeded'],
    ]);
  });
});

describe('backpressure on a real coordinator', () => {
  it('answers 503 overloaded with Retry-After at --max-pending-jobs while GET /jobs/{id}, /lease and complete keep answering', async () => {
    const configDir = mkdtempSync(join(tmpdir(), 'leasehold-config-'));
    dirs.push(configDir);
    const configFile = join(configDir, 'coordinator.json');
    // The file sets a looser limit; the flag wins.
    writeFileSync(configFile, JSON.stringify({ backpressure: { maxPendingJobs: 1000, statsCacheMs: 60_000 } }));
    cluster = await startCluster(['--config', configFile, '--max-pending-jobs', '3']);
    const producer = cluster.client(cluster.keys.producer);
    const worker = cluster.client(cluster.keys.worker);

    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await producer.enqueue({ kind: 'k', payload: { i } }, { idempotencyKey: `k${i}` })).job.id);
    const refused = await producer.enqueue({ kind: 'k', payload: { i: 3 } }, { idempotencyKey: 'k3' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(LeaseholdApiError);
    expect((refused as LeaseholdApiError).status).toBe(503);
    expect((refused as LeaseholdApiError).code).toBe('overloaded');
    expect((refused as LeaseholdApiError).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    const raw = await fetch(`${cluster.url}/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${cluster.keys.producer}`, 'content-type': 'application/json', 'idempotency-key': 'k4' },
      body: JSON.stringify({ kind: 'k', payload: { i: 4 } }),
    });
    expect(raw.status).toBe(503);
    expect(raw.headers.get('retry-after')).toMatch(/^\d+$/);

    // Reads, leases and completions are not refused.
    expect((await producer.getJob(ids[0] ?? '')).status).toBe('queued');
    const leased = await worker.lease({ workerId: 'w', max: 3, leaseMs: 60_000 });
    expect(leased.map((j) => j.id).sort()).toEqual([...ids].sort());
    for (const job of leased) expect((await worker.complete(job.id, { token: job.token, result: 'ok' })).status).toBe('succeeded');
    expect((await producer.getJob(ids[0] ?? '')).status).toBe('succeeded');
  });
});
