/**
 * `npm run haul` (or `npm run bench -- --scenario haul|sustained`): does
 * kind A cost the same when the database holds a long history and another
 * kind's backlog? Real `leasehold serve` and `leasehold worker` processes,
 * driven over HTTP (undici pools).
 *
 * --scenario haul (default) measures, side by side in one run, for kind A:
 *   single-enqueue rate  --jobs single POST /jobs, 64 in flight (after 2,000 untimed ones)
 *   end-to-end rate      --jobs more enqueued in batches, then --workers worker processes
 *                        (32 handlers in all, kind A only) run every queued A job; the rate
 *                        of the batch's jobs by their own timestamps (the single-enqueue
 *                        phase's jobs run first and warm the workers up)
 *   enqueue-to-start     500 jobs 5 ms apart onto an idle queue, one worker polling: p50, p99
 *   GET /stats           the median of 20 calls, before the round's jobs
 * on two databases: "empty" (10 finished jobs; a fresh one each round) and
 * "history" (--history finished jobs, kinds A and B alternating, and
 * --backlog queued jobs of kind B that no worker takes; seeded once through
 * the Store API before its first coordinator starts, bench/haul-seed.ts).
 * Each of --rounds rounds measures both, the order alternating, on a
 * coordinator started for it (on PostgreSQL after a VACUUM (ANALYZE) of that
 * database's tables, as autovacuum would long have done); the table shows the medians, history/empty,
 * and issue 14's done-when: each kind A figure no more than 15% worse with
 * history (rates ≥ 0.85×, p50 ≤ 1.15×), /stats within 2× of its time with 10 jobs.
 *
 * --scenario sustained: see bench/sustained.ts.
 *
 * Options: --db sqlite|postgres://… (a fresh SQLite file or schema per database),
 * --history 1000000, --backlog 100000, --jobs 20000, --rounds 3, --workers 2,
 * --serve-arg=--flag=value (repeatable; passed to every `leasehold serve`);
 * sustained: --minutes 20, --share 0.5, --rate N, --capacity-seconds 20, --retention-minutes 2.
 */

import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LeaseholdClient } from '../src/client/index.js';
import { enqueueBatches, enqueueSingle, enqueueToStart, succeededRate } from './figures.js';
import { freshDatabase, type FreshDatabase } from './fresh-db.js';
import { seedDatabase } from './haul-seed.js';
import { createKey, median, ROOT, startCoordinator, startWorker } from './processes.js';
import { runSustained } from './sustained.js';

const { values: args } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'haul' },
    db: { type: 'string', default: 'sqlite' },
    history: { type: 'string', default: '1000000' },
    backlog: { type: 'string', default: '100000' },
    jobs: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '3' },
    workers: { type: 'string', default: '2' },
    'serve-arg': { type: 'string', multiple: true, default: [] },
    minutes: { type: 'string', default: '20' },
    share: { type: 'string', default: '0.5' },
    rate: { type: 'string' },
    'capacity-seconds': { type: 'string', default: '20' },
    'retention-minutes': { type: 'string', default: '2' },
  },
});

function usageError(message: string): never {
  process.stderr.write(`haul: ${message}\n`);
  process.exit(2);
}
function count(name: keyof typeof args, min: number): number {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < min) usageError(`--${name} must be an integer of at least ${min}`);
  return value;
}
function positive(name: keyof typeof args): number {
  const value = Number(args[name]);
  if (!Number.isFinite(value) || value <= 0) usageError(`--${name} must be a positive number`);
  return value;
}

const DB = args.db ?? 'sqlite';
const SERVE_ARGS = args['serve-arg'] ?? [];
const WORKERS = count('workers', 1);
const HANDLERS = join(ROOT, 'dist', 'bench', 'haul-handlers.js');
const TENANT = 'bench';
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

interface Seeded {
  readonly fresh: FreshDatabase;
  readonly adminKey: string;
  readonly workerKey: string;
}

