/**
 * `npm run soak -- --mode embedded --minutes N [--backend postgres] [--seed S]`:
 * the chaos soak of the library mode. No coordinator, no HTTP: an
 * application process (bench/soak-embedded-app.ts) enqueues through its own
 * Queue, half of it with `enqueueInTransaction` inside its own transaction
 * beside a row of its own, and two worker processes
 * (bench/soak-embedded-worker.ts, `openQueue` + `Worker`) run the jobs, all
 * on one SQLite file (or one PostgreSQL schema). At random moments drawn from
 * a seeded generator one of them is SIGKILLed and restarted: the application
 * (anywhere, or inside one of its transactions, held open after its writes),
 * a worker, or a worker caught holding SQLite's write lock (a `soak-hold` job
 * holds it from its handler; the soak kills the process the moment it says
 * so). Then the queue is drained and audited with the HTTP soak's audit
 * (bench/soak-audit.ts) through a Queue of this process, plus what only the
 * embedded path can break:
 *
 *   accepted               the application's own rows (soak_app_orders): a job it knows was accepted
 *   lost                   an accepted job missing or not terminal (must be 0)
 *   duplicate commits      a result not naming exactly one `ok` execution at the final fence, or two
 *                          successes in one history (must be 0)
 *   jobs without their transaction  a job enqueued in a transaction whose application row is missing (must be 0)
 *   rows naming another job  an application row whose job id is not the job of its idempotency key (must be 0)
 *   result rows ≠ 1        a succeeded job without exactly one row in the store's job_results (must be 0)
 *   holds that survived their kill  a hold's row committed although its process was killed inside it (must be 0)
 *
 * A plain `enqueue` answered just before the application was killed leaves a
 * job without a row; the restarted application enqueues that number again
 * with the same key and records the replay. Jobs never recorded are counted
 * and allowed (at most one per application kill).
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { LeaseholdError, openQueue, type Queue } from '../src/index.js';
import { freshPostgresDb } from './postgres-db.js';
import { adoptChild, ROOT } from './processes.js';
import { audit, type AuditFindings } from './soak-audit.js';
import { APP_TABLE_SQL, SOAK_TENANT, soakQueueConfig, viaOf } from './soak-embedded-app.js';
import { abortablePause, round, shuffle } from './soak-common.js';
import { seededRandom } from './seeded-random.js';
import { linesWithSecrets, recordedLeaseTokens } from './soak-secrets.js';

const APP_SCRIPT = join(ROOT, 'dist', 'bench', 'soak-embedded-app.js');
const WORKER_SCRIPT = join(ROOT, 'dist', 'bench', 'soak-embedded-worker.js');
const HOLDS_TABLE_SQL = 'CREATE TABLE IF NOT EXISTS soak_holds (exec TEXT PRIMARY KEY, job_id TEXT NOT NULL, pid INTEGER NOT NULL, at BIGINT NOT NULL)';

export interface EmbeddedSoakOptions {
  readonly durationMs: number;
  /** Default sqlite (a file in a temp dir); postgres needs `postgresUrl` (a fresh schema is made in it). */
  readonly backend?: 'sqlite' | 'postgres';
  readonly postgresUrl?: string;
  readonly seed?: number;
  readonly jobsPerSecond?: number;
  readonly workers?: number;
  readonly concurrency?: number;
  readonly leaseMs?: number;
  /** How long a `soak-hold` job holds the write lock. */
  readonly holdMs?: number;
  /** How long the application holds one transactional enqueue in 50 open before its COMMIT. */
  readonly txHoldMs?: number;
  readonly killGapMs?: readonly [number, number];
  readonly drainTimeoutMs?: number;
  readonly log?: (line: string) => void;
}

