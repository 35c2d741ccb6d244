/**
 * Dedupe and unique keys through the library and the typed client: a Queue's
 * enqueue, enqueueMany and enqueueInTransaction, and LeaseholdClient.enqueue,
 * answer a folded request with `deduplicated: true` and refuse a unique key's
 * duplicate with duplicate_job and `details.jobId`, on both backends.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseholdApiError } from '../../src/client/errors.js';
import { LeaseholdError, openQueue, type Queue } from '../../src/index.js';
import { httpOverQueue } from '../support/queue-http.js';
import { queueTargets } from '../support/queue-targets.js';

type Kinds = { sync: { account: string; version: number } };

const HOUR = 3_600_000;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

describe.each(queueTargets('dedupe'))('dedupe and unique in the library ($name)', (target) => {
  async function open(): Promise<Queue<Kinds>> {
    const created = target.create();
    cleanups.push(created.cleanup);
    const queue = await openQueue<Kinds>({ db: created.db });
    cleanups.push(() => queue.close());
    return queue;
  }

  it('enqueue: a folded job says deduplicated; a unique duplicate throws duplicate_job naming the holder', async () => {
    const queue = await open();
    const dedupe = { key: 'acct-1', mode: 'replace', ttlMs: HOUR } as const;
    const first = await queue.enqueue({ kind: 'sync', payload: { account: '1', version: 1 }, idempotencyKey: 'a', dedupe });
    expect(first.deduplicated).toBeUndefined();
    const again = await queue.enqueue({ kind: 'sync', payload: { account: '1', version: 2 }, idempotencyKey: 'b', dedupe });
    expect(again).toMatchObject({ id: first.id, deduplicated: true });

    const unique = { key: 'acct-2', forMs: HOUR };
    const held = await queue.enqueue({ kind: 'sync', payload: { account: '2', version: 1 }, idempotencyKey: 'c', unique });
    const refused = await queue.enqueue({ kind: 'sync', payload: { account: '2', version: 2 }, idempotencyKey: 'd', unique }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(LeaseholdError);
    expect(refused).toMatchObject({ code: 'duplicate_job', status: 409, details: { jobId: held.id } });
  });

  it('enqueueMany and the client: the same answers as POST /jobs/batch and POST /jobs', async () => {
    const queue = await open();
    const dedupe = { key: 'acct-1', mode: 'drop', ttlMs: HOUR } as const;
    const unique = { key: 'acct-2', forMs: HOUR };
    const results = await queue.enqueueMany([
      { kind: 'sync', payload: { account: '1', version: 1 }, idempotencyKey: 'a', dedupe },
      { kind: 'sync', payload: { account: '1', version: 2 }, idempotencyKey: 'b', dedupe },
      { kind: 'sync', payload: { account: '2', version: 1 }, idempotencyKey: 'c', unique },
      { kind: 'sync', payload: { account: '2', version: 2 }, idempotencyKey: 'd', unique },
    ]);
    expect(results.map((result) => [result.status, result.deduplicated ?? false])).toEqual([
      [202, false],
      [202, true],
      [202, false],
      [409, false],
    ]);
    expect(results[3]?.error).toMatchObject({ code: 'duplicate_job', details: { jobId: results[2]?.job?.id } });

    const http = await httpOverQueue(queue);
    cleanups.push(() => http.close());
    const client = http.client;
    const folded = await client.enqueue({ kind: 'sync', payload: { account: '1', version: 3 }, dedupe });
    expect(folded).toMatchObject({ replayed: false, deduplicated: true, job: { id: results[0]?.job?.id } });
    expect('deduplicated' in folded.job).toBe(false);
    const refused = await client.enqueue({ kind: 'sync', payload: { account: '2', version: 3 }, unique }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(LeaseholdApiError);
    expect(refused).toMatchObject({ status: 409, code: 'duplicate_job', details: { jobId: results[2]?.job?.id } });
  });
});

describe('enqueueInTransaction with dedupe and unique keys (SQLite)', () => {
  it('folds and refuses inside the application’s transaction; a rollback undoes the fold', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lh-dedupe-tx-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const db = new Database(join(dir, 'app.db'));
    cleanups.push(async () => void db.close());
    const queue = await openQueue<Kinds>({ sqlite: db });
    cleanups.push(() => queue.close());
    const dedupe = { key: 'acct-1', mode: 'replace', ttlMs: HOUR } as const;
    const enqueue = (version: number, rollback: boolean) =>
      db.transaction(() => {
        const job = queue.enqueueInTransaction(db, { kind: 'sync', payload: { account: '1', version }, idempotencyKey: `v${version}`, dedupe });
        if (rollback) throw new Error('rolled back');
        return job;
      })();
    const first = enqueue(1, false);
    expect(enqueue(2, false)).toMatchObject({ id: first.id, deduplicated: true });
    expect(() => enqueue(3, true)).toThrow('rolled back');
    const leased = (await queue.workerTransport.leaseResponse({ workerId: 'w', kinds: ['sync'], max: 10 })).jobs;
    expect(leased.map((job) => job.payload)).toEqual([{ account: '1', version: 2 }]);

    const unique = { key: 'acct-2', forMs: HOUR };
    const held = db.transaction(() => queue.enqueueInTransaction(db, { kind: 'sync', payload: { account: '2', version: 1 }, idempotencyKey: 'u1', unique }))();
    expect(() =>
      db.transaction(() => queue.enqueueInTransaction(db, { kind: 'sync', payload: { account: '2', version: 2 }, idempotencyKey: 'u2', unique }))(),
    ).toThrow(expect.objectContaining({ code: 'duplicate_job', details: { jobId: held.id } }));
  });
});
