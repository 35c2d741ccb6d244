/**
 * A full disk under a running coordinator. The database lives on a 4 MiB
 * tmpfs mounted for this file; a filler file takes all of it but 256 KiB, and
 * producers enqueue until SQLite answers SQLITE_FULL. From then on writes
 * answer 503 store_unavailable and reads still answer; every job answered 202
 * is in the database and no refused one is, in part or whole. Deleting the
 * filler frees the disk: the refused requests, sent again with the same
 * Idempotency-Key, create their jobs, and every job runs to the end.
 *
 * Where tmpfs cannot be mounted (not root, a container without the
 * capability) the test is reported as skipped with the reason: a stand-in
 * that refused calls before SQLite ran would make "nothing half-written"
 * true by construction. CI names `tmpfs` in LEASEHOLD_REQUIRE, so there a
 * failed mount fails the test.
 */

import { execFileSync } from 'node:child_process';
import { closeSync, ftruncateSync, fstatSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import type { EnqueueParams } from '../../src/store/store.js';
import { enqueue, get, lease, post } from '../support/http-fixtures.js';
import { itNeeds } from '../support/requirements.js';
import {
  driverCodeOf,
  expectRefusalsLogged,
  expectStoreUnavailable,
  inspectDatabase,
  startSqliteCoordinator,
  type SqliteFaultCoordinator,
} from './fault-harness.js';

// Probed while the file is collected, so that the test can report itself skipped with the reason; the
// real mount happens in beforeAll, so that a run which filters this test out leaves nothing mounted.
const unmountable = whyTmpfsCannotMount();
const mounted = unmountable === null;
let dir: string;
let filler: string;

/** null when a tmpfs can be mounted here, else the reason it cannot. */
function whyTmpfsCannotMount(): string | null {
  const probe = mkdtempSync(join(tmpdir(), 'leasehold-mount-probe-'));
  try {
    const failure = mountTmpfs(probe, '64k');
    if (failure !== null) return failure;
    execFileSync('umount', [probe]);
    return null;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

/** null when mounted, else mount's error. */
function mountTmpfs(target: string, size: string): string | null {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', target], { stdio: 'pipe' });
    return null;
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? '').trim();
    return `mount -t tmpfs failed: ${stderr === '' ? String(error) : stderr}`;
  }
}

/** Writes the filler until the disk refuses, then gives `leaveBytes` back. */
function fillDisk(leaveBytes: number): number {
  const fd = openSync(filler, 'w');
  try {
    for (const chunk of [Buffer.alloc(256 * 1024, 1), Buffer.alloc(4096, 1)]) {
      for (;;) {
        try {
          writeSync(fd, chunk);
        } catch (error) {
          if ((error as { code?: unknown }).code !== 'ENOSPC') throw error;
          break;
        }
      }
    }
    const size = fstatSync(fd).size;
    ftruncateSync(fd, Math.max(0, size - leaveBytes));
    return size;
  } finally {
    closeSync(fd);
  }
}

let c: SqliteFaultCoordinator | undefined;

beforeAll(async () => {
  if (!mounted) return;
  dir = mkdtempSync(join(tmpdir(), 'leasehold-full-disk-'));
  filler = join(dir, 'filler');
  const failure = mountTmpfs(dir, '4m');
  if (failure !== null) throw new Error(`could not mount a tmpfs on ${dir}, though the probe could: ${failure}`);
  c = await startSqliteCoordinator(join(dir, 'jobs.db'));
});

afterAll(async () => {
  if (!mounted) return;
  await c?.close();
  execFileSync('umount', [dir]);
  rmSync(dir, { recursive: true, force: true });
});

itNeeds('tmpfs', unmountable)(
  'answers 503 store_unavailable on a full tmpfs (SQLITE_FULL), keeps every accepted job and none of the refused, and recovers when space is freed',
  async () => {
    const c = coordinator();
    const payload = { text: 'x'.repeat(2000) };
    const accepted = new Set<string>();
    const refusedKeys: string[] = [];
    // One job to hold a lease across the fault, two left queued so that a lease has something to write.
    for (const key of ['first', 'queued-1', 'queued-2']) {
      const answer = await enqueue(c.app, c.keys.producer, { kind: 'email', payload }, key);
      expect(answer.statusCode).toBe(202);
      accepted.add((answer.json() as { id: string }).id);
    }
    const [leased] = await lease(c.app, c.keys.worker, { leaseMs: 60_000 });
    expect(leased).toBeDefined();

    fillDisk(256 * 1024);
    let round = 0;
    // Rounds of 8 concurrent enqueues (one group-commit batch or two) until three rounds in a row were refused.
    for (let refusedRounds = 0; refusedRounds < 3 && round < 200; round++) {
      const keys = Array.from({ length: 8 }, (_, k) => `r${round}-${k}`);
      const answers = await Promise.all(keys.map((key) => enqueue(c.app, c.keys.producer, { kind: 'email', payload }, key)));
      let refused = 0;
      for (const [index, answer] of answers.entries()) {
        const key = keys[index]!;
        if (answer.statusCode === 202) {
          accepted.add((answer.json() as { id: string }).id);
        } else {
          expectStoreUnavailable(answer);
          refusedKeys.push(key);
          refused += 1;
        }
      }
      refusedRounds = refused === keys.length ? refusedRounds + 1 : 0;
    }
    expect(refusedKeys.length).toBeGreaterThanOrEqual(24);
    // A lease or a small completion writes a few hundred bytes, which may still fit in pages the WAL holds
    // free from the refused transactions: then it commits, durably, like any other. What must hold is that
    // each answers 200 (committed) or 503 (nothing written), never anything else, and loses nothing.
    const leasedWhileFull: { id: string; token: string }[] = [];
    const fullLease = await post(c.app, c.keys.worker, '/lease', { workerId: 'w1', leaseMs: 60_000 });
    if (fullLease.statusCode === 200) leasedWhileFull.push(...(fullLease.json() as { jobs: { id: string; token: string }[] }).jobs);
    else expectStoreUnavailable(fullLease);
    const fullComplete = await post(c.app, c.keys.worker, `/jobs/${leased!.id}/complete`, { token: leased!.token, result: 'r' });
    if (fullComplete.statusCode !== 200) expectStoreUnavailable(fullComplete);
    const store = c.store;
    expect(await driverCodeOf(() => store.jobEnqueue(directEnqueue('direct')))).toBe('SQLITE_FULL');
    // Fifty enqueues queued in one tick form one group-commit batch: every one of them fails, with the stable code.
    const batch = await Promise.allSettled(Array.from({ length: 50 }, (_, k) => store.jobEnqueue(directEnqueue(`batch-${k}`))));
    expect(batch.map((outcome) => (outcome.status === 'rejected' ? (outcome.reason as { code?: unknown }).code : 'fulfilled'))).toEqual(
      Array.from({ length: 50 }, () => 'store_unavailable'),
    );
    const read = await get(c.app, c.keys.admin, `/jobs/${leased!.id}`);
    expect(read.statusCode).toBe(200);
    expect(read.json()).toMatchObject({ status: fullComplete.statusCode === 200 ? 'succeeded' : 'running' });

    // While full: the database holds exactly the accepted jobs, and nothing half-written.
    const whileFull = inspectDatabase(c.path);
    expect(whileFull.halfWritten).toEqual([]);
    expect(whileFull.jobIds).toEqual(accepted);
    expectRefusalsLogged(c.logLines, /^SQLITE_FULL$/, [c.keys.producer, c.keys.worker, c.keys.admin, leased!.token]);
    console.log(`full disk: ${accepted.size} jobs accepted (202) before SQLITE_FULL, ${refusedKeys.length} enqueues refused 503 over ${round} rounds of 8`);

    rmSync(filler);

    for (const key of refusedKeys) {
      const again = await enqueue(c.app, c.keys.producer, { kind: 'email', payload }, key);
      expect(again.statusCode).toBe(202);
      // Nothing of the refused request was committed, so the retry creates the job.
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      accepted.add((again.json() as { id: string }).id);
    }
    // Completed now, or (if it committed while full) answered again as the same completion.
    expect((await post(c.app, c.keys.worker, `/jobs/${leased!.id}/complete`, { token: leased!.token, result: 'r' })).statusCode).toBe(200);
    for (const job of leasedWhileFull) {
      expect((await post(c.app, c.keys.worker, `/jobs/${job.id}/complete`, { token: job.token, result: 'r' })).statusCode).toBe(200);
    }
    for (;;) {
      const jobs = await lease(c.app, c.keys.worker, { max: 100, leaseMs: 60_000 });
      if (jobs.length === 0) break;
      const answer = await post(c.app, c.keys.worker, '/complete', { completions: jobs.map((job) => ({ id: job.id, token: job.token, result: 'r' })) });
      expect(answer.statusCode).toBe(200);
    }

    const after = inspectDatabase(c.path);
    expect(after.halfWritten).toEqual([]);
    expect(after.jobIds).toEqual(accepted);
    expect(after.byStatus).toEqual({ succeeded: accepted.size });
  },
);

function coordinator(): SqliteFaultCoordinator {
  if (c === undefined) throw new Error('the coordinator did not start');
  return c;
}

function directEnqueue(idempotencyKey: string): EnqueueParams {
  return {
    tenant: 't1',
    owner: 'alice',
    idempotencyKey,
    requestHash: idempotencyKey,
    kind: 'email',
    payload: { text: 'x'.repeat(2000) },
    payloadBytes: 2013,
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
  };
}
