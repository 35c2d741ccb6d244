/**
 * SQLite-specific behaviour that the conformance suite cannot see: group
 * commit, durability settings, the schema's own invariants, and two processes
 * sharing one file.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_BACKOFF } from '../../src/core/backoff.js';
import { ManualClock } from '../../src/core/clock.js';
import { sharedFilesOf, Watchers } from '../../src/store/sqlite/availability.js';
import { SQL } from '../../src/store/sqlite/queries.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams } from '../../src/store/store.js';

let dir: string;
let store: SqliteStore;
let clock: ManualClock;

function enqueueParams(key: string, overrides: Partial<EnqueueParams> = {}): EnqueueParams {
  return {
    tenant: 't1',
    owner: 'u1',
    idempotencyKey: key,
    requestHash: `hash-${key}`,
    kind: 'email',
    payload: { to: key },
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 10,
    ...overrides,
  };
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-sqlite-'));
  clock = new ManualClock();
  store = SqliteStore.open({ path: join(dir, 'jobs.db'), clock });
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('SqliteStore', () => {
  it('opens in WAL mode with synchronous=FULL', () => {
    const db = new Database(join(dir, 'jobs.db'), { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    db.close();
    // synchronous is a setting of each connection: read it on the one the store writes through (2 = FULL).
    // The store has no other connection that writes; the stats reader's is opened read-only.
    const own = (store as unknown as { readonly db: Database.Database }).db;
    expect(own.readonly).toBe(false);
    expect(own.pragma('synchronous', { simple: true })).toBe(2);
    expect(own.pragma('journal_mode', { simple: true })).toBe('wal');
  });

  it('commits concurrent enqueues together and keeps each outcome separate', async () => {
    const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => store.jobEnqueue(enqueueParams(`k${i}`))));
    expect(outcomes.every((o) => o.kind === 'created')).toBe(true);
    expect(new Set(outcomes.map((o) => (o.kind === 'created' ? o.job.id : ''))).size).toBe(200);
    const again = await store.jobEnqueue(enqueueParams('k7'));
    expect(again.kind).toBe('replayed');
    const conflict = await store.jobEnqueue(enqueueParams('k7', { requestHash: 'other' }));
    expect(conflict.kind).toBe('conflict');
  });

  it('rejects a status the schema does not allow, whatever the code does', () => {
    const db = new Database(join(dir, 'jobs.db'));
    expect(() =>
      db
        .prepare(
          `INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status, max_attempts, run_after, created_at)
           VALUES ('x', 't', 'o', 'k', 'h', 'k', '{}', 2, 'bogus', 1, 0, 0)`,
        )
        .run(),
    ).toThrow(/CHECK constraint failed/);
    db.close();
  });

  it('leases by priority then runAfter, fences with epoch and token, and expires by its own clock', async () => {
    await store.jobEnqueue(enqueueParams('low'));
    await store.jobEnqueue(enqueueParams('high', { priority: 5 }));
    const [first, second] = await store.jobLease({ tenant: 't1', workerId: 'w1', leaseMs: 1000, max: 2 });
    expect(first?.payload).toEqual({ to: 'high' });
    expect(second?.payload).toEqual({ to: 'low' });
    expect(first?.epoch).toBe(1);
    expect(first?.token).not.toBe(second?.token);
    clock.advance(1000);
    const [again] = await store.jobLease({ tenant: 't1', workerId: 'w2', leaseMs: 1000, max: 1 });
    expect(again?.id).toBe(first?.id);
    expect(again?.epoch).toBe(2);
    expect(again?.attempt).toBe(2);
    const stale = await store.jobComplete({ tenant: 't1', id: first!.id, token: first!.token });
    expect(stale).toEqual({ kind: 'rejected', code: 'stale_lease' });
    const done = await store.jobComplete({
      tenant: 't1',
      id: again!.id,
      token: again!.token,
      result: { contentType: 'application/json', body: Buffer.from('{"ok":true}') },
    });
    expect(done).toEqual({ kind: 'completed', replayed: false });
    const replay = await store.jobComplete({ tenant: 't1', id: again!.id, token: again!.token });
    expect(replay).toEqual({ kind: 'completed', replayed: true });
    const attempts = await store.jobAttempts({ scope: { tenant: 't1' }, id: again!.id });
    expect(attempts?.map((a) => a.outcome)).toEqual(['expired', 'succeeded']);
    const stats = await store.stats({ tenant: 't1' });
    expect(stats.leaseExpirations).toBe(2); // both leases of the first call ran out
    expect(stats.counts.succeeded).toBe(1);
  });

  it('fails into backoff, then dead, then requeues with a fresh budget', async () => {
    await store.jobEnqueue(enqueueParams('f', { maxAttempts: 2 }));
    const [a] = await store.jobLease({ tenant: 't1', workerId: 'w', leaseMs: 1000, max: 1 });
    const f1 = await store.jobFail({
      tenant: 't1',
      id: a!.id,
      token: a!.token,
      error: { code: 'boom', message: 'x' },
      retryable: true,
      backoff: DEFAULT_BACKOFF,
    });
    expect(f1.kind === 'failed' && f1.status).toBe('queued');
    const again = await store.jobFail({
      tenant: 't1',
      id: a!.id,
      token: a!.token,
      error: { code: 'boom', message: 'x' },
      retryable: true,
      backoff: DEFAULT_BACKOFF,
    });
    expect(again.kind === 'failed' && again.replayed).toBe(true);
    clock.advance(DEFAULT_BACKOFF.baseMs);
    const [b] = await store.jobLease({ tenant: 't1', workerId: 'w', leaseMs: 1000, max: 1 });
    const f2 = await store.jobFail({
      tenant: 't1',
      id: b!.id,
      token: b!.token,
      error: { code: 'boom', message: 'x' },
      retryable: true,
      backoff: DEFAULT_BACKOFF,
    });
    expect(f2.kind === 'failed' && f2.status).toBe('dead');
    const requeued = await store.jobRequeue({ scope: { tenant: 't1' }, id: b!.id, maxAttempts: 4 });
    expect(requeued.kind === 'requeued' && requeued.job.status).toBe('queued');
    expect(requeued.kind === 'requeued' && requeued.job.attempts).toBe(0);
  });
});

describe('another connection holding the write lock', () => {
  it('is waited for off the event loop: reads and timers go on, and the write commits once the lock is free', async () => {
    const first = await store.jobEnqueue(enqueueParams('before'));
    const other = new Database(join(dir, 'jobs.db'));
    other.exec('BEGIN IMMEDIATE');
    let settled = false;
    const write = store.jobEnqueue(enqueueParams('during')).finally(() => {
      settled = true;
    });
    // While the write waits for the lock, this test's own timer and a read still run. A wait inside BEGIN would
    // hold the thread for the whole busy timeout (5 s here) before the timer could fire.
    const sleptFrom = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(performance.now() - sleptFrom).toBeLessThan(2_500);
    expect(settled).toBe(false);
    const read = await store.jobGet({ scope: { tenant: 't1' }, id: first.kind === 'created' ? first.job.id : '' });
    expect(read?.status).toBe('queued');
    // Only this thread can release the lock: had the wait blocked it, the write would have failed after the busy timeout.
    other.exec('ROLLBACK');
    other.close();
    expect((await write).kind).toBe('created');
  });

  it('refuses the write with store_unavailable once the lock was held longer than the busy timeout', async () => {
    await store.close();
    store = SqliteStore.open({ path: join(dir, 'jobs.db'), clock, busyTimeoutMs: 50 });
    const other = new Database(join(dir, 'jobs.db'));
    other.exec('BEGIN IMMEDIATE');
    try {
      await expect(store.jobEnqueue(enqueueParams('refused'))).rejects.toMatchObject({ code: 'store_unavailable' });
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    expect((await store.jobEnqueue(enqueueParams('after'))).kind).toBe('created');
  });

  it('does not stop another store from opening a file whose schema is up to date', async () => {
    const other = new Database(join(dir, 'jobs.db'));
    other.exec('BEGIN IMMEDIATE');
    try {
      // Busy peers can keep the lock for longer than any busy timeout; opening needs only to read the schema version.
      const second = SqliteStore.open({ path: join(dir, 'jobs.db'), clock, busyTimeoutMs: 50 });
      expect(await second.jobGet({ scope: { tenant: 't1' }, id: 'job_unknown' })).toBeNull();
      await second.close();
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
  });
});

describe('statistics', () => {
  it('are read on a connection of their own, off the event loop: a write sent after a slow stats call finishes first', async () => {
    // Enough jobs that the scan takes tens of milliseconds; an enqueue commits in about one.
    const jobs = 150_000;
    for (let from = 0; from < jobs; from += 5_000) {
      await store.jobEnqueueMany(Array.from({ length: 5_000 }, (_, i) => enqueueParams(`bulk-${from + i}`)));
    }
    const order: string[] = [];
    const stats = store.stats({ tenant: 't1' }).then((result) => {
      order.push('stats');
      return result;
    });
    const write = store.jobEnqueue(enqueueParams('late')).then(() => order.push('enqueue'));
    const [result] = await Promise.all([stats, write]);
    // On the coordinator's own connection the scan held the event loop, and the enqueue could not even start before it ended.
    expect(order).toEqual(['enqueue', 'stats']);
    expect(result.counts.queued).toBeGreaterThanOrEqual(jobs);
    expect((await store.stats({ tenant: 't1' })).counts.queued).toBe(jobs + 1);
    expect((await store.stats({ tenant: 'nobody' })).counts.queued).toBe(0);
  });

  it('answers store_unavailable once the store is closed', async () => {
    await store.stats({ tenant: 't1' });
    await store.close();
    await expect(store.stats({ tenant: 't1' })).rejects.toMatchObject({ code: 'store_unavailable' });
  });
});

describe('SqliteStore shared by several processes', () => {
  it('never leases one job to two processes and loses none', async () => {
    const { spawn } = await import('node:child_process');
    const total = 1500;
    const path = join(dir, 'jobs.db');
    const shared = SqliteStore.open({ path });
    await shared.jobEnqueueMany(Array.from({ length: total }, (_, i) => enqueueParams(`m${i}`)));
    await shared.close();
    const fixture = join(process.cwd(), 'dist/test/fixtures/sqlite-leaser.js');
    const children = ['p1', 'p2', 'p3'].map((workerId) => {
      const child = spawn(process.execPath, [fixture, path, workerId], { stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      const ready = new Promise<void>((resolve) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.startsWith('ready\n')) resolve();
        });
      });
      const done = new Promise<string>((resolve, reject) => {
        child.on('error', reject);
        child.on('exit', (code) => (code === 0 ? resolve(out.slice('ready\n'.length)) : reject(new Error(`${workerId} exited ${code}`))));
      });
      return { child, ready, done };
    });
    await Promise.all(children.map((c) => c.ready));
    for (const c of children) c.child.stdin.end('go\n');
    const runs = await Promise.all(children.map((c) => c.done));
    const leases = runs.flatMap((out) =>
      out
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { id: string; outcome: string }),
    );
    expect(leases).toHaveLength(total);
    expect(new Set(leases.map((l) => l.id)).size).toBe(total);
    expect(leases.every((l) => l.outcome === 'completed')).toBe(true);
    const perProcess = runs.map((out) => out.split('\n').filter(Boolean).length);
    expect(perProcess.filter((n) => n > 0).length).toBeGreaterThan(1);
  });
});

describe("noticing another connection's commits", () => {
  it('hears them through the watch on the -wal file, with the safety poll too slow to matter', async () => {
    const path = join(dir, 'jobs.db');
    // A poll of ten minutes: only the file watch can wake this store within the test.
    const watching = SqliteStore.open({ path, crossProcessPollMs: 600_000, watchWalFile: true });
    const writer = SqliteStore.open({ path });
    try {
      let wakeUps = 0;
      let woken: (() => void) | null = null;
      const stop = watching.watchAvailable(() => {
        wakeUps++;
        woken?.();
      });
      for (let i = 0; i < 5; i++) {
        const heard = new Promise<'heard'>((resolve) => {
          woken = () => resolve('heard');
        });
        await writer.jobEnqueue(enqueueParams(`watched-${i}`));
        const outcome = await Promise.race([heard, new Promise<'silent'>((resolve) => setTimeout(() => resolve('silent'), 2_000))]);
        expect(outcome).toBe('heard');
      }
      expect(wakeUps).toBeGreaterThanOrEqual(5);
      stop();
    } finally {
      await writer.close();
      await watching.close();
    }
  });
  it("hears a store's commits through its commit signal file, without the -wal watch", async () => {
    const path = join(dir, 'jobs.db');
    const writer = SqliteStore.open({ path, watchWalFile: true });
    const reader = new Database(path, { readonly: true });
    // Only the signal can wake these watchers: their -wal file does not exist and the poll is ten minutes.
    const watchers = new Watchers(() => reader.pragma('data_version', { simple: true }) as number, 600_000, {
      wal: join(dir, 'no-such-file-wal'),
      signal: sharedFilesOf(path).signal,
    });
    try {
      let woken: (() => void) | null = null;
      const stop = watchers.watchAvailable(() => woken?.());
      for (let i = 0; i < 5; i++) {
        const heard = new Promise<'heard'>((resolve) => {
          woken = () => resolve('heard');
        });
        await writer.jobEnqueue(enqueueParams(`signalled-${i}`));
        const outcome = await Promise.race([heard, new Promise<'silent'>((resolve) => setTimeout(() => resolve('silent'), 2_000))]);
        expect(outcome).toBe('heard');
      }
      stop();
      expect(statSync(sharedFilesOf(path).signal).size).toBe(1);
    } finally {
      watchers.close();
      reader.close();
      await writer.close();
    }
  });
  it("hears another process's commits too, which become visible only after their -wal writes", async () => {
    const { spawn } = await import('node:child_process');
    const { createInterface } = await import('node:readline');
    const { pathToFileURL } = await import('node:url');
    const path = join(dir, 'jobs.db');
    const watching = SqliteStore.open({ path, crossProcessPollMs: 600_000, watchWalFile: true });
    const storeModule = pathToFileURL(join(process.cwd(), 'dist/src/store/sqlite/sqlite-store.js')).href;
    // Enqueues one job for each line it reads; the commit's fsync follows the writes the watch hears.
    const script = `
      import { createInterface } from 'node:readline';
      const { SqliteStore } = await import(${JSON.stringify(storeModule)});
      const store = SqliteStore.open({ path: ${JSON.stringify(path)} });
      console.log('ready');
      for await (const line of createInterface({ input: process.stdin })) {
        await store.jobEnqueue({ tenant: 't1', owner: 'u1', idempotencyKey: line, requestHash: 'h', kind: 'email', payload: {},
          maxAttempts: 3, priority: 0, runAfter: null, deadlineMs: null, payloadBytes: 2 });
        console.log('enqueued');
      }
      await store.close();
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout });
    const nextLine = (): Promise<string> => new Promise((resolve) => lines.once('line', resolve));
    try {
      expect(await nextLine()).toBe('ready');
      let woken: (() => void) | null = null;
      const stop = watching.watchAvailable(() => woken?.());
      for (let i = 0; i < 5; i++) {
        const heard = new Promise<'heard'>((resolve) => {
          woken = () => resolve('heard');
        });
        const enqueued = nextLine();
        child.stdin.write(`from-child-${i}\n`);
        expect(await enqueued).toBe('enqueued');
        const outcome = await Promise.race([heard, new Promise<'silent'>((resolve) => setTimeout(() => resolve('silent'), 2_000))]);
        expect(outcome).toBe('heard');
      }
      stop();
    } finally {
      child.stdin.end();
      await watching.close();
    }
  });
});

describe('query plans', () => {
  it('pages through jobs by walking an index in seq order, never sorting the tenant', () => {
    const db = new Database(join(dir, 'jobs.db'), { readonly: true });
    try {
      const plan = (sql: string, bindings: Record<string, unknown>): string =>
        (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(bindings) as { detail: string }[]).map((row) => row.detail).join('\n');
      const base = { tenant: 't1', kind: null, cursor: 100, limit: 10 };
      const plans = {
        byStatus: plan(SQL.jobListByStatus, { ...base, status: 'dead', owner: null }),
        running: plan(SQL.jobListRunning, { ...base, owner: null }),
        byOwner: plan(SQL.jobListByOwner, { ...base, owner: 'u1' }),
        byTenant: plan(SQL.jobListByTenant, base),
      };
      for (const detail of Object.values(plans)) expect(detail).not.toMatch(/TEMP B-TREE/);
      // Ended and waiting jobs by the one listing index that changes only at a job's end (migration 14).
      expect(plans.byStatus).toMatch(/jobs_by_status_ended \(tenant=\? AND status=\? AND seq<\?\)/);
      // Running jobs from the lease table in seq order (its row id).
      expect(plans.running).toMatch(/SEARCH l USING INTEGER PRIMARY KEY \(rowid<\?\)/);
      // Queued jobs from the ready table, walked by job_ready_listing from the cursor (migration 15).
      const queued = plan(SQL.jobListQueued, { ...base, owner: null });
      expect(queued).toMatch(/SEARCH q USING (COVERING )?INDEX job_ready_listing \(tenant=\? AND seq<\?\)/);
      expect(queued).not.toMatch(/SCAN|TEMP B-TREE/);
      expect(plans.byOwner).toMatch(/jobs_by_owner \(tenant=\? AND owner=\? AND seq<\?\)/);
      // The tenant index, not the whole table: an admin listing reads only its own tenant's rows.
      expect(plans.byTenant).toMatch(/jobs_by_tenant \(tenant=\? AND seq<\?\)/);
    } finally {
      db.close();
    }
  });
});
