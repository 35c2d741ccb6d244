/**
 * What each job costs the storage today, per operation: the store's own calls
 * (no HTTP, no worker) on a fresh database of the store's schema, each group
 * of calls measured from what it wrote (storage-cost-sqlite.ts reads the WAL
 * file and dbstat, storage-cost-postgres.ts the WAL records through
 * pg_walinspect). A count, not a timing: it can run beside anything.
 *
 *   enqueue    jobEnqueue (batch 1) or jobEnqueueMany (16, 100 per call)
 *   lease      jobLease with max 1, 16, 100 (one kind, no filter)
 *   complete   jobComplete (1) or jobCompleteMany (16, 100) of those leases
 *
 * Before the groups the database gets --history finished jobs and a backlog
 * of --backlog queued ones, so that every index has a few levels and the
 * leases take from a real backlog. Per operation and batch size it prints the
 * index entries written per job and how many indexes they fall in, trigger
 * firings, rows written, pages dirtied and WAL bytes per job, then where the
 * pages and entries went.
 *
 *   node dist/bench/storage-cost.js [--db sqlite|postgres://…] [--history 5000] [--backlog 5000] [--jobs 200]
 */

import type Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { EnqueueParams, LeasedJob, Store } from '../src/store/store.js';
import { PostgresStore } from '../src/store/postgres/postgres-store.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { CostProbe, GroupCost } from './storage-cost-probe.js';
import { PostgresCostProbe } from './storage-cost-postgres.js';
import { SqliteCostProbe } from './storage-cost-sqlite.js';

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: 'sqlite' },
    history: { type: 'string', default: '5000' },
    backlog: { type: 'string', default: '5000' },
    jobs: { type: 'string', default: '200' },
    batches: { type: 'string', default: '1,16,100' },
  },
});
const HISTORY = Number(args.history);
const BACKLOG = Number(args.backlog);
const JOBS = Number(args.jobs);
const BATCHES = String(args.batches).split(',').map(Number);
const TENANT = 'cost';
const LEASE = { tenant: TENANT, workerId: 'cost', kinds: ['noop'], leaseMs: 600_000 } as const;

let serial = 0;
function enqueueParams(): EnqueueParams {
  const n = serial++;
  const payload = { n };
  const payloadJson = JSON.stringify(payload);
  return {
    tenant: TENANT,
    owner: '',
    idempotencyKey: `k${n}`,
    requestHash: 'h'.repeat(64),
    kind: 'noop',
    payload,
    payloadJson,
    payloadBytes: payloadJson.length,
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
  };
}

async function enqueue(store: Store, count: number, batch: number): Promise<void> {
  for (let done = 0; done < count; done += batch) {
    const size = Math.min(batch, count - done);
    if (size === 1) await store.jobEnqueue(enqueueParams());
    else await store.jobEnqueueMany(Array.from({ length: size }, enqueueParams));
  }
}

async function lease(store: Store, count: number, batch: number): Promise<LeasedJob[]> {
  const leased: LeasedJob[] = [];
  while (leased.length < count) {
    const jobs = await store.jobLease({ ...LEASE, max: Math.min(batch, count - leased.length) });
    if (jobs.length === 0) throw new Error('the backlog ran out: raise --backlog');
    leased.push(...jobs);
  }
  return leased;
}

async function complete(store: Store, jobs: readonly LeasedJob[], batch: number): Promise<void> {
  for (let at = 0; at < jobs.length; at += batch) {
    const chunk = jobs.slice(at, at + batch).map((job) => ({ tenant: TENANT, id: job.id, token: job.token }));
    const outcomes = chunk.length === 1 && chunk[0] !== undefined ? [await store.jobComplete(chunk[0])] : await store.jobCompleteMany(chunk);
    if (outcomes.some((o) => o.kind !== 'completed')) throw new Error(`a completion was refused: ${JSON.stringify(outcomes)}`);
  }
}

interface Row {
  readonly op: string;
  readonly batch: number;
  readonly jobs: number;
  readonly cost: GroupCost;
}

async function measured(probe: CostProbe, op: string, batch: number, jobs: number, work: () => Promise<unknown>): Promise<Row> {
  await probe.before();
  await work();
  return { op, batch, jobs, cost: await probe.measure() };
}

const sum = (map: ReadonlyMap<string, number>, skip: (key: string) => boolean = () => false): number =>
  [...map].reduce((total, [key, n]) => (skip(key) ? total : total + n), 0);
const perJob = (n: number, jobs: number): string => (n / jobs).toFixed(n / jobs >= 100 ? 0 : n / jobs >= 10 ? 1 : 2);

