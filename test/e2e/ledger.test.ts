/**
 * Three worker processes with eight handlers each drain 1,000 jobs. Every
 * handler execution appends to an effects ledger; afterwards the ledger and
 * the coordinator must agree that each job's effect was committed exactly
 * once: one succeeded job per id, whose committed result names one ledger
 * execution of that job.
 */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROOT, startWorker } from '../../bench/processes.js';
import { allJobs } from '../support/all-jobs.js';
import { waitFor } from '../support/wait-for.js';
import { startCluster, type Cluster } from './cluster.js';
import { byJobId, readJsonLines } from '../support/json-lines.js';

const JOBS = 1000;
let cluster: Cluster;
const workers: ReturnType<typeof startWorker>[] = [];

beforeAll(async () => {
  cluster = await startCluster();
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await cluster.stop();
});

it('commits the effect of each of 1,000 jobs exactly once across 3 worker processes', async () => {
  const ledgerFile = join(cluster.dir, 'ledger.jsonl');
  writeFileSync(ledgerFile, '');
  const admin = cluster.client(cluster.keys.admin);
  for (let i = 0; i < 3; i++) {
    workers.push(
      startWorker({
        url: cluster.url,
        key: cluster.keys.worker,
        handlers: join(ROOT, 'dist', 'test', 'fixtures', 'handlers.js'),
        concurrency: 8,
        workerId: `ledger-${i}`,
        env: { LEDGER_FILE: ledgerFile },
      }),
    );
  }
  // All three are polling before the first job exists, so all three take part.
  await Promise.all(workers.map((w) => w.ready));
  const ids: string[] = [];
  for (let from = 0; from < JOBS; from += 250) {
    const batch = Array.from({ length: 250 }, (_, k) => ({ idempotencyKey: `job-${from + k}`, kind: 'ledger', payload: { n: from + k } }));
    const answer = await admin.enqueueBatch(batch);
    for (const result of answer.results) {
      expect(result.status).toBe(202);
      ids.push(result.job!.id);
    }
  }
  await waitFor('all jobs to succeed', async () => (await admin.stats()).counts['succeeded'] === JOBS, { timeoutMs: 60_000, intervalMs: 100 });
  await Promise.all(workers.map((w) => w.stop('SIGTERM')));

  const jobs = await allJobs(admin);
  expect(jobs.size).toBe(JOBS);

  const executions = readJsonLines<{ id: string; fence: number; pid: number }>(ledgerFile);
  const byJob = byJobId(executions);

  const workerPids = new Set(workers.map((w) => w.child.pid));
  const usedPids = new Set<number>();
  for (const id of ids) {
    const job = jobs.get(id);
    expect(job?.status).toBe('succeeded');
    const committed = job!.result as { fence: number; pid: number };
    const runs = byJob.get(id) ?? [];
    // The committed effect is one of this job's executions, under the job's final fence.
    expect(runs.filter((r) => r.fence === committed.fence && r.pid === committed.pid)).toHaveLength(1);
    expect(committed.fence).toBe(job!.epoch);
    usedPids.add(committed.pid);
  }
  // No lease expired in this run, so at-least-once came out as exactly once.
  expect(executions).toHaveLength(JOBS);
  expect([...usedPids].every((pid) => workerPids.has(pid))).toBe(true);
  expect(usedPids.size).toBe(3);
});
