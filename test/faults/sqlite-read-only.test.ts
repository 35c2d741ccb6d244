/**
 * A read-only SQLite database under a running coordinator. We run as root, so
 * chmod would not stop a write; the files are made immutable instead
 * (`chattr +i` on the database, its -wal and the directory), which refuses
 * writes to root too, through file descriptors already open. The -shm file is
 * left writable: SQLite maps it into memory, and a write to an immutable
 * mapped page kills the process with SIGBUS instead of failing a call.
 * Writes answer 503 store_unavailable, reads still answer, and when the
 * files are writable again the coordinator works without a restart.
 *
 * A store opened while the files are immutable gets a read-only connection
 * (SQLite falls back when it cannot open the file for writing): its writes
 * fail with SQLITE_READONLY, also a 503; the second test serves a coordinator
 * from such a connection.
 */

import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { enqueue, get, lease, post } from '../support/http-fixtures.js';
import {
  driverCodeOf,
  expectRefusalsLogged,
  expectStoreUnavailable,
  inspectDatabase,
  startSqliteCoordinator,
  type SqliteFaultCoordinator,
} from './fault-harness.js';

let dir: string;
let c: SqliteFaultCoordinator;
let immutable: readonly string[] = [];

function upsertKind(store: Store): Promise<unknown> {
  const backoff = { baseMs: 10, maxMs: 100 };
  return store.kindUpsert({
    tenant: 't1',
    kind: 'k',
    payloadSchema: null,
    maxPayloadBytes: 1024,
    maxAttempts: 3,
    leaseMs: 1000,
    backoff,
    deadlineMs: null,
    maxResultBytes: 1024,
    maxCheckpointBytes: 1024,
  });
}

function chattr(flag: '+i' | '-i', paths: readonly string[]): void {
  execFileSync('chattr', [flag, ...paths], { stdio: 'pipe' });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-read-only-'));
  const probe = join(dir, 'probe');
  writeFileSync(probe, '');
  try {
    chattr('+i', [probe]);
    chattr('-i', [probe]);
  } catch (error) {
    throw new Error(`chattr +i does not work under ${tmpdir()}; this test needs a filesystem with the immutable flag (ext4, xfs)`, { cause: error });
  }
  rmSync(probe);
  c = await startSqliteCoordinator(join(dir, 'jobs.db'));
});

afterAll(async () => {
  if (immutable.length > 0) chattr('-i', immutable);
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

it('answers writes 503 store_unavailable and reads 200 while the database files are immutable (chattr +i, refused to root), then recovers without a restart', async () => {
  const accepted = new Set<string>();
  for (const n of [1, 2]) {
    const response = await enqueue(c.app, c.keys.producer, { kind: 'email', payload: { n } }, `before-${n}`);
    expect(response.statusCode).toBe(202);
    accepted.add((response.json() as { id: string }).id);
  }
  const [leased] = await lease(c.app, c.keys.worker, { leaseMs: 60_000 });
  expect(leased).toBeDefined();

  immutable = [c.path, `${c.path}-wal`, dir];
  chattr('+i', immutable);
  // The fault is real for root: an append to the WAL is refused.
  expect(() => appendFileSync(`${c.path}-wal`, 'x')).toThrow(/EPERM/);

  const refusals = [
    await enqueue(c.app, c.keys.producer, { kind: 'email', payload: { n: 3 } }, 'during'),
    await post(c.app, c.keys.worker, '/lease', { workerId: 'w1', leaseMs: 60_000 }),
    await post(c.app, c.keys.worker, `/jobs/${leased!.id}/complete`, { token: leased!.token, result: 'r' }),
    ...(await Promise.all(Array.from({ length: 8 }, (_, k) => enqueue(c.app, c.keys.producer, { kind: 'email', payload: { k } }, `burst-${k}`)))),
  ];
  for (const response of refusals) expectStoreUnavailable(response);
  const writeError = await driverCodeOf(() => upsertKind(c.store));
  expect(writeError).toMatch(/^SQLITE_IOERR/);
  // A store opened now gets a read-only connection (SQLite falls back when it cannot open the file for writing).
  const late = SqliteStore.open({ path: c.path });
  const lateError = await driverCodeOf(() => upsertKind(late)).finally(() => late.close());
  expect(lateError).toMatch(/^SQLITE_READONLY/);

  const job = await get(c.app, c.keys.admin, `/jobs/${leased!.id}`);
  expect(job.statusCode).toBe(200);
  expect(job.json()).toMatchObject({ status: 'running' });
  const list = await get(c.app, c.keys.admin, '/jobs');
  expect(list.statusCode).toBe(200);
  expect((list.json() as { jobs: unknown[] }).jobs).toHaveLength(2);
  expect((await c.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  expectRefusalsLogged(c.logLines, /^SQLITE_IOERR/, [c.keys.producer, c.keys.worker, c.keys.admin, leased!.token]);
  console.log(
    `read-only: ${refusals.length} writes refused 503 (${writeError}; a store opened meanwhile: ${lateError}); job, list and health reads answered 200`,
  );

  chattr('-i', immutable);
  immutable = [];

  const retried = await enqueue(c.app, c.keys.producer, { kind: 'email', payload: { n: 3 } }, 'during');
  expect(retried.statusCode).toBe(202);
  expect(retried.headers['idempotent-replayed']).toBeUndefined();
  accepted.add((retried.json() as { id: string }).id);
  expect((await post(c.app, c.keys.worker, `/jobs/${leased!.id}/complete`, { token: leased!.token, result: 'r' })).statusCode).toBe(200);
  const rest = await lease(c.app, c.keys.worker, { max: 10, leaseMs: 60_000 });
  expect(rest).toHaveLength(2);
  for (const each of rest) expect((await post(c.app, c.keys.worker, `/jobs/${each.id}/complete`, { token: each.token, result: 'r' })).statusCode).toBe(200);

  const state = inspectDatabase(c.path);
  expect(state.halfWritten).toEqual([]);
  expect(state.jobIds).toEqual(accepted);
  expect(state.byStatus).toEqual({ succeeded: 3 });
});

it('answers writes 503 store_unavailable (SQLITE_READONLY) and reads 200 on a read-only connection', async () => {
  const readOnly = await startSqliteCoordinator(c.path, { readonly: true });
  try {
    const before = inspectDatabase(c.path);
    expectStoreUnavailable(await enqueue(readOnly.app, c.keys.producer, { kind: 'email', payload: { n: 9 } }, 'read-only'));
    expectStoreUnavailable(await post(readOnly.app, c.keys.worker, '/lease', { workerId: 'w1' }));
    expect(await driverCodeOf(() => upsertKind(readOnly.store))).toMatch(/^SQLITE_READONLY/);
    const list = await get(readOnly.app, c.keys.admin, '/jobs');
    expect(list.statusCode).toBe(200);
    expect((list.json() as { jobs: unknown[] }).jobs).toHaveLength(before.jobIds.size);
    expect(inspectDatabase(c.path)).toEqual(before);
    expectRefusalsLogged(readOnly.logLines, /^SQLITE_READONLY/, [c.keys.producer, c.keys.worker]);
  } finally {
    await readOnly.close();
  }
});
