/**
 * queue.enqueueInTransaction: the job exists if and only if the
 * application's own transaction commits, on both backends. A rolled-back
 * transaction leaves no job and no reserved idempotency key; a committed one
 * wakes a worker leasing in process.
 */

import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openQueue, Worker } from '../../src/index.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';

type Kinds = { ship: { order: string } };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

describe('enqueueInTransaction on SQLite (the application’s better-sqlite3 handle)', () => {
  async function setup() {
    const dir = mkdtempSync(join(tmpdir(), 'lh-tx-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const db = new Database(join(dir, 'app.db'));
    cleanups.push(async () => void db.close());
    db.exec('CREATE TABLE orders (id TEXT PRIMARY KEY)');
    const queue = await openQueue<Kinds>({ sqlite: db });
    cleanups.push(() => queue.close());
    const insertOrder = db.prepare('INSERT INTO orders (id) VALUES (?)');
    const place = db.transaction((order: string, rollback: boolean) => {
      insertOrder.run(order);
      const job = queue.enqueueInTransaction(db, { kind: 'ship', payload: { order }, idempotencyKey: `ship-${order}` });
      if (rollback) throw new Error('the application rolls back');
      return job;
    });
    return { db, queue, place };
  }

  it('keeps the job only when the application’s transaction commits, and frees the key of a rolled-back one', async () => {
    const { db, queue, place } = await setup();
    const kept = place('o1', false);
    expect((await queue.get(kept.id)).status).toBe('queued');
    expect(() => place('o2', true)).toThrow('the application rolls back');
    expect(db.prepare('SELECT count(*) AS n FROM orders').get()).toEqual({ n: 1 });
    expect((await queue.list()).jobs.map((job) => job.id)).toEqual([kept.id]);
    // The rolled-back key was never reserved: the same key now makes a new job.
    const again = place('o2', false);
    expect(again.id).not.toBe(kept.id);
    // A committed key replays, as enqueue does; another body under it conflicts.
    expect(db.transaction(() => queue.enqueueInTransaction(db, { kind: 'ship', payload: { order: 'o1' }, idempotencyKey: 'ship-o1' }))().id).toBe(kept.id);
    expect(() => db.transaction(() => queue.enqueueInTransaction(db, { kind: 'ship', payload: { order: 'x' }, idempotencyKey: 'ship-o1' }))()).toThrow(
      expect.objectContaining({ code: 'idempotency_conflict' }),
    );
    // Outside a transaction it refuses, rather than committing on its own.
    expect(() => queue.enqueueInTransaction(db, { kind: 'ship', payload: { order: 'y' }, idempotencyKey: 'y' })).toThrow(/inside the application/);
    // The same checks as POST /jobs, synchronously.
    expect(() =>
      db.transaction(() => queue.enqueueInTransaction(db, { kind: 'ship', payload: { order: 'z' }, idempotencyKey: 'z', maxAttempts: 0 }))(),
    ).toThrow(expect.objectContaining({ code: 'invalid_request' }));
  });

  it('applies a kind registered through the Queue at once, without waiting for the kinds to load again', async () => {
    const { db, queue, place } = await setup();
    await queue.putKind('ship', { payloadSchema: { type: 'object', properties: { order: { type: 'string', pattern: '^o' } }, required: ['order'] } });
    expect(place('o5', false).kind).toBe('ship');
    expect(() => place('x5', false)).toThrow(expect.objectContaining({ code: 'invalid_payload' }));
    expect(db.prepare('SELECT count(*) AS n FROM orders').get()).toEqual({ n: 1 });
  });

  it('wakes a worker that is waiting in the same process', async () => {
    const { queue, place } = await setup();
    const started: string[] = [];
    const worker = new Worker({ queue, waitMs: 10_000, handlers: { ship: (ctx) => void started.push(ctx.payload.order) } });
    const running = worker.run();
    cleanups.push(async () => {
      await worker.stop({ graceMs: 0 });
      await running;
    });
    const job = place('o9', false);
    expect((await queue.waitFor(job.id, { timeoutMs: 10_000 })).status).toBe('succeeded');
    expect(started).toEqual(['o9']);
  });
});

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('enqueueInTransaction on PostgreSQL (the application’s pg client)', () => {
  async function setup() {
    const schema = `lh_test_tx_${randomBytes(6).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    cleanups.push(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${schema}_orders`);
      await pool.end();
      await PostgresStore.dropSchema({ connectionString: url, schema });
    });
    await pool.query(`CREATE TABLE ${schema}_orders (id text PRIMARY KEY)`);
    const queue = await openQueue<Kinds>({ pg: pool, schema });
    cleanups.push(() => queue.close());
    async function place(order: string, rollback: boolean) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(`INSERT INTO ${schema}_orders (id) VALUES ($1)`, [order]);
        const before = (await client.query<{ search_path: string }>('SHOW search_path')).rows[0]?.search_path;
        const job = await queue.enqueueInTransaction(client, { kind: 'ship', payload: { order }, idempotencyKey: `ship-${order}` });
        // The application's transaction keeps its own search_path.
        expect((await client.query<{ search_path: string }>('SHOW search_path')).rows[0]?.search_path).toBe(before);
        await client.query(rollback ? 'ROLLBACK' : 'COMMIT');
        return job;
      } finally {
        client.release();
      }
    }
    return { pool, queue, place, schema };
  }

  it('keeps the job only when the application’s transaction commits, and frees the key of a rolled-back one', async () => {
    const { pool, queue, place, schema } = await setup();
    const kept = await place('o1', false);
    expect((await queue.get(kept.id)).status).toBe('queued');
    const dropped = await place('o2', true);
    expect(await queue.get(dropped.id).catch((error: unknown) => error)).toMatchObject({ code: 'not_found' });
    expect((await pool.query(`SELECT count(*)::int AS n FROM ${schema}_orders`)).rows[0]).toEqual({ n: 1 });
    const again = await place('o2', false);
    expect(again.id).not.toBe(dropped.id);
    expect((await queue.get(again.id)).status).toBe('queued');
  });

  it('wakes a waiting worker when the application commits, through NOTIFY', async () => {
    const { queue, place } = await setup();
    const worker = new Worker({ queue, waitMs: 10_000, handlers: { ship: () => null } });
    const running = worker.run();
    cleanups.push(async () => {
      await worker.stop({ graceMs: 0 });
      await running;
    });
    const job = await place('o9', false);
    expect((await queue.waitFor(job.id, { timeoutMs: 10_000 })).status).toBe('succeeded');
  });
});