export interface EmbeddedSoakSummary extends Omit<AuditFindings, 'examples'> {
  readonly mode: 'embedded';
  readonly seed: number;
  readonly backend: 'sqlite' | 'postgres';
  readonly loadSeconds: number;
  readonly drainSeconds: number;
  readonly wallSeconds: number;
  readonly accepted: number;
  readonly acceptedInTransaction: number;
  readonly kills: {
    readonly app: number;
    readonly appInsideTransaction: number;
    readonly worker: number;
    readonly workerHoldingLock: number;
    readonly total: number;
  };
  /** Application kills inside its transaction after which it started again at that transaction's number (it had not committed). */
  readonly appKillsConfirmedInside: number;
  /** Kills aimed at a lock holder or an open transaction that found none in time (killed nothing). */
  readonly holderKillsMissed: number;
  readonly holdsCommitted: number;
  readonly holdsSurvivingTheirKill: number;
  readonly jobsWithoutTheirTransaction: number;
  readonly rowsNamingAnotherJob: number;
  readonly unrecordedEnqueues: number;
  readonly resultRowsNotOne: number;
  readonly leaseExpiries: number;
  /** `store_unavailable` answers to this process's own stats reads while draining (each tried again). */
  readonly drainReadsUnavailable: number;
  /** Enqueues the application tried again after a refusal or an error, by code. */
  readonly appRetries: Readonly<Record<string, number>>;
  readonly workerRetries: number;
  readonly secretsChecked: { readonly leaseTokens: number };
  readonly logLinesWithSecrets: number;
  readonly unexpectedExits: number;
  readonly loadAverage: readonly number[];
  readonly examples: readonly string[];
  readonly ok: boolean;
}

type Role = 'app' | 'worker';

interface Child {
  readonly role: Role;
  readonly name: string;
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<number | string>;
  /** Every line it printed. */
  readonly lines: string[];
  killedBySoak: boolean;
}

/** Spawns a node script, keeps every line, resolves `ready` on a line starting with "ready". */
function spawnChild(
  role: Role,
  name: string,
  script: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  onLine: (child: Child, line: string) => void,
): Child {
  const child = spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  adoptChild(child);
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    void exited.then((code) => reject(new Error(`${name} exited (${code}) before it was ready:\n${record.lines.slice(-20).join('\n')}`)));
  });
  ready.catch(() => undefined);
  const record: Child = { role, name, child, ready, exited, lines: [], killedBySoak: false };
  for (const stream of [child.stdout, child.stderr]) {
    let pending = '';
    stream?.on('data', (chunk: Buffer) => {
      const parts = (pending + chunk.toString()).split('\n');
      pending = parts.pop() ?? '';
      for (const line of parts) {
        record.lines.push(line);
        if (line.startsWith('ready')) markReady();
        onLine(record, line);
      }
    });
    stream?.on('end', () => {
      if (pending !== '') record.lines.push(pending);
    });
  }
  return record;
}

class EmbeddedCluster {
  app: Child | undefined;
  readonly workers: (Child | undefined)[];
  readonly finished: Child[] = [];
  unexpectedExits = 0;
  private closing = false;
  private generation = 0;
  private holdWatch: ((child: Child, exec: string) => void) | undefined;
  private txWatch: ((child: Child, n: number) => void) | undefined;

  constructor(
    private readonly env: NodeJS.ProcessEnv,
    workers: number,
  ) {
    this.workers = Array.from({ length: workers }, () => undefined);
  }

  private readonly onLine = (child: Child, line: string): void => {
    if (line.startsWith('hold-start ')) this.holdWatch?.(child, line.slice('hold-start '.length));
    if (line.startsWith('tx-open ')) this.txWatch?.(child, Number(line.slice('tx-open '.length)));
  };

