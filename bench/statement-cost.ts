/**
 * `npm run bench:statement-cost -- --db postgres://…`: what the PostgreSQL
 * server spends on each of a job's three writes. One job at a time is
 * enqueued, leased and completed (with a small result) through a
 * PostgresStore whose pool has one connection, and that connection's backend
 * CPU (from /proc/<pid>/schedstat, nanoseconds on a CPU, so only with the
 * server on this machine) is read around each call; the reaper's statistics
 * check runs every 100 jobs, as a coordinator's tick would. The figures
 * include each commit's WAL flush, which the backend does itself, and are
 * medians per operation.
 *
 * `--against <checkout>` compares two builds in one process: the other
 * checkout's compiled store (its dist/, built) on a schema of its own, the
 * two taking turns job by job, so a machine whose speed moves within minutes
 * moves both alike; it prints both builds' medians and this build's minus
 * the other's.
 *
 * Options: --db postgres://… (required), --jobs 1500, --against <dir>.
 */

import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/postgres-store.js';
import type { EnqueueParams } from '../src/store/store.js';
import { freshPostgresDb, type FreshPostgresDb } from './postgres-db.js';
import { median, processOnCpuUs } from './processes.js';

const { values: args } = parseArgs({
  options: { db: { type: 'string', default: '' }, jobs: { type: 'string', default: '1500' }, against: { type: 'string' } },
});
if (!args.db.startsWith('postgres')) throw new Error('--db postgres://… is required');
const JOBS = Number(args.jobs);
const OPERATIONS = ['enqueue', 'lease', 'complete'] as const;
type Operation = (typeof OPERATIONS)[number];

/** The part of PostgresStore this bench drives, as both builds have it. */
type BenchStore = Pick<PostgresStore, 'jobEnqueue' | 'jobLease' | 'jobCompleteMany' | 'jobReapExpired' | 'close'>;
interface StoreClass {
  connect(options: { connectionString: string; schema: string; poolSize: number }): Promise<BenchStore>;
}

interface Side {
  readonly name: string;
  readonly store: BenchStore;
  readonly fresh: FreshPostgresDb;
  readonly schema: string;
  backend: number;
  readonly spent: Record<Operation, number[]>;
}

const job = (key: string): EnqueueParams => ({
  tenant: 't',
  owner: 'u',
  idempotencyKey: key,
  requestHash: 'h',
  kind: 'stamp',
  payload: { key },
  maxAttempts: 3,
  priority: 0,
  runAfter: null,
  deadlineMs: null,
  payloadBytes: 20,
});
const result = { contentType: 'application/json', body: Buffer.from('{"done":true}') };

/** One job through the three writes; with `measure`, the CPU each took goes into the side's figures. */
async function once(side: Side, key: string, measure: boolean): Promise<void> {
  const cpu = (): number => (measure ? processOnCpuUs(side.backend) : 0);
  const c0 = cpu();
  await side.store.jobEnqueue(job(key));
  const c1 = cpu();
  const [leased] = await side.store.jobLease({ tenant: 't', workerId: 'w', kinds: ['stamp'], leaseMs: 60_000, max: 4 });
  if (leased === undefined) throw new Error('the lease found no job');
  const c2 = cpu();
  await side.store.jobCompleteMany([{ tenant: 't', id: leased.id, token: leased.token, result }]);
  if (!measure) return;
  side.spent.enqueue.push(c1 - c0);
  side.spent.lease.push(c2 - c1);
  side.spent.complete.push(cpu() - c2);
}

async function open(name: string, Store: StoreClass): Promise<Side> {
  const fresh = await freshPostgresDb(args.db);
  const schema = new URL(fresh.url).searchParams.get('schema') ?? '';
  const store = await Store.connect({ connectionString: args.db, schema, poolSize: 1 });
  return { name, store, fresh, schema, backend: 0, spent: { enqueue: [], lease: [], complete: [] } };
}

const sides: Side[] = [await open('this build', PostgresStore)];
if (args.against !== undefined) {
  const modulePath = join(resolve(args.against), 'dist', 'src', 'store', 'postgres', 'postgres-store.js');
  const other = (await import(pathToFileURL(modulePath).href)) as { PostgresStore: StoreClass };
  sides.push(await open(args.against, other.PostgresStore));
}
const admin = new pg.Client({ connectionString: args.db });
await admin.connect();
try {
  // Warm: each connection prepares its statements and the planner sees a non-empty table.
  for (const side of sides) for (let i = 0; i < 100; i++) await once(side, `warm-${i}`, false);
  for (const side of sides) {
    const pids = (
      await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [`leasehold:${side.schema}`.slice(0, 63)])
    ).rows.map((row) => row.pid);
    if (pids.length !== 1) throw new Error(`expected the pool's one connection, found ${pids.length}`);
    side.backend = pids[0] as number;
  }
  for (let i = 0; i < JOBS; i++) {
    // Each job's turn order alternates, so neither build always runs right after the other.
    for (const side of i % 2 === 0 ? sides : [...sides].reverse()) {
      if (i % 100 === 0) await side.store.jobReapExpired();
      await once(side, `job-${i}`, true);
    }
  }
  console.log(`statement cost: ${JOBS} jobs one at a time, one connection each; backend CPU µs per operation (commit included), medians`);
  console.log(`  ${''.padEnd(9)} ${sides.map((side) => side.name.slice(-24).padStart(24)).join(' ')}${sides.length > 1 ? '  difference' : ''}`);
  for (const operation of OPERATIONS) {
    const medians = sides.map((side) => median(side.spent[operation]));
    const difference = medians.length > 1 ? `  ${((medians[0] ?? 0) - (medians[1] ?? 0)).toFixed(0).padStart(10)}` : '';
    console.log(`  ${operation.padEnd(9)} ${medians.map((value) => value.toFixed(0).padStart(24)).join(' ')}${difference}`);
  }
} finally {
  await admin.end();
  for (const side of sides) {
    await side.store.close();
    await side.fresh.drop();
  }
}
