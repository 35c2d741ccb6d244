/**
 * `npm run floor`: what the database itself costs for the embedded bench's
 * throughput scenarios, without the library around it, each the median of
 * several runs on a fresh database with durable commits.
 *
 * The candidate storage designs of issue 28 (bench/floor-sqlite.ts and
 * bench/floor-postgres.ts describe them: a today's schema, b a ready table,
 * c b clustered in lease order with integer ids, d c with the attempt row
 * written once and counters per commit; on SQLite also e, d with one
 * statement per batch instead of per job), each measured the same way:
 *
 *   enqueue single   each job its own statements, 64 jobs per commit, as the
 *                    group commit runs 64 single enqueues in flight
 *   enqueue batch    500 jobs per commit (enqueueMany; one statement on
 *                    PostgreSQL)
 *   end to end       lease 32, complete those 32, each its own commit, until
 *                    the queue of the single enqueues is empty (PostgreSQL:
 *                    --loops connections at once, as workers would); then
 *                    again on the batch's queue with each completion and the
 *                    next lease in one commit (one transaction, two statements)
 *   CPU per job      beside each rate, the CPU time per job of this process
 *                    and, on a local PostgreSQL, of its server processes for
 *                    the floor's connections: less disturbed than the rates
 *                    by whatever else runs on the machine
 *   WAL per job      once per candidate on a fresh database of --wal-jobs
 *                    jobs, the method of bench/storage-cost.ts: bytes and
 *                    pages per job for each phase (PostgreSQL: without the
 *                    full-page images, which depend on checkpoint timing)
 *
 * On SQLite it first runs the store's own figures (floor-store.ts): its
 * enqueue statements in transactions of 64 with the schema and without seven
 * of its indexes, and its jobLease and jobCompleteMany 32 at a time.
 *
 * Options: --db sqlite|postgres://… (default sqlite), --candidates a,b,c,d,e,
 * --runs 3 (0: only the WAL count, which times nothing), --jobs 20000, --wal-jobs 2000 (0: none), --loops 4, --no-store.
 */

import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createReadyPg, createTodayPg, openReadyPg, openTodayPg } from './floor-postgres.js';
import type { FloorDb, Leased, NewJob } from './floor-db.js';
import { openReady, openToday } from './floor-sqlite.js';
import { ENQUEUE_VARIANTS, enqueueRate, leaseCompleteRate } from './floor-store.js';
import { median } from './processes.js';
import type { CostProbe, GroupCost } from './storage-cost-probe.js';
import { PostgresCostProbe } from './storage-cost-postgres.js';
import { SqliteCostProbe } from './storage-cost-sqlite.js';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    jobs: { type: 'string', default: '20000' },
    db: { type: 'string', default: 'sqlite' },
    candidates: { type: 'string', default: '' },
    'wal-jobs': { type: 'string', default: '2000' },
    loops: { type: 'string', default: '4' },
    'no-store': { type: 'boolean', default: false },
  },
});
const RUNS = Number(args.runs);
const JOBS = Number(args.jobs);
const WAL_JOBS = Number(args['wal-jobs']);
const LOOPS = Number(args.loops);
const DB = String(args.db);
const POSTGRES = DB.startsWith('postgres');
const ENQUEUE_BATCH = 64;
const BATCH_REQUEST = 500;
const LEASE_BATCH = 32;

// --- the candidate designs ---------------------------------------------------------------------------

/** A candidate on a fresh database: `db` and, on PostgreSQL, `more` connections to the same schema. */
interface Fresh {
  readonly db: FloorDb;
  more(count: number): Promise<FloorDb[]>;
  probe(): Promise<CostProbe>;
  cleanup(): Promise<void>;
}

const CANDIDATES: Record<string, string> = {
  a: "today's schema",
  b: 'ready table',
  c: 'ready table in lease order, integer ids',
  d: 'c, attempt once, counters per commit',
  e: 'd, one statement per batch (SQLite)',
};