  /**
   * Waits (up to `withinMs`) for the application to say it holds a transaction open, SIGKILLs it on that
   * line and restarts it. Answers the number of that transaction and the first number the restarted
   * application enqueues (the same number when the transaction did not commit), or undefined.
   */
  async killAppInTransaction(withinMs: number): Promise<{ n: number; restartedAt: number } | undefined> {
    const caught = await new Promise<{ child: Child; n: number } | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.txWatch = undefined;
        resolve(undefined);
      }, withinMs);
      this.txWatch = (child, n) => {
        if (child !== this.app || child.killedBySoak) return;
        this.txWatch = undefined;
        clearTimeout(timer);
        child.killedBySoak = true;
        child.child.kill('SIGKILL');
        resolve({ child, n });
      };
    });
    if (caught === undefined) return undefined;
    await caught.child.exited;
    await this.startApp();
    const ready = this.app?.lines.find((line) => line.startsWith('ready ')) ?? '';
    return { n: caught.n, restartedAt: Number(ready.slice('ready '.length)) };
  }

  async start(): Promise<void> {
    await Promise.all([this.startApp(), ...this.workers.map((_, i) => this.startWorker(i))]);
  }

  async startApp(): Promise<void> {
    const app = spawnChild('app', `app-g${++this.generation}`, APP_SCRIPT, [], this.env, this.onLine);
    this.app = app;
    this.track(app, () => this.startApp());
    await app.ready;
  }

  async startWorker(index: number): Promise<void> {
    const name = `soak-w${index}-g${++this.generation}`;
    const worker = spawnChild('worker', name, WORKER_SCRIPT, [name], this.env, this.onLine);
    this.workers[index] = worker;
    this.track(worker, () => this.startWorker(index));
    await worker.ready;
  }

  async kill(victim: Child | undefined): Promise<void> {
    if (victim === undefined) return;
    victim.killedBySoak = true;
    if (victim.child.exitCode === null && victim.child.signalCode === null) victim.child.kill('SIGKILL');
    await victim.exited;
  }

  /**
   * Waits (up to `withinMs`) for a worker to print that it holds the write lock, SIGKILLs it on that
   * line, and starts its replacement; answers the hold's exec, or undefined when no hold began in time.
   */
  async killHolder(withinMs: number): Promise<string | undefined> {
    const caught = await new Promise<{ child: Child; exec: string } | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.holdWatch = undefined;
        resolve(undefined);
      }, withinMs);
      this.holdWatch = (child, exec) => {
        if (child.killedBySoak || !this.workers.includes(child)) return;
        this.holdWatch = undefined;
        clearTimeout(timer);
        // Killed here, in the callback of the line, while the hold sleeps inside its transaction.
        child.killedBySoak = true;
        child.child.kill('SIGKILL');
        resolve({ child, exec });
      };
    });
    if (caught === undefined) return undefined;
    await caught.child.exited;
    await this.startWorker(this.workers.indexOf(caught.child));
    return caught.exec;
  }

  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  async terminate(victim: Child | undefined, graceMs: number): Promise<void> {
    if (victim === undefined || victim.child.exitCode !== null || victim.child.signalCode !== null) return;
    victim.killedBySoak = true;
    victim.child.kill('SIGTERM');
    const timer = setTimeout(() => victim.child.kill('SIGKILL'), graceMs);
    await victim.exited;
    clearTimeout(timer);
  }

  async stopApp(): Promise<void> {
    this.closing = true;
    await this.terminate(this.app, 10_000);
  }

  async stopWorkers(): Promise<void> {
    this.closing = true;
    await Promise.all(this.workers.map((w) => this.terminate(w, 5_000)));
  }

  async stopAll(): Promise<void> {
    this.closing = true;
    await Promise.all([this.app, ...this.workers].map((c) => this.kill(c)));
  }

  private track(child: Child, replace: () => Promise<void>): void {
    void child.exited.then(() => {
      this.finished.push(child);
      const current = child === this.app || this.workers.includes(child);
      if (!child.killedBySoak && current && !this.closing) {
        this.unexpectedExits += 1;
        replace().catch(() => undefined);
      }
    });
  }
}

/** What the audit reads after the run, from the store's own tables and the application's. */
interface TableReader {
  orders(): Promise<{ n: number; job_id: string; via: string }[]>;
  jobKeys(): Promise<{ id: string; idempotency_key: string }[]>;
  resultRowsNotOne(): Promise<number>;
  holdExecs(): Promise<Set<string>>;
  close(): Promise<void>;
}

function sqliteTables(file: string): TableReader {
  const db = new Database(file, { readonly: true });
  return {
    orders: async () => db.prepare('SELECT n, job_id, via FROM soak_app_orders ORDER BY n').all() as { n: number; job_id: string; via: string }[],
    jobKeys: async () => db.prepare('SELECT id, idempotency_key FROM jobs WHERE tenant = ?').all(SOAK_TENANT) as { id: string; idempotency_key: string }[],
    resultRowsNotOne: async () =>
      (
        db
          .prepare(
            `SELECT count(*) AS n FROM jobs j WHERE j.tenant = ? AND j.status = 'succeeded' AND (SELECT count(*) FROM job_results r WHERE r.job_seq = j.seq) <> 1`,
          )
          .get(SOAK_TENANT) as { n: number }
      ).n,
    holdExecs: async () => new Set((db.prepare('SELECT exec FROM soak_holds').all() as { exec: string }[]).map((r) => r.exec)),
    close: async () => {
      db.close();
    },
  };
}

