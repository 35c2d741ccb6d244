/**
 * `npm run soak -- --minutes N [--db FILE|postgres://…] [--seed S]`: the chaos
 * soak. A coordinator and three worker processes run under continuous
 * enqueue load while, at random moments drawn from a seeded generator, a
 * random worker or the coordinator itself is SIGKILLed and restarted (the
 * coordinator on the same database and port). Then the queue is drained and
 * audited (bench/soak-audit.ts): every acknowledged job is succeeded or dead
 * as its policy says, every committed result came from exactly one execution,
 * none is missing, and no log line of any process holds an API key or a
 * lease token. Prints a table and one JSON line; exits 1 when a job was lost,
 * committed twice or ended against its policy, or a secret was logged.
 *
 * Lease expiries are counted twice, independently: the coordinator's durable
 * counter (GET /stats leaseExpirations) and the attempts that ended `expired`
 * in the histories of the jobs leased more than once.
 *
 * `--mode embedded [--backend sqlite|postgres]` runs the library mode's soak
 * instead (bench/soak-embedded.ts): no coordinator, an application process and
 * two worker processes on one database.
 */

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { LeaseholdClient } from '../src/client/leasehold-client.js';
import { freshPostgresDb } from './postgres-db.js';
import { createKey, freePort, median, ROOT } from './processes.js';
import { audit, type AuditFindings } from './soak-audit.js';
import { SoakCluster, type ProcessLog } from './soak-cluster.js';
import { abortablePause, round, shuffle } from './soak-common.js';
import { seededRandom } from './seeded-random.js';
import { linesWithSecrets, recordedLeaseTokens } from './soak-secrets.js';
import { produce } from './soak-producer.js';
import { formatEmbeddedSummary, runEmbeddedSoak } from './soak-embedded.js';

// Other harnesses take the generator from here too.
export { seededRandom };

export interface SoakOptions {
  /** How long load and kills last; the drain and the audit come after. */
  readonly durationMs: number;
  /** A SQLite file path or a postgres:// URL (a fresh schema is made in it). Default: a SQLite file in a temp dir. */
  readonly db?: string;
  readonly seed?: number;
  readonly jobsPerSecond?: number;
  readonly workers?: number;
  readonly concurrency?: number;
  readonly leaseMs?: number;
  /** Pause between kills, drawn uniformly from this range. */
  readonly killGapMs?: readonly [number, number];
  /** How long the queue may take to empty after the load stops. */
  readonly drainTimeoutMs?: number;
  /** Progress lines (kills, phases). */
  readonly log?: (line: string) => void;
}

export interface SoakSummary extends Omit<AuditFindings, 'examples'> {
  readonly seed: number;
  readonly backend: 'sqlite' | 'postgres';
  readonly loadSeconds: number;
  readonly wallSeconds: number;
  readonly drainSeconds: number;
  readonly accepted: number;
  readonly replayedAcks: number;
  readonly batchRetries: number;
  readonly producerNetworkErrors: number;
  readonly producer5xx: Readonly<Record<string, number>>;
  readonly refused: Readonly<Record<string, number>>;
  readonly unacknowledgedByProducer: number;
  readonly kills: { readonly coordinator: number; readonly worker: number; readonly total: number };
  readonly coordinatorRestartMs: { readonly median: number; readonly max: number };
  readonly leaseExpiries: number;
  readonly workerRetries: number;
  readonly worker5xx: Readonly<Record<string, number>>;
  readonly coordinatorInternalErrors: number;
  /** Secrets searched for in every process's output: the API keys and each job's last lease token. */
  readonly secretsChecked: { readonly keys: number; readonly leaseTokens: number };
  /** Log lines that contain one of them (must be 0). */
  readonly logLinesWithSecrets: number;
  readonly unexpectedExits: number;
  readonly loadAverage: readonly number[];
  readonly examples: readonly string[];
  readonly ok: boolean;
}

