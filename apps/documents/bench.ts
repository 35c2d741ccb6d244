/**
 * How long reviews take through one process (HTTP surface in process, one
 * worker, the deterministic planner, a fresh SQLite file):
 * `npm run build && node dist/apps/documents/bench.js [reviews]`. Prints the
 * reviews per second and the submit-to-succeeded time at p50 and p99.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeterministicPlanner } from './planner.js';
import { openDocumentService } from './service.js';

const count = Number(process.argv[2] ?? '200');
const dir = mkdtempSync(join(tmpdir(), 'documents-bench-'));
const key = 'bench-secret-key-0001';
const service = await openDocumentService({
  path: join(dir, 'documents.db'),
  planner: new DeterministicPlanner(),
  apiKeys: new Map([[key, 'bench']]),
  concurrency: 8,
});
const text = 'Supplier: ACME Components Ltd\nVAT number: GB123456789\nIBAN: GB82 WEST 1234 5698 7654 32\nTotal: GBP 1250.00';
const started = performance.now();
const latencies = await Promise.all(
  Array.from({ length: count }, async (_, i) => {
    const at = performance.now();
    const response = await service.app.inject({
      method: 'POST',
      url: '/documents',
      headers: { authorization: `Bearer ${key}` },
      payload: { title: `Invoice ${i}`, text },
    });
    const { jobId } = response.json<{ jobId: string }>();
    const job = await service.queue.waitFor(jobId, { timeoutMs: 120_000 });
    if (job.status !== 'succeeded') throw new Error(`review ${jobId} ended ${job.status}`);
    return performance.now() - at;
  }),
);
const elapsed = (performance.now() - started) / 1000;
latencies.sort((a, b) => a - b);
const at = (q: number): number => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0);
console.log(JSON.stringify({ reviews: count, seconds: Number(elapsed.toFixed(2)), perSecond: Math.round(count / elapsed), p50Ms: at(0.5), p99Ms: at(0.99) }));
await service.close();
rmSync(dir, { recursive: true, force: true });