async function postgresTables(url: string): Promise<TableReader> {
  const parsed = new URL(url);
  const schema = `"${(parsed.searchParams.get('schema') ?? 'leasehold').replace(/"/g, '""')}"`;
  parsed.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: parsed.toString() });
  await client.connect();
  return {
    orders: async () =>
      (await client.query<{ n: number; job_id: string; via: string }>(`SELECT n::int AS n, job_id, via FROM ${schema}.soak_app_orders ORDER BY n`)).rows,
    jobKeys: async () =>
      (
        await client.query<{ id: string; idempotency_key: string }>(`SELECT id::text AS id, idempotency_key FROM ${schema}.jobs WHERE tenant = $1`, [
          SOAK_TENANT,
        ])
      ).rows,
    resultRowsNotOne: async () =>
      (
        await client.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${schema}.jobs j WHERE j.tenant = $1 AND j.status = 'succeeded' AND (SELECT count(*) FROM ${schema}.job_results r WHERE r.job_id = j.id) <> 1`,
          [SOAK_TENANT],
        )
      ).rows[0]?.n ?? 0,
    holdExecs: async () => new Set<string>(),
    close: () => client.end(),
  };
}

async function createAppTables(db: string, isPostgres: boolean): Promise<void> {
  if (!isPostgres) {
    const file = new Database(db);
    file.exec(APP_TABLE_SQL);
    file.exec(HOLDS_TABLE_SQL);
    file.close();
    return;
  }
  const parsed = new URL(db);
  const schema = `"${(parsed.searchParams.get('schema') ?? 'leasehold').replace(/"/g, '""')}"`;
  parsed.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: parsed.toString() });
  await client.connect();
  try {
    await client.query(APP_TABLE_SQL.replace('soak_app_orders', `${schema}.soak_app_orders`));
  } finally {
    await client.end();
  }
}