export async function runSoak(options: SoakOptions): Promise<SoakSummary> {
  const log = options.log ?? ((): void => undefined);
  const seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
  const random = seededRandom(seed);
  const leaseMs = options.leaseMs ?? 3_000;
  const [minGap, maxGap] = options.killGapMs ?? [2_000, 5_000];
  const wallStart = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-soak-'));
  const isPostgres = options.db?.startsWith('postgres://') === true || options.db?.startsWith('postgresql://') === true;
  const fresh = isPostgres ? await freshPostgresDb(options.db as string) : undefined;
  const db = fresh?.url ?? options.db ?? join(dir, 'soak.db');
  const ledgerFile = join(dir, 'ledger.jsonl');
  writeFileSync(ledgerFile, '');
  log(`seed ${seed}; ${isPostgres ? 'postgres' : `sqlite ${db}`}; ledger ${ledgerFile}`);

  const adminKey = createKey(db, 'soak', 'soak-admin', 'admin');
  const workerKey = createKey(db, 'soak', 'soak-worker', 'worker');
  const cluster = new SoakCluster({
    db,
    port: await freePort(),
    workerKey,
    handlers: join(ROOT, 'dist', 'bench', 'soak-handlers.js'),
    workers: options.workers ?? 3,
    concurrency: options.concurrency ?? 8,
    leaseMs,
    ledgerFile,
    serveArgs: ['--reaper-interval-ms', '200', '--backoff-base-ms', '100', '--backoff-max-ms', '1000'],
  });
  const client = new LeaseholdClient({ baseUrl: cluster.url, apiKey: adminKey, connections: 16 });
  let logs: ProcessLog[] = [];
  try {
    await cluster.start();
    const loadStart = performance.now();
    const stopLoad = new AbortController();
    const kills = { coordinator: 0, worker: 0, total: 0 };
    const restartMs: number[] = [];
    const at = (): string => `${((performance.now() - loadStart) / 1000).toFixed(1)}s`;

    let chaosError: unknown;
    const chaos = (async () => {
      // Each round of three kills hits the coordinator once and workers twice, in a random order.
      let bag: ('coordinator' | 'worker')[] = [];
      for (;;) {
        await abortablePause(minGap + random() * (maxGap - minGap), stopLoad.signal);
        if (stopLoad.signal.aborted) return;
        if (bag.length === 0) bag = shuffle(['coordinator', 'worker', 'worker'], random);
        const target = bag.pop() as 'coordinator' | 'worker';
        const killedAt = performance.now();
        if (target === 'coordinator') {
          const downMs = Math.round(random() * 1_000);
          await cluster.killCoordinator(downMs);
          kills.coordinator += 1;
          restartMs.push(performance.now() - killedAt - downMs);
          log(`[${at()}] SIGKILL coordinator, down ${downMs} ms, listening again ${Math.round(performance.now() - killedAt)} ms after the kill`);
        } else {
          const index = Math.floor(random() * cluster.workerCount);
          await cluster.killWorker(index);
          kills.worker += 1;
          log(`[${at()}] SIGKILL worker ${index}, replacement up after ${Math.round(performance.now() - killedAt)} ms`);
        }
        kills.total += 1;
      }
    })().catch((error: unknown) => {
      // A process that cannot be restarted ends the load at once; the error is thrown after the producer stopped.
      chaosError = error;
      stopLoad.abort();
    });
    const producing = produce({ client, jobsPerSecond: options.jobsPerSecond ?? 40, leaseMs, signal: stopLoad.signal });
    await abortablePause(options.durationMs, stopLoad.signal);
    stopLoad.abort();
    const [tally] = await Promise.all([producing, chaos]);
    if (chaosError !== undefined) throw chaosError;
    const loadSeconds = (performance.now() - loadStart) / 1000;
    log(`[${at()}] load stopped: ${tally.accepted.length} accepted, ${kills.total} kills; draining`);

    const drainStart = performance.now();
    await drained(client, options.drainTimeoutMs ?? 120_000);
    const drainSeconds = (performance.now() - drainStart) / 1000;
    const stats = await client.stats();
    await cluster.stopWorkers();
    log(`[${at()}] drained in ${drainSeconds.toFixed(1)} s; auditing`);
    const findings = await audit(client, tally.accepted, readFileSync(ledgerFile, 'utf8'));
    logs = await cluster.stop();
    const workerLogs = logs.filter((l) => l.role === 'worker').map((l) => l.output);
    const retryLines = workerLogs.flatMap((output) => output.split('\n').filter((line) => line.includes('coordinator call failed; retrying')));
    const worker5xx: Record<string, number> = {};
    for (const line of retryLines) {
      const status = /"status":(5\d\d)/.exec(line)?.[1];
      if (status !== undefined) worker5xx[status] = (worker5xx[status] ?? 0) + 1;
    }
    const tokens = await recordedLeaseTokens(db);
    const logLinesWithSecrets = linesWithSecrets(
      logs.map((l) => l.output),
      [adminKey, workerKey],
      tokens,
    );
    const coordinatorInternalErrors = logs
      .filter((l) => l.role === 'coordinator')
      .reduce((sum, l) => sum + l.output.split('\n').filter((line) => line.includes('"msg":"request failed"')).length, 0);
    const ok = findings.lost === 0 && findings.duplicateCommits === 0 && findings.wrongFate === 0 && logLinesWithSecrets === 0;
    return {
      seed,
      backend: isPostgres ? 'postgres' : 'sqlite',
      loadSeconds: round(loadSeconds),
      wallSeconds: round((performance.now() - wallStart) / 1000),
      drainSeconds: round(drainSeconds),
      accepted: tally.accepted.length,
      replayedAcks: tally.replayedAcks,
      batchRetries: tally.batchRetries,
      producerNetworkErrors: tally.networkErrors,
      producer5xx: tally.serverErrors,
      refused: tally.refused,
      unacknowledgedByProducer: tally.unacknowledged,
      kills,
      coordinatorRestartMs: restartMs.length === 0 ? { median: 0, max: 0 } : { median: Math.round(median(restartMs)), max: Math.round(Math.max(...restartMs)) },
      leaseExpiries: stats.leaseExpirations,
      ...findings,
      workerRetries: retryLines.length,
      worker5xx,
      coordinatorInternalErrors,
      secretsChecked: { keys: 2, leaseTokens: tokens.length },
      logLinesWithSecrets,
      unexpectedExits: cluster.unexpectedExits,
      loadAverage: loadavg().map(round),
      ok,
    };
  } finally {
    await client.close();
    if (logs.length === 0) await cluster.stop();
    await fresh?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Waits until no job is queued or running (the store's counts, read through GET /stats). */
async function drained(client: LeaseholdClient, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const { counts } = await client.stats();
    if ((counts['queued'] ?? 0) + (counts['running'] ?? 0) === 0) return;
    if (performance.now() > deadline) throw new Error(`the queue did not drain within ${timeoutMs} ms: ${JSON.stringify(counts)}`);
    await abortablePause(250, undefined);
  }
}

/** The summary as a two-column table. */
export function formatSummary(summary: SoakSummary): string {
  const rows: [string, string | number][] = [
    ['seed', summary.seed],
    ['backend', summary.backend],
    ['load / drain / wall (s)', `${summary.loadSeconds} / ${summary.drainSeconds} / ${summary.wallSeconds}`],
    ['accepted', summary.accepted],
    ['  acknowledged by a replay', summary.replayedAcks],
    ['  batch retries (no answer)', `${summary.batchRetries} (network errors ${summary.producerNetworkErrors}, 5xx ${JSON.stringify(summary.producer5xx)})`],
    ['  refused / given up', `${JSON.stringify(summary.refused)} / ${summary.unacknowledgedByProducer}`],
    ['kills (coordinator + worker)', `${summary.kills.total} (${summary.kills.coordinator} + ${summary.kills.worker})`],
    ['coordinator start-up after a kill, ms (median / max)', `${summary.coordinatorRestartMs.median} / ${summary.coordinatorRestartMs.max}`],
    ['lease expiries (stats / attempt histories)', `${summary.leaseExpiries} / ${summary.expiredAttempts}`],
    ['succeeded', summary.succeeded],
    ['dead (policy expects)', `${summary.dead} (${summary.deadExpectedByPolicy})`],
    ['executions (ledger lines)', summary.executions],
    ['duplicate executions (allowed)', summary.duplicateExecutions],
    ['executions under an expired lease', summary.executionsUnderExpiredLeases],
    ['duplicate commits (must be 0)', summary.duplicateCommits],
    ['lost (must be 0)', summary.lost],
    ['ended against policy (must be 0)', summary.wrongFate],
    ['jobs nobody acknowledged', summary.unacknowledgedJobs],
    ['worker retries (5xx among them)', `${summary.workerRetries} (${JSON.stringify(summary.worker5xx)})`],
    ['coordinator internal errors', summary.coordinatorInternalErrors],
    [
      'log lines with a key or lease token (must be 0)',
      `${summary.logLinesWithSecrets} (searched: ${summary.secretsChecked.keys} keys, ${summary.secretsChecked.leaseTokens} tokens)`,
    ],
    ['unexpected process exits', summary.unexpectedExits],
    ['load average (1/5/15 min)', summary.loadAverage.join(' ')],
    ['verdict', summary.ok ? 'OK' : 'FAILED'],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  const lines = rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`);
  return [...lines, ...summary.examples.map((e) => `  ! ${e}`)].join('\n');
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '1' },
      db: { type: 'string' },
      seed: { type: 'string' },
      rate: { type: 'string' },
      mode: { type: 'string', default: 'http' },
      backend: { type: 'string', default: 'sqlite' },
    },
  });
  const minutes = Number(values.minutes);
  const seed = values.seed === undefined ? undefined : Number(values.seed);
  const rate = values.rate === undefined ? undefined : Number(values.rate);
  if (!(minutes > 0)) throw new Error('--minutes must be a positive number');
  if (seed !== undefined && !Number.isInteger(seed)) throw new Error('--seed must be an integer');
  if (rate !== undefined && !(rate > 0)) throw new Error('--rate must be a positive number of jobs per second');
  if (values.mode !== 'http' && values.mode !== 'embedded') throw new Error('--mode must be http or embedded');
  if (values.mode === 'embedded') {
    // The library mode (bench/soak-embedded.ts): an application process and two workers on one database, no coordinator.
    if (values.backend !== 'sqlite' && values.backend !== 'postgres') throw new Error('--backend must be sqlite or postgres');
    const postgresUrl = values.db ?? process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
    const embedded = await runEmbeddedSoak({
      durationMs: minutes * 60_000,
      backend: values.backend,
      ...(values.backend === 'postgres' ? { postgresUrl } : {}),
      ...(seed === undefined ? {} : { seed }),
      ...(rate === undefined ? {} : { jobsPerSecond: rate }),
      log: (line) => process.stderr.write(`${line}\n`),
    });
    process.stdout.write(`${formatEmbeddedSummary(embedded)}\n${JSON.stringify(embedded)}\n`);
    return embedded.ok ? 0 : 1;
  }
  const summary = await runSoak({
    durationMs: minutes * 60_000,
    ...(values.db === undefined ? {} : { db: values.db }),
    ...(seed === undefined ? {} : { seed }),
    ...(rate === undefined ? {} : { jobsPerSecond: rate }),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  process.stdout.write(`${formatSummary(summary)}\n${JSON.stringify(summary)}\n`);
  return summary.ok ? 0 : 1;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`soak: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(2);
    },
  );
}