const designOf = (key: string): { clustered: boolean; intIds: boolean; onceAtEnd: boolean; perBatch: boolean } => ({
  clustered: key !== 'b',
  intIds: key !== 'b',
  onceAtEnd: key === 'd' || key === 'e',
  perBatch: key === 'e',
});

async function fresh(key: string): Promise<Fresh> {
  if (!POSTGRES) {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-floor-'));
    const path = join(dir, 'floor.db');
    const db = key === 'a' ? await openToday(path) : openReady(path, designOf(key));
    return {
      db,
      more: async () => [],
      probe: async () => {
        if (db.connection === undefined) throw new Error('no connection to count the WAL of');
        return new SqliteCostProbe(path, db.connection);
      },
      cleanup: async () => {
        await db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const schema = `floor_${key}_${randomBytes(4).toString('hex')}`;
  if (key === 'a') await createTodayPg(DB, schema);
  else await createReadyPg(DB, schema, designOf(key));
  const open = (): Promise<FloorDb> => (key === 'a' ? openTodayPg(DB, schema) : openReadyPg(DB, schema, designOf(key)));
  const db = await open();
  const others: FloorDb[] = [];
  return {
    db,
    more: async (count) => {
      const opened = await Promise.all(Array.from({ length: count }, open));
      others.push(...opened);
      return opened;
    },
    probe: () => PostgresCostProbe.open(DB, schema),
    cleanup: async () => {
      for (const handle of [db, ...others]) await handle.close();
      const admin = new pg.Client({ connectionString: DB });
      await admin.connect();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.end();
    },
  };
}

let serial = 0;
const newJobs = (count: number): NewJob[] => Array.from({ length: count }, () => ({ n: serial++ }));

async function enqueueAll(db: FloorDb, jobs: number, perCommit: number, batch: boolean): Promise<void> {
  for (let n = 0; n < jobs; n += perCommit) {
    const chunk = newJobs(Math.min(perCommit, jobs - n));
    await (batch ? db.enqueueBatch(chunk) : db.enqueue(chunk));
  }
}

/** Leases and completes until the queue is empty; returns how many. */
async function drain(db: FloorDb): Promise<number> {
  let done = 0;
  for (;;) {
    const leased: Leased[] = await db.lease(LEASE_BATCH);
    if (leased.length === 0) return done;
    await db.complete(leased);
    done += leased.length;
  }
}

/** drain with each completion and the next lease in one commit. */
async function drainPaired(db: FloorDb): Promise<number> {
  let done = 0;
  let leased: Leased[] = await db.lease(LEASE_BATCH);
  while (leased.length > 0) {
    const next = await db.completeAndLease(leased, LEASE_BATCH);
    done += leased.length;
    leased = next;
  }
  return done;
}

const rate = (jobs: number, startedAt: number): number => (jobs * 1000) / (performance.now() - startedAt);

/**
 * CPU seconds so far of this process and of `servers` (PostgreSQL's processes of the floor's connections, read
 * from /proc when the server runs on this machine): a cost that another program on the machine slows down less
 * than it does the wall-clock rates.
 */
function cpuSeconds(servers: readonly FloorDb[]): number {
  const own = process.cpuUsage();
  let total = (own.user + own.system) / 1e6;
  for (const { serverPid } of servers) {
    if (serverPid === undefined || !existsSync(`/proc/${serverPid}/stat`)) continue;
    // utime and stime, fields 14 and 15 of stat, in clock ticks (100 a second); the command name ends with ") ".
    const fields = readFileSync(`/proc/${serverPid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    total += (Number(fields[11]) + Number(fields[12])) / 100;
  }
  return total;
}

/** Runs `work` over `jobs` jobs on `dbs`; its rate and CPU microseconds per job. */
async function timed(jobs: number, dbs: readonly FloorDb[], work: () => Promise<unknown>): Promise<{ rate: number; cpu: number }> {
  const cpu = cpuSeconds(dbs);
  const startedAt = performance.now();
  await work();
  return { rate: rate(jobs, startedAt), cpu: ((cpuSeconds(dbs) - cpu) * 1e6) / jobs };
}

type Phase = 'single' | 'batch' | 'endToEnd' | 'paired';
const PHASES: readonly Phase[] = ['single', 'batch', 'endToEnd', 'paired'];
type CandidateFigures = Record<Phase, { readonly rate: number; readonly cpu: number }>;

/** Leases and completes every queued job with `loop` on each connection of `f`. */
async function endToEnd(f: Fresh, loop: (db: FloorDb) => Promise<number>): Promise<{ rate: number; cpu: number }> {
  const loops = POSTGRES ? [f.db, ...(await f.more(LOOPS - 1))] : [f.db];
  return timed(JOBS, loops, async () => {
    const done = (await Promise.all(loops.map(loop))).reduce((a, b) => a + b, 0);
    if (done !== JOBS) throw new Error(`end to end ran ${done} of ${JOBS} jobs`);
  });
}

async function candidateRun(key: string): Promise<CandidateFigures> {
  const first = await fresh(key);
  let single: { rate: number; cpu: number };
  let separate: { rate: number; cpu: number };
  try {
    single = await timed(JOBS, [first.db], () => enqueueAll(first.db, JOBS, ENQUEUE_BATCH, false));
    separate = await endToEnd(first, drain);
  } finally {
    await first.cleanup();
  }
  const second = await fresh(key);
  try {
    const batch = await timed(JOBS, [second.db], () => enqueueAll(second.db, JOBS, BATCH_REQUEST, true));
    return { single, batch, endToEnd: separate, paired: await endToEnd(second, drainPaired) };
  } finally {
    await second.cleanup();
  }
}

/** WAL and pages per job of each phase, on a fresh database of WAL_JOBS jobs. */
async function walPerJob(key: string): Promise<string> {
  const f = await fresh(key);
  const probe = await f.probe();
  const total = (map: ReadonlyMap<string, number>): number => [...map.values()].reduce((a, b) => a + b, 0);
  const per = (cost: GroupCost, jobs: number): string => {
    const bytes = cost.walBytes - (cost.fpiBytes ?? 0);
    const entries = (total(cost.entryWrites) / jobs).toFixed(1);
    return `${Math.round(bytes / jobs)} B, ${(cost.pages / jobs).toFixed(2)} pages, ${entries} index entries, ${(total(cost.triggers) / jobs).toFixed(2)} triggers`;
  };
  const measure = async (work: () => Promise<unknown>): Promise<GroupCost> => {
    await probe.before();
    await work();
    return probe.measure();
  };
  try {
    const single = await measure(() => enqueueAll(f.db, WAL_JOBS, ENQUEUE_BATCH, false));
    const batch = await measure(() => enqueueAll(f.db, WAL_JOBS, BATCH_REQUEST, true));
    const leased: Leased[][] = [];
    const lease = await measure(async () => {
      for (let n = 0; n < WAL_JOBS; n += LEASE_BATCH) leased.push(await f.db.lease(Math.min(LEASE_BATCH, WAL_JOBS - n)));
    });
    const complete = await measure(async () => {
      for (const jobs of leased) await f.db.complete(jobs);
    });
    return `enqueue ${ENQUEUE_BATCH}/commit ${per(single, WAL_JOBS)}; ${BATCH_REQUEST}/commit ${per(batch, WAL_JOBS)}; lease ${LEASE_BATCH} ${per(lease, WAL_JOBS)}; complete ${LEASE_BATCH} ${per(complete, WAL_JOBS)}`;
  } finally {
    await probe.close();
    await f.cleanup();
  }
}

function report(name: string, runs: readonly number[], cpuPerJob?: number): void {
  const cpu = cpuPerJob === undefined ? '' : `  CPU ${cpuPerJob.toFixed(1)} µs/job`;
  console.log(`${name.padEnd(58)} ${Math.round(median(runs))} jobs/s  (runs: ${runs.map(Math.round).join(', ')})${cpu}`);
}

// e is SQLite's alone: PostgreSQL's statements are one per batch in every candidate.
const keys = (String(args.candidates) === '' ? (POSTGRES ? 'a,b,c,d' : 'a,b,c,d,e') : String(args.candidates))
  .split(',')
  .filter((key) => key in CANDIDATES && !(POSTGRES && key === 'e'));
const figures: Record<string, number> = {};
console.log(`${POSTGRES ? 'PostgreSQL' : 'SQLite'} floor: ${RUNS} runs, ${JOBS} jobs, ${POSTGRES ? 'synchronous_commit=on' : 'synchronous=FULL'}`);
if (!POSTGRES && args['no-store'] !== true && RUNS > 0) {
  const enqueueRuns = new Map<string, number[]>(Object.keys(ENQUEUE_VARIANTS).map((name) => [name, []]));
  // Interleaved, so a slow spell of the machine falls on every variant alike.
  for (let run = 0; run < RUNS; run++)
    for (const [name, drops] of Object.entries(ENQUEUE_VARIANTS)) enqueueRuns.get(name)?.push(await enqueueRate(drops, JOBS, ENQUEUE_BATCH));
  for (const [name, runs] of enqueueRuns) report(`enqueue SQL, ${ENQUEUE_BATCH} per commit, ${name}`, runs);
  const leaseRuns: number[] = [];
  for (let run = 0; run < RUNS; run++) leaseRuns.push(await leaseCompleteRate(JOBS, LEASE_BATCH));
  report(`store lease + complete, ${LEASE_BATCH} at a time`, leaseRuns);
}
const byCandidate = new Map(keys.map((key) => [key, new Map(PHASES.map((phase) => [phase, { rates: [] as number[], cpu: [] as number[] }]))]));
for (let run = 0; run < RUNS; run++) {
  for (const key of keys) {
    const figure = await candidateRun(key);
    for (const phase of PHASES) {
      byCandidate.get(key)?.get(phase)?.rates.push(figure[phase].rate);
      byCandidate.get(key)?.get(phase)?.cpu.push(figure[phase].cpu);
    }
  }
}
const PHASE_NAMES: Record<Phase, string> = {
  single: `enqueue single, ${ENQUEUE_BATCH} per commit`,
  batch: `enqueue batch, ${BATCH_REQUEST} per commit`,
  endToEnd: `end to end, lease + complete ${LEASE_BATCH}${POSTGRES ? `, ${LOOPS} connections` : ''}`,
  paired: 'end to end, each completion and next lease in one commit',
};
const FIGURE_NAMES: Record<Phase, string> = { single: 'enqueue single', batch: 'enqueue batch', endToEnd: 'end-to-end', paired: 'end-to-end paired' };
for (const [key, phases] of byCandidate) {
  console.log(`\n(${key}) ${CANDIDATES[key] ?? key}`);
  if (RUNS === 0) {
    // --runs 0: the WAL count alone, which times nothing and can run beside a measurement.
    if (WAL_JOBS > 0) console.log(`  WAL per job (${WAL_JOBS} jobs): ${await walPerJob(key)}`);
    continue;
  }
  for (const [phase, { rates, cpu }] of phases) {
    report(`  ${PHASE_NAMES[phase]}`, rates, median(cpu));
    figures[`${key} ${FIGURE_NAMES[phase]} jobs/s`] = median(rates);
    figures[`${key} ${FIGURE_NAMES[phase]} cpu us/job`] = median(cpu);
  }
  if (WAL_JOBS > 0) console.log(`  WAL per job (${WAL_JOBS} jobs): ${await walPerJob(key)}`);
}
if (RUNS > 0) console.log(`figures ${JSON.stringify(figures)}`);
