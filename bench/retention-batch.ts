/**
 * How long one retention batch takes (docs/SCALING.md): `--jobs` finished jobs
 * (each with an attempt and a small result) on a fresh database, then purged
 * in batches of `--batch` through Store.jobPurge, which is one transaction per
 * batch (on SQLite, the time the write lock is held plus the commit's fsync and
 * the vacuum steps after it). Prints the median and the slowest batch.
 *
 *   node dist/bench/retention-batch.js [--db sqlite|postgres://…] [--jobs 20000] [--batch 500]
 */

import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { openStore } from '../src/cli/open-store.js';
import { freshDatabase } from './fresh-db.js';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { db: { type: 'string', default: 'sqlite' }, jobs: { type: 'string', default: '20000' }, batch: { type: 'string', default: '500' } } });
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
          tenant: 't1', owner: 'bench', idempotencyKey: `k-${done + i}`, requestHash: `h-${done + i}`, kind: 'mail', payload,
          maxAttempts: 1, priority: 0, runAfter: null, deadlineMs: null, payloadBytes: 240,
        })),
      );
      const leased = await store.jobLease({ tenant: 't1', workerId: 'w', leaseMs: 60_000, max: count });
      const result = { contentType: 'application/json', body: Buffer.from('{"sent":true}') };
      await store.jobCompleteMany(leased.map((job) => ({ tenant: 't1', id: job.id, token: job.token, result })));
    }
    const times: number[] = [];
    for (;;) {
      const t0 = performance.now();
      const { deleted } = await store.jobPurge({ status: 'succeeded', olderThanMs: 0, kindRetention: false, limit: batch });
      if (deleted === 0) break;
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)] ?? 0;
    console.log(
      JSON.stringify({
        backend: store.backend,
        jobs,
        batch,
        batches: times.length,
        medianMs: Number(median.toFixed(2)),
        maxMs: Number((times[times.length - 1] ?? 0).toFixed(2)),
      }),
    );
  } finally {
    await store.close();
    await fresh.cleanup();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
