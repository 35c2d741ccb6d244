/**
 * `npm run bench:statement-cost -- --db postgres://…`: what the PostgreSQL
 * server spends on each of a job's three writes. One job at a time is
 * enqueued, leased and completed (with a small result) through a
 * PostgresStore whose pool has one connection, and that connection's backend
 * CPU (user + system, from /proc, so only with the server on this machine)
 * is read around each call; the reaper's statistics check runs every 100
 * jobs, as a coordinator's tick would. The figures include each commit's
 * WAL flush, which the backend does itself. CPU time, unlike the latency of
 * the HTTP bench, does not depend on what else the machine runs, so this is
 * the figure to compare two builds' statements by (alternate them).
 *
 * Options: --db postgres://… (required), --jobs 1500.
 */

import { parseArgs } from 'node:util';
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/postgres-store.js';
import type { EnqueueParams } from '../src/store/store.js';
import { freshPostgresDb } from './postgres-db.js';
import { processCpuMs } from './processes.js';

const { values: args } = parseArgs({ options: { db: { type: 'string', default: '' }, jobs: { type: 'string', default: '1500' } } });
if (!args.db.startsWith('postgres')) throw new Error('--db postgres://… is required');
const JOBS = Number(args.jobs);
const OPERATIONS = ['enqueue', 'lease', 'complete'] as const;

const fresh = await freshPostgresDb(args.db);
const schema = new URL(fresh.url).searchParams.get('schema') ?? '';
const store = await PostgresStore.connect({ connectionString: args.db, schema, poolSize: 1 });
const admin = new pg.Client({ connectionString: args.db });
await admin.connect();
try {
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
  /** One job through the three writes; the CPU each took when `cpu` is given. */
  const once = async (key: string, spent?: Record<(typeof OPERATIONS)[number], number>, cpu?: () => number): Promise<void> => {
    const c0 = cpu?.() ?? 0;
    await store.jobEnqueue(job(key));
    const c1 = cpu?.() ?? 0;
    const [leased] = await store.jobLease({ tenant: 't', workerId: 'w', kinds: ['stamp'], leaseMs: 60_000, max: 4 });
    if (leased === undefined) throw new Error('the lease found no job');
    const c2 = cpu?.() ?? 0;
    await store.jobCompleteMany([{ tenant: 't', id: leased.id, token: leased.token, result }]);
    if (spent !== undefined && cpu !== undefined) {
      spent.enqueue += c1 - c0;
      spent.lease += c2 - c1;
      spent.complete += cpu() - c2;
    }
  };
  // Warm: the connection prepares its statements and the planner sees a non-empty table.
  for (let i = 0; i < 100; i++) await once(`warm-${i}`);
  const pids = (
    await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [`leasehold:${schema}`.slice(0, 63)])
  ).rows.map((row) => row.pid);
  if (pids.length !== 1) throw new Error(`expected the pool's one connection, found ${pids.length}`);
  const backend = pids[0] as number;
  const spent = { enqueue: 0, lease: 0, complete: 0 };
  for (let i = 0; i < JOBS; i++) {
    if (i % 100 === 0) await store.jobReapExpired();
    await once(`job-${i}`, spent, () => processCpuMs(backend));
  }
  console.log(`statement cost: ${JOBS} jobs one at a time, one connection; backend CPU µs per operation (commit included)`);
  for (const operation of OPERATIONS) console.log(`  ${operation.padEnd(9)} ${((spent[operation] * 1000) / JOBS).toFixed(0).padStart(5)}`);
} finally {
  await admin.end();
  await store.close();
  await fresh.drop();
}
