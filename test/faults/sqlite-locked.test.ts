/**
 * SQLite locked by another process for longer than the coordinator's busy
 * timeout. A child process takes the write lock with BEGIN EXCLUSIVE, writes a
 * job and a counter change it never commits, and holds the lock until it is
 * killed with SIGKILL. Meanwhile every write (enqueue, lease, renew, complete)
 * answers 503 store_unavailable with Retry-After, reads still answer, and once
 * the holder is gone the same requests succeed; the database has exactly the
 * acknowledged jobs and no trace of the holder's or the refused writes.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROOT } from '../../bench/processes.js';
import { enqueue, get, lease, post } from '../support/http-fixtures.js';
import {
  driverCodeOf,
  expectRefusalsLogged,
  expectStoreUnavailable,
  inspectDatabase,
  startSqliteCoordinator,
  type SqliteFaultCoordinator,
} from './fault-harness.js';

const BUSY_TIMEOUT_MS = 200;

// Runs in the child: the uncommitted ghost job must never become visible.
const HOLD_LOCK = `
const Database = require('better-sqlite3');
const db = new Database(process.env.LOCK_DB, { fileMustExist: true });
db.exec('BEGIN EXCLUSIVE');
db.prepare("INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status, max_attempts, run_after, created_at) VALUES ('ghost', 't1', 'alice', 'ghost', 'x', 'email', '{}', 2, 'queued', 1, 0, 0)").run();
db.prepare("UPDATE tenant_counters SET storage_bytes = storage_bytes + 2 WHERE tenant = 't1'").run();
process.stdout.write('locked\\n');
setInterval(() => {}, 1 << 30);
`;

let dir: string;
let c: SqliteFaultCoordinator;
let holder: ChildProcess | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-locked-'));
  c = await startSqliteCoordinator(join(dir, 'jobs.db'), { busyTimeoutMs: BUSY_TIMEOUT_MS });
});

afterAll(async () => {
  holder?.kill('SIGKILL');
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});

async function holdWriteLock(path: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', HOLD_LOCK], { cwd: ROOT, env: { ...process.env, LOCK_DB: path }, stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: string) => {
      output += chunk;
      if (output.includes('locked\n')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the lock holder exited with ${code} before locking`)));
  });
  return child;
}

it(`answers writes 503 store_unavailable while another process holds the write lock beyond busy_timeout (${BUSY_TIMEOUT_MS} ms), then recovers`, async () => {
  const accepted = new Set<string>();
  for (const n of [1, 2, 3]) {
    const response = await enqueue(c.app, c.keys.producer, { kind: 'email', payload: { n } }, `before-${n}`);
    expect(response.statusCode).toBe(202);
    accepted.add((response.json() as { id: string }).id);
  }
  const [first, second] = await lease(c.app, c.keys.worker, { max: 2, leaseMs: 60_000 });
  expect(first).toBeDefined();
  expect(second).toBeDefined();
  expect((await post(c.app, c.keys.worker, `/jobs/${first!.id}/complete`, { token: first!.token, result: 'a' })).statusCode).toBe(200);

  holder = await holdWriteLock(c.path);
  const refusedAt = performance.now();
  const refusals = [
    await enqueue(c.app, c.keys.producer, { kind: 'email', payload: { n: 4 } }, 'during-lock'),
    await post(c.app, c.keys.worker, '/lease', { workerId: 'w1', leaseMs: 60_000 }),
    await post(c.app, c.keys.worker, `/jobs/${second!.id}/renew`, { token: second!.token }),
    await post(c.app, c.keys.worker, `/jobs/${second!.id}/complete`, { token: second!.token, result: 'b' }),
    ...(await Promise.all(Array.from({ length: 8 }, (_, k) => enqueue(c.app, c.keys.producer, { kind: 'email', payload: { k } }, `burst-${k}`)))),
  ];
  const refusalMs = performance.now() - refusedAt;
  for (const response of refusals) expectStoreUnavailable(response);
  expect(await driverCodeOf(() => c.store.jobReapExpired())).toMatch(/^SQLITE_BUSY/);
  // Readers are not blocked by a writer in WAL mode.
  const during = await get(c.app, c.keys.admin, `/jobs/${second!.id}`);
  expect(during.statusCode).toBe(200);
  expect(during.json()).toMatchObject({ status: 'running' });
  expectRefusalsLogged(c.logLines, /^SQLITE_BUSY/, [c.keys.producer, c.keys.worker, c.keys.admin, second!.token]);
  console.log(`locked: ${refusals.length} requests refused 503 in ${refusalMs.toFixed(0)} ms (busy_timeout ${BUSY_TIMEOUT_MS} ms)`);

  holder.kill('SIGKILL');
  await once(holder, 'exit');
  holder = undefined;

  const retried = await enqueue(c.app, c.keys.producer, { kind: 'email', payload: { n: 4 } }, 'during-lock');
  expect(retried.statusCode).toBe(202);
  // The refused attempt changed nothing, so the retry creates the job rather than replaying it.
  expect(retried.headers['idempotent-replayed']).toBeUndefined();
  accepted.add((retried.json() as { id: string }).id);
  expect((await post(c.app, c.keys.worker, `/jobs/${second!.id}/complete`, { token: second!.token, result: 'b' })).json()).toEqual({
    id: second!.id,
    status: 'succeeded',
  });
  const rest = await lease(c.app, c.keys.worker, { max: 10, leaseMs: 60_000 });
  expect(rest.map((job) => job.id).sort()).toEqual([...accepted].filter((id) => id !== first!.id && id !== second!.id).sort());
  for (const job of rest) expect((await post(c.app, c.keys.worker, `/jobs/${job.id}/complete`, { token: job.token, result: 'c' })).statusCode).toBe(200);

  const state = inspectDatabase(c.path);
  expect(state.halfWritten).toEqual([]);
  expect(state.jobIds).toEqual(accepted);
  expect(state.byStatus).toEqual({ succeeded: 4 });
});