export async function runEmbeddedSoak(options: EmbeddedSoakOptions): Promise<EmbeddedSoakSummary> {
  const log = options.log ?? ((): void => undefined);
  const seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
  const random = seededRandom(seed);
  const backend = options.backend ?? 'sqlite';
  const isPostgres = backend === 'postgres';
  const leaseMs = options.leaseMs ?? 3_000;
  const [minGap, maxGap] = options.killGapMs ?? [2_000, 5_000];
  const wallStart = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-esoak-'));
  if (isPostgres && options.postgresUrl === undefined) throw new Error('the postgres backend needs a postgres:// URL (--db or DATABASE_URL)');
  const fresh = isPostgres ? await freshPostgresDb(options.postgresUrl as string) : undefined;
  const db = fresh?.url ?? join(dir, 'soak.db');
  const ledgerFile = join(dir, 'ledger.jsonl');
  writeFileSync(ledgerFile, '');
  log(`seed ${seed}; embedded, ${isPostgres ? 'postgres' : `sqlite ${db}`}; ledger ${ledgerFile}`);

  // This process's Queue runs the migrations before anyone else opens the database, then watches and audits.
  let queue: Queue | undefined;
  const cluster = new EmbeddedCluster(
    {
      SOAK_DB: db,
      SOAK_LEDGER: ledgerFile,
      SOAK_LEASE_MS: String(leaseMs),
      SOAK_RATE: String(options.jobsPerSecond ?? 40),
      SOAK_CONCURRENCY: String(options.concurrency ?? 8),
      SOAK_HOLD_MS: String(options.holdMs ?? 200),
      SOAK_TX_HOLD_MS: String(options.txHoldMs ?? 150),
      LEASEHOLD_CRASH_AT: '',
    },
    options.workers ?? 2,
  );
  try {
    queue = await openQueue({ db, tenant: SOAK_TENANT, config: soakQueueConfig });
    await createAppTables(db, isPostgres);
    await cluster.start();
    const loadStart = performance.now();
    const at = (): string => `${((performance.now() - loadStart) / 1000).toFixed(1)}s`;
    const stopLoad = new AbortController();
    const kills = { app: 0, appInsideTransaction: 0, worker: 0, workerHoldingLock: 0, total: 0 };
    let appKillsConfirmedInside = 0;
    const killedHolds: string[] = [];
    let holderKillsMissed = 0;

    let chaosError: unknown;
    const chaos = (async () => {
      type Target = 'app' | 'app-in-transaction' | 'worker' | 'holder';
      let bag: Target[] = [];
      for (;;) {
        await abortablePause(minGap + random() * (maxGap - minGap), stopLoad.signal);
        if (stopLoad.signal.aborted) return;
        if (bag.length === 0) {
          bag = shuffle<Target>(
            isPostgres ? ['app', 'app-in-transaction', 'worker', 'worker'] : ['app', 'app-in-transaction', 'worker', 'worker', 'holder'],
            random,
          );
        }
        const target = bag.pop() as Target;
        const killedAt = performance.now();
        if (target === 'app') {
          await cluster.kill(cluster.app);
          const downMs = Math.round(random() * 500);
          await abortablePause(downMs, undefined);
          await cluster.startApp();
          kills.app += 1;
          log(`[${at()}] SIGKILL application, down ${downMs} ms, enqueuing again ${Math.round(performance.now() - killedAt)} ms after the kill`);
        } else if (target === 'app-in-transaction') {
          const caught = await cluster.killAppInTransaction(Math.max(5_000, maxGap));
          if (caught === undefined) {
            holderKillsMissed += 1;
            log(`[${at()}] the application opened no held transaction in time; no kill`);
            continue;
          }
          kills.appInsideTransaction += 1;
          if (caught.restartedAt === caught.n) appKillsConfirmedInside += 1;
          log(
            `[${at()}] SIGKILL application inside its transaction ${caught.n}; restarted at ${caught.restartedAt}, ${Math.round(performance.now() - killedAt)} ms after`,
          );
        } else if (target === 'worker') {
          const index = Math.floor(random() * cluster.workers.length);
          await cluster.kill(cluster.workers[index]);
          await cluster.startWorker(index);
          kills.worker += 1;
          log(`[${at()}] SIGKILL worker ${index}, replacement up after ${Math.round(performance.now() - killedAt)} ms`);
        } else {
          const exec = await cluster.killHolder(Math.max(5_000, maxGap));
          if (exec === undefined) {
            holderKillsMissed += 1;
            log(`[${at()}] no worker began a hold in time; no kill`);
            continue;
          }
          killedHolds.push(exec);
          kills.workerHoldingLock += 1;
          log(`[${at()}] SIGKILL a worker holding the write lock (hold ${exec}), replacement up after ${Math.round(performance.now() - killedAt)} ms`);
        }
        kills.total += 1;
      }
    })().catch((error: unknown) => {
      chaosError = error;
      stopLoad.abort();
    });
    await abortablePause(options.durationMs, stopLoad.signal);
    stopLoad.abort();
    await chaos;
    if (chaosError !== undefined) throw chaosError;
    await cluster.stopApp();
    const loadSeconds = (performance.now() - loadStart) / 1000;
    log(`[${at()}] load stopped after ${kills.total} kills; draining`);

    const drainStart = performance.now();
    const unavailableReads = { unavailable: 0 };
    await drained(queue, options.drainTimeoutMs ?? 120_000, unavailableReads, log);
    const drainSeconds = (performance.now() - drainStart) / 1000;
    const stats = await statsWhenAvailable(queue, performance.now() + 30_000, unavailableReads, log);
    await cluster.stopWorkers();
    log(`[${at()}] drained in ${drainSeconds.toFixed(1)} s; auditing`);

    const tables = isPostgres ? await postgresTables(db) : sqliteTables(db);
    let extra: {
      orders: { n: number; job_id: string; via: string }[];
      jobsWithoutTheirTransaction: number;
      rowsNamingAnotherJob: number;
      unrecordedEnqueues: number;
      resultRowsNotOne: number;
      holdsCommitted: number;
      holdsSurvivingTheirKill: number;
    };
    const examples: string[] = [];
    try {
      const orders = await tables.orders();
      const byKey = new Map((await tables.jobKeys()).map((j) => [j.idempotency_key, j.id]));
      const ordered = new Set(orders.map((o) => o.n));
      let jobsWithoutTheirTransaction = 0,
        unrecordedEnqueues = 0,
        rowsNamingAnotherJob = 0;
      for (const key of byKey.keys()) {
        const n = Number(/^soak-(\d+)$/.exec(key)?.[1] ?? NaN);
        if (ordered.has(n)) continue;
        if (viaOf(n) === 'transaction') {
          jobsWithoutTheirTransaction += 1;
          if (examples.length < 15) examples.push(`job ${byKey.get(key)} (${key}) exists without its application row`);
        } else unrecordedEnqueues += 1;
      }
      for (const order of orders) {
        if (byKey.get(`soak-${order.n}`) !== order.job_id) {
          rowsNamingAnotherJob += 1;
          if (examples.length < 15) examples.push(`order ${order.n} names ${order.job_id}, the store has ${byKey.get(`soak-${order.n}`) ?? 'none'}`);
        }
      }
      const holds = await tables.holdExecs();
      const holdsSurvivingTheirKill = killedHolds.filter((exec) => holds.has(exec)).length;
      extra = {
        orders,
        jobsWithoutTheirTransaction,
        rowsNamingAnotherJob,
        unrecordedEnqueues,
        resultRowsNotOne: await tables.resultRowsNotOne(),
        holdsCommitted: holds.size,
        holdsSurvivingTheirKill,
      };
    } finally {
      await tables.close();
    }
    const accepted = extra.orders.map((o) => ({ n: o.n, idempotencyKey: `soak-${o.n}`, id: o.job_id }));
    const q = queue;
    const findings = await audit(
      { listJobs: (query) => q.list(query), getJob: (id) => q.get(id), attempts: (id) => q.attempts(id) },
      accepted,
      readFileSync(ledgerFile, 'utf8'),
    );
    await cluster.stopAll();
    const everyProcess = cluster.finished;
    const tokens = await recordedLeaseTokens(db);
    const logLinesWithSecrets = linesWithSecrets(
      everyProcess.map((c) => c.lines.join('\n')),
      [],
      tokens,
    );
    const appRetries: Record<string, number> = {};
    for (const line of everyProcess.filter((c) => c.role === 'app').flatMap((c) => c.lines)) {
      if (!line.startsWith('{"retry"')) continue;
      const code = (JSON.parse(line) as { retry: string }).retry;
      appRetries[code] = (appRetries[code] ?? 0) + 1;
    }
    const workerRetries = everyProcess
      .filter((c) => c.role === 'worker')
      .flatMap((c) => c.lines)
      .filter((line) => line.includes('coordinator call failed; retrying')).length;
    const ok =
      findings.lost === 0 &&
      findings.duplicateCommits === 0 &&
      findings.wrongFate === 0 &&
      extra.jobsWithoutTheirTransaction === 0 &&
      extra.rowsNamingAnotherJob === 0 &&
      extra.resultRowsNotOne === 0 &&
      extra.holdsSurvivingTheirKill === 0 &&
      logLinesWithSecrets === 0;
    const { examples: auditExamples, ...counts } = findings;
    return {
      mode: 'embedded',
      seed,
      backend,
      loadSeconds: round(loadSeconds),
      drainSeconds: round(drainSeconds),
      wallSeconds: round((performance.now() - wallStart) / 1000),
      accepted: accepted.length,
      acceptedInTransaction: extra.orders.filter((o) => o.via === 'transaction').length,
      kills,
      appKillsConfirmedInside,
      holderKillsMissed,
      holdsCommitted: extra.holdsCommitted,
      holdsSurvivingTheirKill: extra.holdsSurvivingTheirKill,
      jobsWithoutTheirTransaction: extra.jobsWithoutTheirTransaction,
      rowsNamingAnotherJob: extra.rowsNamingAnotherJob,
      unrecordedEnqueues: extra.unrecordedEnqueues,
      resultRowsNotOne: extra.resultRowsNotOne,
      leaseExpiries: stats.leaseExpirations,
      drainReadsUnavailable: unavailableReads.unavailable,
      ...counts,
      appRetries,
      workerRetries,
      secretsChecked: { leaseTokens: tokens.length },
      logLinesWithSecrets,
      unexpectedExits: cluster.unexpectedExits,
      loadAverage: loadavg().map(round),
      examples: [...examples, ...auditExamples],
      ok,
    };
  } finally {
    await cluster.stopAll();
    await queue?.close();
    await fresh?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * queue.stats(); a `store_unavailable` answer is tried again a second later, as its Retry-After says,
 * and counted in `tally`, with the store's own error in the log.
 */
async function statsWhenAvailable(
  queue: Queue,
  deadline: number,
  tally: { unavailable: number },
  log: (line: string) => void,
): Promise<Awaited<ReturnType<Queue['stats']>>> {
  for (;;) {
    try {
      return await queue.stats();
    } catch (error) {
      if (!(error instanceof LeaseholdError) || error.code !== 'store_unavailable' || performance.now() > deadline) throw error;
      tally.unavailable += 1;
      const cause = await queue.store.stats({ tenant: SOAK_TENANT }).then(
        () => 'the next read succeeded',
        (storeError: unknown) => {
          const inner = (storeError as { cause?: { code?: unknown; message?: unknown } }).cause;
          return `${String(inner?.code ?? '')} ${String(inner?.message ?? storeError)}`;
        },
      );
      log(`queue.stats() answered store_unavailable (${cause}); trying again`);
      await abortablePause(1_000, undefined);
    }
  }
}

/** Waits until no job is queued or running, by the store's counts. */
async function drained(queue: Queue, timeoutMs: number, tally: { unavailable: number }, log: (line: string) => void): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const { counts } = await statsWhenAvailable(queue, deadline, tally, log);
    if ((counts['queued'] ?? 0) + (counts['running'] ?? 0) === 0) return;
    if (performance.now() > deadline) throw new Error(`the queue did not drain within ${timeoutMs} ms: ${JSON.stringify(counts)}`);
    await abortablePause(250, undefined);
  }
}

