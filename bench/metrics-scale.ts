/**
 * GET /metrics and GET /stats beside a large table: N jobs of one tenant
 * (half of them finished) seeded through the Store API, then a coordinator
 * process over the same database answers each 20 times over HTTP (undici);
 * prints the medians beside the same figures on an empty database.
 *
 *   node dist/bench/metrics-scale.js [--jobs 1000000] [--db sqlite|postgres://…]
 */

import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { PostgresStore } from '../src/store/postgres/postgres-store.js';
import type { EnqueueParams, Store } from '../src/store/store.js';
import { freshDatabase } from './fresh-db.js';
import { createKey, median, startCoordinator } from './processes.js';

const { values: args } = parseArgs({ options: { jobs: { type: 'string', default: '1000000' }, db: { type: 'string', default: 'sqlite' } } });
const JOBS = Number(args.jobs);

async function open(db: string): Promise<Store> {
  return db.startsWith('postgres') ? PostgresStore.connect({ connectionString: db }) : SqliteStore.open({ path: db });
}

function job(i: number): EnqueueParams {
  const key = `m-${i}`;
  return {
    tenant: 'bench',
    owner: 'bench',
    idempotencyKey: key,
    requestHash: key,
    kind: i % 2 === 0 ? 'a' : 'b',
    payload: { i },
    payloadBytes: 9,
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
  };
}

async function seed(db: string, count: number): Promise<void> {
  const store = await open(db);
  try {
    for (let from = 0; from < count; from += 1_000) {
      await store.jobEnqueueMany(Array.from({ length: Math.min(1_000, count - from) }, (_, k) => job(from + k)));
      // Every other batch is leased and completed, so half the table is history.
      if ((from / 1_000) % 2 === 0) {
        const leased = await store.jobLease({ tenant: 'bench', workerId: 'seed', leaseMs: 60_000, max: 1_000 });
        await store.jobCompleteMany(leased.map((l) => ({ tenant: 'bench', id: l.id, token: l.token })));
      }
    }
  } finally {
    await store.close();
  }
}

async function timeRoutes(db: string): Promise<{ metricsMs: number; statsMs: number }> {
  const key = createKey(db, 'bench', 'bench', 'admin');
  const { process: coordinator, url } = await startCoordinator(db);
  const pool = new Pool(url, { connections: 1 });
  try {
    const time = async (path: string): Promise<number> => {
      const samples: number[] = [];
      for (let i = 0; i < 21; i++) {
        const started = performance.now();
        const answer = await pool.request({ method: 'GET', path, headers: { authorization: `Bearer ${key}` } });
        await answer.body.text();
        if (answer.statusCode !== 200) throw new Error(`${path} answered ${answer.statusCode}`);
        if (i > 0) samples.push(performance.now() - started);
      }
      return median(samples);
    };
    return { metricsMs: await time('/metrics'), statsMs: await time('/stats') };
  } finally {
    await pool.close();
    await coordinator.stop();
  }
}

for (const count of [10, JOBS]) {
  const { db, cleanup } = await freshDatabase(String(args.db), `metrics-${count}`);
  try {
    const started = performance.now();
    await seed(db, count);
    const seededIn = (performance.now() - started) / 1000;
    const { metricsMs, statsMs } = await timeRoutes(db);
    console.log(
      `${String(count).padStart(9)} jobs (seeded in ${seededIn.toFixed(0)} s): GET /metrics median ${metricsMs.toFixed(2)} ms, GET /stats median ${statsMs.toFixed(2)} ms (20 calls each)`,
    );
  } finally {
    await cleanup();
  }
}
process.exit(0);
