/**
 * `npm run floor`: what SQLite itself costs for the embedded bench's two
 * throughput scenarios, without the library around it, each the median of
 * several runs on a fresh file (synchronous=FULL, WAL, the store's schema):
 *
 *   enqueue   the store's own enqueue statements (key lookup and insert per
 *             job, the counter rows once per commit) in transactions of 64, as
 *             the group commit runs them with 64 enqueues in flight; then the
 *             same without seven of the secondary indexes (what a slimmer
 *             schema could reach at most)
 *   lease+complete
 *             the store's jobLease and jobCompleteMany, 32 jobs at a time, one
 *             after the other: the SQL and commits of end to end, without a
 *             worker or handlers
 *
 * A throughput the library would need above these figures cannot come from
 * trimming JavaScript alone. Options: --runs 3, --jobs 20000.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { newJobId } from '../src/core/ids.js';
import type { EnqueueParams } from '../src/store/store.js';
import { SQL } from '../src/store/sqlite/queries.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { median } from './processes.js';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '3' }, jobs: { type: 'string', default: '20000' } } });
const RUNS = Number(args.runs);
const JOBS = Number(args.jobs);
const ENQUEUE_BATCH = 64;
const LEASE_BATCH = 32;

const SLIMMER_SCHEMA = [
  ...['jobs_by_status', 'jobs_by_owner', 'jobs_queued_by_run_after', 'jobs_delayed', 'jobs_by_tenant', 'jobs_available', 'jobs_queued_deadline'].map(
    (index) => `DROP INDEX ${index}`,
  ),
];
const ENQUEUE_VARIANTS: Record<string, readonly string[]> = {
  'the schema': [],
  'without 7 indexes': SLIMMER_SCHEMA,
};

async function withFreshFile<T>(work: (path: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-floor-'));
  try {
    return await work(join(dir, 'floor.db'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function enqueueRate(drops: readonly string[]): Promise<number> {
  return withFreshFile(async (path) => {
    await SqliteStore.open({ path }).close();
    const db = new Database(path);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('temp_store = MEMORY');
    for (const statement of drops) db.exec(statement);
    const lookup = db.prepare(SQL.jobByIdempotencyKey);
    const insert = db.prepare(SQL.jobInsert);
    const storage = db.prepare(SQL.counterAddStorage);
    const jobCounter = db.prepare(SQL.counterAddJobs);
    const startedAt = performance.now();
    for (let n = 0; n < JOBS; ) {
      db.exec('BEGIN IMMEDIATE');
      let i = 0;
      for (; i < ENQUEUE_BATCH && n < JOBS; i++, n++) {
        const key = `k${n}`;
        const now = Date.now();
        lookup.get('bench', '', key);
        insert.run({
          id: newJobId(now),
          tenant: 'bench',
          owner: '',
          idempotencyKey: key,
          requestHash: 'h'.repeat(64),
          kind: 'noop',
          payload: `{"n":${n}}`,
          payloadBytes: 8,
          maxAttempts: 3,
          priority: 0,
          runAfter: now,
          deadlineMs: null,
          deadlineAt: null,
          now,
        });
      }
      jobCounter.run('bench', 'noop', 'queued', i);
      storage.run('bench', 8 * i);
      db.exec('COMMIT');
    }
    const perSecond = (JOBS * 1000) / (performance.now() - startedAt);
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

async function leaseCompleteRate(): Promise<number> {
  return withFreshFile(async (path) => {
    const store = SqliteStore.open({ path });
    try {
      for (let n = 0; n < JOBS; n += 500) await store.jobEnqueueMany(Array.from({ length: Math.min(500, JOBS - n) }, (_, i) => enqueueParams(n + i)));
      const startedAt = performance.now();
      for (let done = 0; done < JOBS; ) {
        const jobs = await store.jobLease({ tenant: 'bench', workerId: 'floor', kinds: ['noop'], leaseMs: 30_000, max: LEASE_BATCH });
        await store.jobCompleteMany(jobs.map((job) => ({ tenant: 'bench', id: job.id, token: job.token })));
        done += jobs.length;
      }
      return (JOBS * 1000) / (performance.now() - startedAt);
    } finally {
      await store.close();
    }
  });
}

function report(name: string, runs: readonly number[]): void {
  console.log(`${name.padEnd(58)} ${Math.round(median(runs))} jobs/s  (runs: ${runs.map(Math.round).join(', ')})`);
}

console.log(`SQLite floor: ${RUNS} runs, ${JOBS} jobs, synchronous=FULL`);
const enqueueRuns = new Map<string, number[]>(Object.keys(ENQUEUE_VARIANTS).map((name) => [name, []]));
// Interleaved, so a slow spell of the machine falls on every variant alike.
for (let run = 0; run < RUNS; run++) for (const [name, drops] of Object.entries(ENQUEUE_VARIANTS)) enqueueRuns.get(name)?.push(await enqueueRate(drops));
for (const [name, runs] of enqueueRuns) report(`enqueue SQL, ${ENQUEUE_BATCH} per commit, ${name}`, runs);
const leaseRuns: number[] = [];
for (let run = 0; run < RUNS; run++) leaseRuns.push(await leaseCompleteRate());
report(`store lease + complete, ${LEASE_BATCH} at a time`, leaseRuns);