export function formatEmbeddedSummary(summary: EmbeddedSoakSummary): string {
  const rows: [string, string | number][] = [
    ['mode', `embedded (an application and ${summary.backend === 'sqlite' ? 'two workers on one SQLite file' : 'two workers on one PostgreSQL schema'})`],
    ['seed', summary.seed],
    ['backend', summary.backend],
    ['load / drain / wall (s)', `${summary.loadSeconds} / ${summary.drainSeconds} / ${summary.wallSeconds}`],
    ['accepted (application rows)', summary.accepted],
    ['  of those in the application\u2019s transaction', summary.acceptedInTransaction],
    ['  application retries (by code)', JSON.stringify(summary.appRetries)],
    [
      'kills (app + app inside its transaction + worker + worker holding the write lock)',
      `${summary.kills.total} (${summary.kills.app} + ${summary.kills.appInsideTransaction} + ${summary.kills.worker} + ${summary.kills.workerHoldingLock})`,
    ],
    [
      '  app kills inside the transaction, restarted at that number (it had not committed)',
      `${summary.appKillsConfirmedInside} of ${summary.kills.appInsideTransaction}`,
    ],
    ['  aimed kills that found no open transaction or hold', summary.holderKillsMissed],
    ['holds committed / surviving their kill (must be 0)', `${summary.holdsCommitted} / ${summary.holdsSurvivingTheirKill}`],
    ['lease expiries (stats / attempt histories)', `${summary.leaseExpiries} / ${summary.expiredAttempts}`],
    ['succeeded', summary.succeeded],
    ['dead (policy expects)', `${summary.dead} (${summary.deadExpectedByPolicy})`],
    ['executions (ledger lines)', summary.executions],
    ['duplicate executions (allowed)', summary.duplicateExecutions],
    ['executions under an expired lease', summary.executionsUnderExpiredLeases],
    ['duplicate commits (must be 0)', summary.duplicateCommits],
    ['succeeded jobs without exactly one result row (must be 0)', summary.resultRowsNotOne],
    ['lost (must be 0)', summary.lost],
    ['ended against policy (must be 0)', summary.wrongFate],
    ['jobs without their transaction\u2019s row (must be 0)', summary.jobsWithoutTheirTransaction],
    ['application rows naming another job (must be 0)', summary.rowsNamingAnotherJob],
    ['enqueued, answer lost to a kill, never recorded', summary.unrecordedEnqueues],
    ['worker store-call retries', summary.workerRetries],
    ['store_unavailable answers to the soak\u2019s own reads while draining', summary.drainReadsUnavailable],
    ['log lines with a lease token (must be 0)', `${summary.logLinesWithSecrets} (searched: ${summary.secretsChecked.leaseTokens} tokens)`],
    ['unexpected process exits', summary.unexpectedExits],
    ['load average (1/5/15 min)', summary.loadAverage.join(' ')],
    ['verdict', summary.ok ? 'OK' : 'FAILED'],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  return [...rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`), ...summary.examples.map((e) => `  ! ${e}`)].join('\n');
}