async function seeded(name: string, history: number, backlog: number): Promise<Seeded> {
  const fresh = await freshDatabase(DB, name);
  let lastShown = 0;
  const verbose = history + backlog >= 1_000;
  const report = await seedDatabase(fresh.db, {
    tenant: TENANT,
    history,
    backlog,
    onProgress: (phase, done, total) => {
      if (verbose && (done === total || done - lastShown >= 100_000)) {
        lastShown = done === total ? 0 : done;
        process.stdout.write(`  seeding ${name}: ${phase} ${done}/${total}\n`);
      }
    },
  });
  if (verbose)
    process.stdout.write(`  seeded ${name}: ${history + backlog} jobs in ${report.seconds.toFixed(1)} s (${report.jobsPerSecond.toFixed(0)} jobs/s)\n`);
  return { fresh, adminKey: createKey(fresh.db, TENANT, 'bench', 'admin'), workerKey: createKey(fresh.db, TENANT, 'bench-worker', 'worker') };
}

interface KindAFigures {
  readonly single: number;
  readonly endToEnd: number;
  readonly p50: number;
  readonly p99: number;
  readonly statsMs: number;
}

async function timedStats(client: LeaseholdClient): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 20; i++) {
    const started = performance.now();
    await client.stats();
    times.push(performance.now() - started);
  }
  return median(times);
}

/**
 * On PostgreSQL, vacuums the database's queue tables before a measurement,
 * whatever the server's autovacuum setting (nothing on SQLite): a queue that
 * has run for months has been vacuumed a little at a time, while the freshly
 * seeded history holds every row version the seeding wrote. With autovacuum
 * on, that one-off backlog would otherwise be vacuumed in the background
 * during the measurement itself; with it off, each round's churn would pile
 * up in the one history schema while every empty database is new.
 */
async function vacuumLikeAutovacuum(db: Seeded): Promise<void> {
  await db.fresh.vacuum();
}

async function measureKindA(db: Seeded, prefix: string, jobs: number): Promise<KindAFigures> {
  await vacuumLikeAutovacuum(db);
  const { url, process: coordinator } = await startCoordinator(db.fresh.db, SERVE_ARGS);
  const client = new LeaseholdClient({ baseUrl: url, apiKey: db.adminKey, connections: 2 });
  try {
    const statsMs = await timedStats(client);
    const single = await enqueueSingle([url], db.adminKey, 'A', jobs, prefix);
    const { ids } = await enqueueBatches([url], db.adminKey, 'A', jobs, `${prefix}-e2e`);
    const perWorker = Math.ceil(32 / WORKERS);
    const workers = Array.from({ length: WORKERS }, (_, i) =>
      startWorker({ url, key: db.workerKey, handlers: HANDLERS, concurrency: perWorker, workerId: `${prefix}-${i}` }),
    );
    // One long poll on the last job enqueued (about the last to run) instead of listing while the workers run.
    const last = ids[ids.length - 1];
    if (last !== undefined) await client.waitForJob(last, { timeoutMs: 600_000 });
    const endToEnd = await succeededRate(client, 'A', ids);
    await Promise.all(workers.map((w) => w.stop()));
    const latency = await enqueueToStart({
      enqueueUrl: url,
      workerUrl: url,
      adminKey: db.adminKey,
      workerKey: db.workerKey,
      handlers: HANDLERS,
      kind: 'A',
      prefix,
    });
    return { single, endToEnd, p50: latency.p50, p99: latency.p99, statsMs };
  } finally {
    await client.close();
    await coordinator.stop();
  }
}

