/**
 * The same CLI over PostgreSQL: `leasehold keys create` and `leasehold serve`
 * select the backend from `--db postgres://…` or from LEASEHOLD_DB alone,
 * and two `serve` processes over one schema behave as one queue — a long
 * poll parked on one is woken at once (LISTEN/NOTIFY) by a job enqueued
 * through the other. Runs when DATABASE_URL is set, and then fails rather
 * than skips if the server cannot be reached.
 */

import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, createKey, freePort, startProcess } from '../../bench/processes.js';
import { DATABASE_URL, startPgDeployment, type PgDeployment } from './postgres-deployment.js';

const WAIT_MS = 30_000;

/** `leasehold keys create` with the database named only by LEASEHOLD_DB. */
function createKeyFromEnv(db: string, tenant: string, user: string, role: 'producer' | 'worker' | 'admin'): string {
  const env = { ...process.env, LEASEHOLD_DB: db };
  const run = spawnSync(process.execPath, [CLI, 'keys', 'create', '--tenant', tenant, '--user', user, '--role', role], { encoding: 'utf8', env });
  if (run.status !== 0) throw new Error(`keys create failed: ${run.stderr}`);
  const key = run.stdout.trim().split('\n').pop();
  if (key === undefined || key === '') throw new Error('keys create printed no key');
  return key;
}

describe.skipIf(DATABASE_URL === '')('leasehold serve over PostgreSQL (DATABASE_URL)', () => {
  let deployment: PgDeployment;
  let urlA: string;
  let urlB: string;
  let adminKey: string;
  let workerKey: string;

  beforeAll(async () => {
    deployment = await startPgDeployment();
    adminKey = createKey(deployment.db, 't1', 'ops', 'admin');
    workerKey = createKeyFromEnv(deployment.db, 't1', 'w', 'worker');
    // A re-check interval beyond the wait: only a wake-up can deliver a job to a parked poll. No reaper, so
    // the only lease statement a coordinator runs is the one the test sends.
    const quiet = ['--lease-recheck-ms', '60000', '--reaper-interval-ms', '0'];
    const a = await deployment.serve(quiet);
    urlA = a.url;
    expect(a.process.output()).toContain('"backend":"postgres"');
    const port = await freePort();
    const b = startProcess(['serve', '--port', String(port), '--host', '127.0.0.1', ...quiet], {
      env: { LEASEHOLD_DB: deployment.db },
      readyPattern: /listening on (http:\/\/[^\s"]+)/,
    });
    deployment.track(b.process);
    urlB = (await b.ready).replace(/\/$/, '');
    expect(b.process.output()).toContain('"backend":"postgres"');
  });

  afterAll(async () => {
    await deployment?.stop();
  });

  it('serves requests when the database comes from LEASEHOLD_DB, with keys created either way', async () => {
    const admin = deployment.client(urlB, adminKey);
    expect((await admin.health()).status).toBe('ok');
    const { job } = await admin.enqueue({ kind: 'env', payload: { from: 'LEASEHOLD_DB' } }, { idempotencyKey: 'env-1' });
    const worker = deployment.client(urlB, workerKey);
    const [leased] = await worker.lease({ workerId: 'env-worker' });
    expect(leased?.id).toBe(job.id);
    await worker.complete(job.id, { token: leased?.token ?? '', result: { ok: true } });
    // The other coordinator (--db) reads the same database.
    expect(await deployment.client(urlA, adminKey).getJob(job.id)).toMatchObject({ status: 'succeeded', result: { ok: true } });
  });

  it('wakes a long poll parked on coordinator A at once when a job is enqueued through coordinator B', async () => {
    await deployment.listenersUp(2);
    // A has run no lease yet, so the connection that runs its first one is a new one in this count.
    const before = await deployment.leaseConnections();
    const waiting = deployment.client(urlA, workerKey).lease({ workerId: 'waiter-on-a', waitMs: WAIT_MS });
    // A's first lease attempt found nothing: from here only a wake-up can deliver the job before WAIT_MS.
    await deployment.leaseStatementRan(before);
    const started = performance.now();
    const { job } = await deployment.client(urlB, adminKey).enqueue({ kind: 'wake', payload: {} }, { idempotencyKey: 'wake-1' });
    const [leased] = await waiting;
    const elapsed = performance.now() - started;
    expect(leased?.id).toBe(job.id);
    expect(elapsed).toBeLessThan(5_000);
  });
});
