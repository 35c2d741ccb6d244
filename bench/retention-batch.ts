/**
 * How long one retention batch takes (docs/SCALING.md): `--jobs` finished jobs
 * (each with an attempt and a small result) on a fresh database, then purged
 * in batches of `--batch`. PostgreSQL: the time of each Store.jobPurge call
 * (one transaction). SQLite: the store is closed and the batches run on a
 * connection of their own with the store's statements (retention.ts) and
 * synchronous=FULL, timing the two parts that hold the write lock, the
 * batch's statements and its commit, and the vacuum step after it. Prints
 * medians and the slowest.
 *
 *   node dist/bench/retention-batch.js [--db sqlite|postgres://…] [--jobs 20000] [--batch 100]
 */

import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { openStore } from '../src/cli/open-store.js';
import { CounterMoves } from '../src/store/sqlite/counter-moves.js';
import { prepareStatements } from '../src/store/sqlite/database.js';
import { RetentionStatements } from '../src/store/sqlite/retention.js';
import { freshDatabase } from './fresh-db.js';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { db: { type: 'string', default: 'sqlite' }, jobs: { type: 'string', default: '20000' }, batch: { type: 'string', default: '100' } },
  });
  const jobs = Number(values.jobs);
  const batch = Number(values.batch);
  const fresh = await freshDatabase(values.db, 'retention-batch');
  const store = await openStore(fresh.db);
  try {
    const payload = { to: 'someone@example.com', body: 'x'.repeat(200) };
    for (let done = 0; done < jobs; done += 500) {
      const count = Math.min(500, jobs - done);
      await store.jobEnqueueMany(
        Array.from({ length: count }, (_, i) => ({
          tenant: 't1',
          owner: 'bench',
          idempotencyKey: `k-${done + i}`,
          requestHash: `h-${done + i}`,
          kind: 'mail',
          payload,
          maxAttempts: 1,
          priority: 0,
          runAfter: null,
          deadlineMs: null,
          payloadBytes: 240,
        })),
      );
      const leased = await store.jobLease({ tenant: 't1', workerId: 'w', leaseMs: 60_000, max: count });
      const result = { contentType: 'application/json', body: Buffer.from('{"sent":true}') };
      await store.jobCompleteMany(leased.map((job) => ({ tenant: 't1', id: job.id, token: job.token, result })));
    }
    if (store.backend === 'sqlite') {
      await store.close();
      console.log(JSON.stringify({ backend: 'sqlite', jobs, batch, ...sqliteBatches(fresh.db, batch) }));
    } else {
      const times: number[] = [];
      for (;;) {
        const t0 = performance.now();
        const { deleted } = await store.jobPurge({ status: 'succeeded', olderThanMs: 0, kindRetention: false, limit: batch });
        if (deleted === 0) break;
        times.push(performance.now() - t0);
      }
      console.log(JSON.stringify({ backend: 'postgres', jobs, batch, batches: times.length, transaction: summary(times) }));
    }
  } finally {
    await store.close();
    await fresh.cleanup();
  }
}

function summary(times: number[]): { medianMs: number; maxMs: number } {
  const sorted = [...times].sort((a, b) => a - b);
  return { medianMs: Number((sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(2)), maxMs: Number((sorted[sorted.length - 1] ?? 0).toFixed(2)) };
}

function sqliteBatches(path: string, batch: number): Record<string, unknown> {
  const db = new Database(path);
  db.pragma('synchronous = FULL');
  const statements = new RetentionStatements(db);
  const moves = new CounterMoves(prepareStatements(db));
  const work: number[] = [];
  const commit: number[] = [];
  const vacuum: number[] = [];
  try {
    for (;;) {
      const t0 = performance.now();
      db.exec('BEGIN IMMEDIATE');
      const deleted = statements.purge({ status: 'succeeded', olderThanMs: 0, kindRetention: false, limit: batch }, Date.now(), moves);
      moves.apply();
      const t1 = performance.now();
      db.exec('COMMIT');
      const t2 = performance.now();
      db.exec('BEGIN IMMEDIATE');
      statements.vacuumStep();
      db.exec('COMMIT');
      if (deleted === 0) break;
      work.push(t1 - t0);
      commit.push(t2 - t1);
      vacuum.push(performance.now() - t2);
    }
  } finally {
    db.close();
  }
  const locked = work.map((w, i) => w + (commit[i] ?? 0));
  return { batches: work.length, statements: summary(work), commit: summary(commit), lockHeld: summary(locked), vacuumStep: summary(vacuum) };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
