/**
 * What the store thread adds beyond the conformance suite (which runs it as a
 * backend): results come back as Buffers, errors keep their codes across the
 * thread, and a thread that dies turns every call into store_unavailable
 * instead of a hang.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { ThreadedSqliteStore } from '../../src/store/sqlite/threaded-store.js';

let dir: string;
let store: ThreadedSqliteStore;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-thread-'));
  store = await ThreadedSqliteStore.open({ path: join(dir, 'jobs.db') });
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const job = { tenant: 't', owner: 'u', kind: 'k', payload: { n: 1 }, payloadBytes: 7, maxAttempts: 2, priority: 0, runAfter: null, deadlineMs: null };

it('returns a committed result as a Buffer, as the in-thread store does', async () => {
  await store.jobEnqueue({ ...job, idempotencyKey: 'a', requestHash: 'h' });
  const [leased] = await store.jobLease({ tenant: 't', workerId: 'w', leaseMs: 30_000, max: 1 });
  expect(leased).toBeDefined();
  const body = Buffer.from('{"ok":true}');
  await store.jobComplete({ tenant: 't', id: leased!.id, token: leased!.token, result: { contentType: 'application/json', body } });
  const read = await store.jobGet({ id: leased!.id, scope: { tenant: 't' } });
  expect(Buffer.isBuffer(read?.result?.body)).toBe(true);
  expect(read?.result?.body.toString('utf8')).toBe('{"ok":true}');
});

it('answers store_unavailable for pending and later calls once the thread is gone', async () => {
  const thread = (store as unknown as { thread: Worker }).thread;
  const pending = store.jobEnqueue({ ...job, idempotencyKey: 'b', requestHash: 'h' });
  await thread.terminate();
  await expect(pending).rejects.toMatchObject({ code: 'store_unavailable' });
  await expect(store.ping()).rejects.toMatchObject({ code: 'store_unavailable' });
});

it('rejects, not hangs, when the database cannot be created', async () => {
  const notADirectory = join(dir, 'a-file');
  writeFileSync(notADirectory, '');
  await expect(ThreadedSqliteStore.open({ path: join(notADirectory, 'jobs.db') })).rejects.toThrow(/EEXIST|ENOTDIR|not a directory/);
});