async function haul(): Promise<void> {
  const history = count('history', 0);
  const backlog = count('backlog', 0);
  const jobs = count('jobs', 1);
  const rounds = count('rounds', 1);
  process.stdout.write(
    `leasehold haul: db=${DB === 'sqlite' ? 'sqlite' : 'postgres'}, history=${history}, backlog=${backlog} (kind B), jobs=${jobs}, rounds=${rounds}\n`,
  );
  process.stdout.write(`load average at start: ${load()} (${cpus().length} CPUs)\n`);
  const full = await seeded('haul-history', history, backlog);
  const figures: Record<'empty' | 'history', KindAFigures[]> = { empty: [], history: [] };
  try {
    for (let round = 1; round <= rounds; round++) {
      const empty = await seeded('haul-empty', 10, 0);
      try {
        const order = round % 2 === 1 ? (['empty', 'history'] as const) : (['history', 'empty'] as const);
        for (const state of order) {
          const f = await measureKindA(state === 'empty' ? empty : full, `r${round}-${state}`, jobs);
          figures[state].push(f);
          process.stdout.write(
            `round ${round} ${state.padEnd(7)}: single ${f.single.toFixed(0)} jobs/s, end-to-end ${f.endToEnd.toFixed(0)} jobs/s, ` +
              `enqueue-to-start p50 ${f.p50.toFixed(2)} ms p99 ${f.p99.toFixed(2)} ms, GET /stats ${f.statsMs.toFixed(2)} ms\n`,
          );
        }
      } finally {
        await empty.fresh.cleanup();
      }
    }
  } finally {
    await full.fresh.cleanup();
  }
  printTable(figures, history, backlog, rounds);
  process.stdout.write(`load average at end: ${load()}\n`);
}

function printTable(figures: Record<'empty' | 'history', KindAFigures[]>, history: number, backlog: number, rounds: number): void {
  const m = (state: 'empty' | 'history', pick: (f: KindAFigures) => number): number => median(figures[state].map(pick));
  // [label, figure, digits, the most history/empty may be (or the least, for rates), or null: not checked]
  const rows: [string, (f: KindAFigures) => number, number, { readonly atLeast?: number; readonly atMost?: number } | null][] = [
    ['single enqueue, jobs/s', (f) => f.single, 0, { atLeast: 0.85 }],
    ['end-to-end, jobs/s', (f) => f.endToEnd, 0, { atLeast: 0.85 }],
    ['enqueue-to-start p50, ms', (f) => f.p50, 2, { atMost: 1.15 }],
    ['enqueue-to-start p99, ms', (f) => f.p99, 2, null],
    ['GET /stats, ms (median of 20)', (f) => f.statsMs, 2, { atMost: 2 }],
  ];
  process.stdout.write(
    `\nkind A, medians of ${rounds} round(s) (${DB === 'sqlite' ? 'SQLite' : 'PostgreSQL'}); history: ${history} finished + ${backlog} queued of kind B\n`,
  );
  process.stdout.write(`${'figure'.padEnd(32)}${'empty'.padStart(10)}${'history'.padStart(10)}${'ratio'.padStart(8)}  done-when\n`);
  let pass = true;
  for (const [label, pick, digits, bound] of rows) {
    const empty = m('empty', pick);
    const full = m('history', pick);
    const ratio = full / empty;
    let verdict = 'not checked';
    if (bound !== null) {
      const ok = (bound.atLeast === undefined || ratio >= bound.atLeast) && (bound.atMost === undefined || ratio <= bound.atMost);
      pass &&= ok;
      verdict = `${ok ? 'ok' : 'FAIL'} (${bound.atLeast !== undefined ? `>= ${bound.atLeast}` : `<= ${bound.atMost}`})`;
    }
    process.stdout.write(
      `${label.padEnd(32)}${empty.toFixed(digits).padStart(10)}${full.toFixed(digits).padStart(10)}${ratio.toFixed(2).padStart(8)}  ${verdict}\n`,
    );
  }
  process.stdout.write(`done-when: ${pass ? 'PASS' : 'FAIL'}\n`);
}

async function main(): Promise<void> {
  if (args.scenario === 'haul') return haul();
  if (args.scenario === 'sustained') {
    return runSustained({
      db: DB,
      serveArgs: SERVE_ARGS,
      workers: WORKERS,
      handlers: HANDLERS,
      tenant: TENANT,
      minutes: count('minutes', 1),
      share: positive('share'),
      rate: args.rate === undefined ? null : positive('rate'),
      capacitySeconds: positive('capacity-seconds'),
      retentionMs: Math.round(positive('retention-minutes') * 60_000),
    });
  }
  usageError(`--scenario must be haul or sustained, not ${args.scenario}`);
}

// Awaited at the top level, so that bench/run.ts, which imports this module for --scenario, waits for the run.
await main().catch((error: unknown) => {
  process.stderr.write(`haul failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