function printTable(rows: readonly Row[], postgres: boolean): void {
  const header = [
    'operation',
    'batch',
    'jobs/commit',
    'index entries/job',
    'indexes',
    'trigger firings/job',
    'rows/job',
    'pages/job',
    postgres ? 'WAL B/job (FPI)' : 'WAL B/job (frames)',
  ];
  const lines = rows.map(({ op, batch, jobs, cost }) => {
    // A counter row rewritten by a trigger for every job shows up once in a table's row diff; the trigger's count is the real one.
    const rowsWritten = sum(
      cost.rowWrites,
      (key) => key.endsWith('(row locks)') || (!key.endsWith('(by trigger)') && cost.rowWrites.has(`${key} (by trigger)`)),
    );
    const wal = postgres
      ? `${perJob(cost.walBytes - (cost.fpiBytes ?? 0), jobs)} (+${perJob(cost.fpiBytes ?? 0, jobs)})`
      : `${perJob(cost.walBytes, jobs)} (${perJob(cost.pages, jobs)})`;
    return [
      op,
      String(batch),
      (jobs / Math.max(1, cost.commits)).toFixed(1),
      perJob(sum(cost.entryWrites), jobs),
      String(cost.entryWrites.size),
      perJob(sum(cost.triggers), jobs),
      perJob(rowsWritten, jobs),
      perJob(cost.pages, jobs),
      wal,
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? '').length)));
  for (const line of [header, ...lines]) console.log(line.map((cell, i) => (i < 1 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join('  '));
}

function printDetails(rows: readonly Row[]): void {
  const list = (map: ReadonlyMap<string, number>, jobs: number): string =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .map(([key, n]) => `${key} ${perJob(n, jobs)}`)
      .join(', ') || 'none';
  for (const { op, batch, jobs, cost } of rows) {
    console.log(`\n${op}, batch ${batch} (${jobs} jobs, ${cost.commits} commits), per job:`);
    console.log(`  index entries  ${list(cost.entryWrites, jobs)}`);
    console.log(`  rows           ${list(cost.rowWrites, jobs)}`);
    console.log(`  triggers       ${list(cost.triggers, jobs)}`);
    console.log(`  pages          ${list(cost.pagesBy, jobs)}`);
  }
}

async function openMeasured(spec: string): Promise<{ store: Store; probe: CostProbe; cleanup: () => Promise<void> }> {
  if (spec === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-cost-'));
    const path = join(dir, 'cost.db');
    const store = SqliteStore.open({ path });
    // The probe needs the store's own connection to stop its automatic checkpoints (storage-cost-sqlite.ts).
    const connection = (store as unknown as { readonly db: Database.Database }).db;
    const probe = new SqliteCostProbe(path, connection);
    return { store, probe, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const schema = `cost_${process.pid}_${Date.now().toString(36)}`;
  const store = await PostgresStore.connect({ connectionString: spec, schema });
  const probe = await PostgresCostProbe.open(spec, schema);
  return { store, probe, cleanup: () => PostgresStore.dropSchema({ connectionString: spec, schema }) };
}

const postgres = String(args.db).startsWith('postgres');
const { store, probe, cleanup } = await openMeasured(String(args.db));
try {
  console.log(
    `storage cost per job, ${postgres ? 'PostgreSQL' : 'SQLite'}: ${HISTORY} finished jobs and ${BACKLOG} queued before the groups; ${JOBS} jobs per group (at least 3 calls)`,
  );
  await enqueue(store, HISTORY, 500);
  await complete(store, await lease(store, HISTORY, 100), 100);
  await enqueue(store, BACKLOG, 500);
  const rows: Row[] = [];
  for (const batch of BATCHES) {
    const jobs = Math.max(Math.ceil(JOBS / batch), 3) * batch;
    rows.push(await measured(probe, 'enqueue', batch, jobs, () => enqueue(store, jobs, batch)));
    let leased: LeasedJob[] = [];
    rows.push(await measured(probe, 'lease', batch, jobs, async () => (leased = await lease(store, jobs, batch))));
    rows.push(await measured(probe, 'complete', batch, jobs, () => complete(store, leased, batch)));
  }
  const order = ['enqueue', 'lease', 'complete'];
  rows.sort((a, b) => order.indexOf(a.op) - order.indexOf(b.op) || a.batch - b.batch);
  console.log('');
  printTable(rows, postgres);
  printDetails(rows);
  if (store instanceof SqliteStore && probe instanceof SqliteCostProbe) {
    console.log('\nindexes each statement opens for writing (EXPLAIN):');
    const { SQL, jobLeaseKindsSql, withLeaseMax } = await import('../src/store/sqlite/queries.js');
    for (const [name, sql] of Object.entries({
      jobInsert: SQL.jobInsert,
      readyInsert: SQL.readyInsert,
      jobLeaseKinds: withLeaseMax(jobLeaseKindsSql(1), 16),
      readyDeleteMany: SQL.readyDeleteMany,
      leaseEnd: SQL.leaseEnd,
      jobEnd: SQL.jobEnd,
      attemptInsert: SQL.attemptInsert,
    })) {
      const written = probe.indexesWritten(sql);
      console.log(`  ${name.padEnd(16)} ${written.length}: ${written.join(', ')}`);
    }
  }
} finally {
  await probe.close();
  await store.close();
  await cleanup();
}
