/**
 * The library's enqueueMany on its own: one process opens a Queue on a fresh
 * SQLite file, sends one untimed batch, then times 20 × enqueueMany(500)
 * (10,000 jobs, durable commits) and prints one JSON line. To compare two
 * builds, run each build's copy in turn, alternating, on the same machine:
 *
 *   node dist/bench/library-enqueue-many.js
 *   node /path/to/other/checkout/dist/bench/library-enqueue-many.js
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { openQueue } from '../src/index.js';

const BATCHES = 20;
const JOBS_PER_BATCH = 500;

const dir = mkdtempSync(join(tmpdir(), 'lh-enqueue-many-'));
const queue = await openQueue({ db: join(dir, 'bench.db') });
const batch = (round: number) =>
  Array.from({ length: JOBS_PER_BATCH }, (_, i) => ({ kind: 'bench', payload: { round, i, text: 'x'.repeat(64) }, idempotencyKey: `k-${round}-${i}` }));
try {
  await queue.enqueueMany(batch(-1));
  const started = performance.now();
  for (let round = 0; round < BATCHES; round++) {
    const results = await queue.enqueueMany(batch(round));
    if (results.some((result) => result.status !== 202)) throw new Error(`batch ${round} had a refused job`);
  }
  const ms = performance.now() - started;
  const jobs = BATCHES * JOBS_PER_BATCH;
  console.log(JSON.stringify({ jobs, ms: Math.round(ms), jobsPerSecond: Math.round(jobs / (ms / 1000)), perBatchMs: Number((ms / BATCHES).toFixed(2)) }));
} finally {
  await queue.close();
  rmSync(dir, { recursive: true, force: true });
}
