/**
 * A deployment whose coordinator can die and come back: `leasehold serve`
 * over one SQLite file or one PostgreSQL schema, always on the same port, so
 * a worker process retrying its calls reaches the restarted coordinator as a
 * client behind a fixed address would. `serve(crashAt)` arms fault-injection
 * points (src/core/fault-points.ts) in that one process; a restart without
 * it is a clean process over the same data.
 *
 * The store's own tables are read directly (resultRows) where the HTTP API
 * cannot show a broken invariant: a result row without a succeeded job.
 */

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { freePort, ROOT, startProcess, startWorker, type RunningProcess } from '../../bench/processes.js';
import { LeaseholdClient } from '../../src/client/index.js';
import { CRASH_AT_VARIABLE } from '../../src/core/fault-points.js';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import type { Role } from '../../src/core/states.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store, StoreBackend } from '../../src/store/store.js';

export const DATABASE_URL = process.env['DATABASE_URL'] ?? '';

/** SQLite always; PostgreSQL when DATABASE_URL is set (as in CI), like the other PostgreSQL suites. */
export const CRASH_BACKENDS: readonly StoreBackend[] = DATABASE_URL === '' ? ['sqlite'] : ['sqlite', 'postgres'];

export const HANDLERS = join(ROOT, 'dist', 'test', 'fixtures', 'crash-handlers.js');

/** The reaper settles expired leases every 100 ms, so lease-expiry recovery takes a lease length, not a second more. */
const SERVE_ARGS = ['--reaper-interval-ms', '100'];

export interface CrashDeployment {
  readonly backend: StoreBackend;
  readonly dir: string;
  /** The PostgreSQL schema holding this deployment's tables; null on SQLite. */
  readonly schema: string | null;
  readonly url: string;
  readonly keys: { readonly producer: string; readonly worker: string; readonly admin: string };
  /**
   * Starts a coordinator on this deployment's port (killing the previous one if
   * it still runs); `crashAt` is a LEASEHOLD_CRASH_AT value for this process only.
   */
  serve(crashAt?: string): Promise<RunningProcess>;
  /** The coordinator started last. */
  readonly coordinator: RunningProcess;
  client(key: string): LeaseholdClient;
  /** A `leasehold worker` process with the fixture handlers; killed by stop(). */
  worker(options: { workerId: string; leaseMs: number; env?: NodeJS.ProcessEnv; logLevel?: string }): ReturnType<typeof startWorker>;
  /** Log lines at warn level or above from every coordinator started (a 5xx answer logs one). */
  coordinatorWarnings(): string[];
  /** Rows in job_results for the job, read from the database itself. */
  resultRows(jobId: string): Promise<number>;
  stop(): Promise<void>;
}

async function insertKeys(store: Store): Promise<CrashDeployment['keys']> {
  let n = 0;
  const key = async (user: string, role: Role): Promise<string> => {
    const secret = newApiKey();
    await store.apiKeyInsert({ id: `crash-${++n}`, tenant: 't1', user, role, keyHash: hashApiKey(secret) });
    return secret;
  };
  return { producer: await key('alice', 'producer'), worker: await key('w', 'worker'), admin: await key('ops', 'admin') };
}

export async function startCrashDeployment(backend: StoreBackend): Promise<CrashDeployment> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-crash-'));
  let db: string;
  let keys: CrashDeployment['keys'];
  let resultRows: (jobId: string) => Promise<number>;
  let dropData: () => Promise<void>;
  let schema: string | null = null;
  if (backend === 'sqlite') {
    db = join(dir, 'jobs.db');
    const store = SqliteStore.open({ path: db });
    keys = await insertKeys(store);
    await store.close();
    resultRows = async (jobId) => {
      const file = new Database(db, { readonly: true });
      try {
        const row = file.prepare('SELECT count(*) AS n FROM job_results r JOIN jobs j ON j.seq = r.job_seq WHERE j.id = ?').get(jobId) as { n: number };
        return row.n;
      } finally {
        file.close();
      }
    };
    dropData = async () => undefined;
  } else {
    const name = `lh_crash_${process.pid}_${randomBytes(5).toString('hex')}`;
    schema = name;
    const store = await PostgresStore.connect({ connectionString: DATABASE_URL, schema: name, poolSize: 1 });
    keys = await insertKeys(store);
    await store.close();
    const url = new URL(DATABASE_URL);
    url.searchParams.set('schema', name);
    url.searchParams.set('pool_size', '4');
    db = url.toString();
    const reader = new pg.Client({ connectionString: DATABASE_URL });
    await reader.connect();
    resultRows = async (jobId) => {
      const { rows } = await reader.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${name}.job_results WHERE job_id = $1`, [jobId]);
      return rows[0]?.n ?? 0;
    };
    dropData = async () => {
      await reader.end();
      await PostgresStore.dropSchema({ connectionString: DATABASE_URL, schema: name });
    };
  }

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const processes: RunningProcess[] = [];
  const coordinators: RunningProcess[] = [];
  const clients: LeaseholdClient[] = [];
  let current: RunningProcess | undefined;

  return {
    backend,
    dir,
    schema,
    url,
    keys,
    get coordinator(): RunningProcess {
      if (current === undefined) throw new Error('no coordinator was started');
      return current;
    },
    async serve(crashAt = '') {
      await current?.stop('SIGKILL');
      const started = startProcess(['serve', '--db', db, '--port', String(port), '--host', '127.0.0.1', ...SERVE_ARGS], {
        env: { [CRASH_AT_VARIABLE]: crashAt },
        readyPattern: /listening on (http:\/\/[^\s"]+)/,
      });
      processes.push(started.process);
      coordinators.push(started.process);
      current = started.process;
      await started.ready;
      return started.process;
    },
    client(key) {
      const client = new LeaseholdClient({ baseUrl: url, apiKey: key, connections: 8 });
      clients.push(client);
      return client;
    },
    worker(options) {
      const worker = startWorker({
        url,
        key: keys.worker,
        handlers: HANDLERS,
        concurrency: 1,
        workerId: options.workerId,
        extraArgs: ['--lease-ms', String(options.leaseMs), '--wait-ms', '200', '--log-level', options.logLevel ?? 'info'],
        env: { [CRASH_AT_VARIABLE]: '', ...options.env },
      });
      processes.push(worker);
      return worker;
    },
    coordinatorWarnings() {
      return coordinators.flatMap((c) => c.output().split('\n')).filter((line) => /"level":(4|5|6)0/.test(line));
    },
    resultRows: (jobId) => resultRows(jobId),
    async stop() {
      await Promise.all(clients.map((c) => c.close()));
      await Promise.all(processes.map((p) => p.stop('SIGKILL')));
      await dropData();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
