/**
 * PostgreSQL crashes and comes back under load. A real coordinator process
 * over a private PostgreSQL server (never the shared one other tests use),
 * two real worker processes running the `ledger` handler, and a producer in
 * this process enqueueing without pause. The server is killed as a crash
 * would (pg_ctl stop -m immediate) while all of them are busy, and started
 * again once both the producer and a worker have been refused.
 *
 * Meanwhile every request must answer 503 store_unavailable, never 500; the
 * producer retries with the same idempotency key, so a retried enqueue cannot
 * duplicate; the workers retry on their own. Afterwards every enqueue that was
 * answered 202 names a job that exists and ends succeeded, there are no other
 * jobs, and nothing is left queued or running once the workers drain.
 *
 * Runs when DATABASE_URL is set (as in CI); missing PostgreSQL binaries then
 * fail the test rather than skip it.
 */

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startCoordinator, startWorker, type RunningProcess } from '../../bench/processes.js';
import { LeaseholdClient } from '../../src/client/index.js';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { allJobs } from '../support/all-jobs.js';
import { waitFor } from '../support/wait-for.js';
import { LISTENERS_UP_SQL } from '../support/pg-listeners.js';
import { startPrivatePostgres, type PrivatePostgres } from './private-postgres.js';

const databaseUrl = process.env['DATABASE_URL'];
const LANES = 4;
/** Accepted enqueues to see before the crash, and again after the restart. */
const LOAD_BEFORE = 150;
const LOAD_AFTER = 150;

interface ProducerTally {
  readonly accepted: Map<string, string>; // idempotency key → job id, from a 202
  readonly statuses: Map<number, number>;
  readonly codes503: Map<string, number>;
  readonly unexpected: string[];
  /** Set when the test is failing: lanes stop retrying so cleanup is not held up. */
  abandoned: boolean;
}

