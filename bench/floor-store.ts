/**
 * `npm run floor`'s first figures, on SQLite: the store's own enqueue
 * statements in transactions of 64 with nothing around them but their
 * bindings, with the schema and without seven of its secondary indexes (what
 * a slimmer schema could reach at most), and the store's jobLease and
 * jobCompleteMany 32 at a time, one after the other (the SQL and commits of
 * end to end, through the store, without a worker or handlers).
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SQL } from '../src/store/sqlite/queries.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams } from '../src/store/store.js';
import { todayJobBindings } from './floor-sqlite.js';

const SLIMMER_SCHEMA = [...['jobs_by_owner', 'jobs_by_tenant'].map((index) => `DROP INDEX ${index}`)];
export const ENQUEUE_VARIANTS: Record<string, readonly string[]> = {
  'the schema': [],
  'without the 2 listing indexes': SLIMMER_SCHEMA,
};

async function withFreshFile<T>(work: (path: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-floor-'));
  try {
    return await work(join(dir, 'floor.db'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The store's enqueue statements for `jobs` jobs in transactions of `perCommit`, with `drops` run on the schema first. */
export async function enqueueRate(drops: readonly string[], jobs: number, perCommit: number): Promise<number> {
  return withFreshFile(async (path) => {
    await SqliteStore.open({ path }).close();
    const db = new Database(path);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('temp_store = MEMORY');
    for (const statement of drops) db.exec(statement);
    const lookup = db.prepare(SQL.jobByIdempotencyKey);
    const insert = db.prepare(SQL.jobInsert);
    const ready = db.prepare(SQL.readyInsert);
    const storage = db.prepare(SQL.counterAddTenant);
    const jobCounter = db.prepare(SQL.counterAddTerms);
    const startedAt = performance.now();
    for (let n = 0; n < jobs; ) {
      db.exec('BEGIN IMMEDIATE');
      let i = 0;
      for (; i < perCommit && n < jobs; i++, n++) {
        const key = `k${n}`;
        const now = Date.now();
        lookup.get('bench', '', key);
        const bindings = todayJobBindings(n, `{"n":${n}}`, now);
        const seq = Number(insert.run(bindings).lastInsertRowid);
        ready.run({ tenant: 'bench', kind: 'noop', groupKey: '', priority: 0, runAfter: now, seq, deadlineAt: null, attempts: 0, epoch: 0 });
      }
      jobCounter.run('bench', 'noop', 'queued', i, 0, 0, 0, 0, 0, 0);
      storage.run('bench', 8 * i, 0, 0, 0);
      db.exec('COMMIT');
    }
    const perSecond = (jobs * 1000) / (performance.now() - startedAt);
    db.close();
    return perSecond;
  });
}

function enqueueParams(n: number): EnqueueParams {
  const payload = { n };
  return {
    tenant: 'bench',
    owner: '',
    idempotencyKey: `k${n}`,
    requestHash: 'h',
    kind: 'noop',
    payload,
    payloadJson: JSON.stringify(payload),
    payloadBytes: 8,
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
  };
}

/** The store's jobLease and jobCompleteMany, `batch` at a time, over `jobs` jobs. */
export async function leaseCompleteRate(jobs: number, batch: number): Promise<number> {
  return withFreshFile(async (path) => {
    const store = SqliteStore.open({ path });
    try {
      for (let n = 0; n < jobs; n += 500) await store.jobEnqueueMany(Array.from({ length: Math.min(500, jobs - n) }, (_, i) => enqueueParams(n + i)));
      const startedAt = performance.now();
      for (let done = 0; done < jobs; ) {
        const leased = await store.jobLease({ tenant: 'bench', workerId: 'floor', kinds: ['noop'], leaseMs: 30_000, max: batch });
        await store.jobCompleteMany(leased.map((job) => ({ tenant: 'bench', id: job.id, token: job.token })));
        done += leased.length;
      }
      return (jobs * 1000) / (performance.now() - startedAt);
    } finally {
      await store.close();
    }
  });
}