/** POST /jobs until a definitive answer, retrying 503s and network errors with the same key. */
async function enqueueUntilAnswered(url: string, key: string, idempotencyKey: string, n: number, tally: ProducerTally): Promise<void> {
  while (!tally.abandoned) {
    let status: number;
    let body: unknown;
    try {
      const response = await fetch(`${url}/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
        body: JSON.stringify({ kind: 'ledger', payload: { n } }),
        signal: AbortSignal.timeout(15_000),
      });
      status = response.status;
      body = await response.json().catch(() => null);
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    tally.statuses.set(status, (tally.statuses.get(status) ?? 0) + 1);
    if (status === 202) {
      tally.accepted.set(idempotencyKey, (body as { id: string }).id);
      return;
    }
    if (status === 503) {
      const code = (body as { error?: { code?: string } } | null)?.error?.code ?? 'none';
      tally.codes503.set(code, (tally.codes503.get(code) ?? 0) + 1);
      // Shorter than the Retry-After of 1 s, to keep the test quick; the key makes retries safe.
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    tally.unexpected.push(`${idempotencyKey}: ${status} ${JSON.stringify(body)}`);
    return;
  }
}

describe.skipIf(databaseUrl === undefined || databaseUrl === '')('PostgreSQL restarted under load', () => {
  let server: PrivatePostgres | undefined;
  let coordinator: RunningProcess | undefined;
  const workers: (RunningProcess & { readonly ready: Promise<string> })[] = [];
  const clients: LeaseholdClient[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-restart-'));

  beforeAll(async () => {
    server = await startPrivatePostgres();
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    await coordinator?.stop('SIGKILL');
    await server?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers 503 store_unavailable while it is down, and loses or strands nothing accepted', async () => {
    const pgServer = server!;
    const startedAt = Date.now();
    // Migrate and create the keys (what `leasehold keys create` does), sparing two CLI start-ups.
    const store = await PostgresStore.connect({ connectionString: pgServer.url, poolSize: 1 });
    const adminKey = newApiKey();
    const workerKey = newApiKey();
    await store.apiKeyInsert({ id: 'k-admin', tenant: 't1', user: 'ops', role: 'admin', keyHash: hashApiKey(adminKey) });
    await store.apiKeyInsert({ id: 'k-worker', tenant: 't1', user: 'w', role: 'worker', keyHash: hashApiKey(workerKey) });
    await store.close();

    const started = await startCoordinator(`${pgServer.url}?pool_size=8`, ['--reaper-interval-ms', '500']);
    coordinator = started.process;
    const url = started.url;
    const ledgerFile = join(dir, 'ledger.jsonl');
    writeFileSync(ledgerFile, '');
    for (let i = 0; i < 2; i++) {
      workers.push(
        startWorker({
          url,
          key: workerKey,
          handlers: join(ROOT, 'dist', 'test', 'fixtures', 'handlers.js'),
          concurrency: 4,
          workerId: `restart-${i}`,
          // A short lease bounds how long a job stays running when its lease answer was lost in the crash.
          extraArgs: ['--lease-ms', '4000', '--wait-ms', '1000'],
          env: { LEDGER_FILE: ledgerFile },
        }),
      );
    }
    await Promise.all(workers.map((w) => w.ready));
    const ledgerLines = (): string[] => readFileSync(ledgerFile, 'utf8').split('\n').filter(Boolean);

    const tally: ProducerTally = { accepted: new Map(), statuses: new Map(), codes503: new Map(), unexpected: [], abandoned: false };
    let producing = true;
    let next = 0;
    const lanes = Array.from({ length: LANES }, async () => {
      while (producing) {
        const n = next++;
        await enqueueUntilAnswered(url, adminKey, `restart-${n}`, n, tally);
      }
    });

    try {
      // Under load: jobs are being accepted and run.
      await waitFor('load before the crash', () => tally.accepted.size >= LOAD_BEFORE && ledgerLines().length >= LOAD_BEFORE / 3, { timeoutMs: 30_000 });
      const retriesOf = (w: RunningProcess): number => w.output().match(/coordinator call failed; retrying/g)?.length ?? 0;
      const workerRetries = (): number => workers.reduce((sum, w) => sum + retriesOf(w), 0);
      const retriesBefore = workers.map(retriesOf);

      await pgServer.crash();
      const downAt = Date.now();
      // Down until every lane has been refused a few times and both workers have had to retry.
      await waitFor('the producer to be refused with 503', () => (tally.statuses.get(503) ?? 0) >= 3 * LANES, { timeoutMs: 20_000 });
      await waitFor('both workers to retry a refused call', () => workers.every((w, i) => retriesOf(w) > (retriesBefore[i] ?? 0)), { timeoutMs: 20_000 });
      await pgServer.start();
      const downMs = Date.now() - downAt;

      // The pool recovers: enqueues are accepted again, and jobs run.
      const acceptedAtRestart = tally.accepted.size;
      const ranAtRestart = ledgerLines().length;
      await waitFor(
        'load after the restart',
        () => tally.accepted.size >= acceptedAtRestart + LOAD_AFTER && ledgerLines().length >= ranAtRestart + LOAD_AFTER / 3,
        {
          timeoutMs: 30_000,
        },
      );
      // The coordinator's LISTEN connection came back too (it reconnects on its own after a drop).
      const probe = new pg.Client({ connectionString: pgServer.url });
      await probe.connect();
      try {
        await waitFor('the LISTEN connection to reconnect', async () => {
          const found = await probe.query<{ n: number }>(LISTENERS_UP_SQL, ['lh-listen:%']);
          return found.rows[0]?.n === 1;
        });
      } finally {
        await probe.end();
      }
      producing = false;
      await Promise.all(lanes);

      // Drained: every accepted job succeeded (orphaned leases expire after 4 s and run again).
      const admin = new LeaseholdClient({ baseUrl: url, apiKey: adminKey, connections: 2 });
      clients.push(admin);
      const total = tally.accepted.size;
      await waitFor('every accepted job to succeed', async () => (await admin.stats()).counts['succeeded'] === total, { timeoutMs: 30_000, intervalMs: 100 });
      const counts = (await admin.stats()).counts;
      expect(counts).toEqual({ queued: 0, waiting: 0, running: 0, succeeded: total, dead: 0, unknown: 0, cancelled: 0 });

      const jobs = await allJobs(admin);
      // One job per accepted key: no retried enqueue made a second one.
      expect(jobs.size).toBe(total);
      expect(new Set(tally.accepted.values()).size).toBe(total);

      const executions = ledgerLines().map((line) => JSON.parse(line) as { id: string; fence: number; pid: number });
      const ran = new Set(executions.map((e) => e.id));
      for (const [idempotencyKey, id] of tally.accepted) {
        const job = jobs.get(id);
        expect(job?.status, idempotencyKey).toBe('succeeded');
        expect(ran.has(id)).toBe(true);
        // The committed result is the effect of the final lease.
        expect((job!.result as { fence: number }).fence).toBe(job!.epoch);
      }

      // Refused only with 503 store_unavailable; never a 500, never another error, on any route.
      expect(tally.unexpected).toEqual([]);
      expect(tally.statuses.get(500) ?? 0).toBe(0);
      expect([...tally.codes503.keys()]).toEqual(['store_unavailable']);
      expect(coordinator.output()).not.toMatch(/"level":50/);
      // Nothing gave up: every process is still running.
      expect(coordinator.child.exitCode).toBeNull();
      for (const w of workers) expect(w.child.exitCode).toBeNull();

      process.stdout.write(
        `postgres restart: ${Math.round((Date.now() - startedAt) / 1000)} s, down ${downMs} ms, ` +
          `${tally.codes503.get('store_unavailable')} producer 503s, ${workerRetries() - retriesBefore.reduce((a, b) => a + b, 0)} worker retries, ` +
          `${total} jobs accepted, ${total - jobs.size} lost, ${executions.length - total} re-executions\n`,
      );
    } finally {
      producing = false;
      tally.abandoned = true;
      await Promise.all(lanes);
    }
  });
});
