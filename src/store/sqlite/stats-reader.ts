/**
 * Runs the statistics queries on a read-only connection of their own, in a
 * worker thread, in one read transaction, so that every figure comes from the
 * same commit. They read counter rows (migration 5) and the heads of the ready table's groups, so
 * they are cheap; the thread keeps them off the connection the group commit
 * writes on. WAL lets the second connection read the last commit while the
 * first one writes.
 *
 * The thread's code is a short script evaluated in the worker, which runs
 * STATS_SQL of queries.ts (passed in) and sends back raw rows; turning rows
 * into TenantStats stays in the store. It is a script rather than a module
 * file so that it runs the same from the build and from the TypeScript
 * sources the tests load.
 */

import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { StoreUnavailableError } from '../../core/errors.js';
import { STATS_SQL } from './queries.js';

export interface StatsRows {
  readonly counts: readonly { readonly status: string; readonly n: number }[];
  readonly times: { readonly mean_wait: number | null; readonly mean_run: number | null; readonly mean_completion: number | null } | undefined;
  readonly attemptTimes: { readonly mean_attempt_run: number | null } | undefined;
  readonly counters: { readonly lease_expirations: number; readonly storage_bytes: number } | undefined;
  readonly oldest: { readonly oldest: number | null } | undefined;
}

interface Request {
  readonly id: number;
  readonly tenant: string;
  readonly now: number;
}

type Reply = { readonly id: number; readonly rows: StatsRows } | { readonly id: number; readonly error: { readonly code?: string; readonly message: string } };

const WORKER_SCRIPT = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
let db;
let read;
function open() {
  db = new Database(workerData.path, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = ' + workerData.busyTimeoutMs);
  const counts = db.prepare(workerData.sql.statsCounts);
  const times = db.prepare(workerData.sql.statsTimes);
  const attemptTimes = db.prepare(workerData.sql.statsAttemptTimes);
  const counters = db.prepare(workerData.sql.counterGet);
  const oldest = db.prepare(workerData.sql.statsOldestAvailable);
  // One read transaction, so that every figure comes from the same commit.
  read = db.transaction((tenant, now) => ({
    counts: counts.all(tenant),
    times: times.get(tenant),
    attemptTimes: attemptTimes.get(tenant),
    counters: counters.get(tenant),
    oldest: oldest.get({ tenant, now }),
  }));
}
parentPort.on('message', ({ id, tenant, now }) => {
  try {
    if (db === undefined) open();
    parentPort.postMessage({ id, rows: read(tenant, now) });
  } catch (error) {
    try { if (db !== undefined) db.close(); } catch {}
    db = undefined;
    parentPort.postMessage({ id, error: { code: typeof error.code === 'string' ? error.code : undefined, message: String(error.message) } });
  }
});
`;

const driverPath = createRequire(import.meta.url).resolve('better-sqlite3');

export class StatsReader {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (rows: StatsRows) => void; reject: (error: unknown) => void }>();

  constructor(
    private readonly path: string,
    private readonly busyTimeoutMs: number,
  ) {}

  read(tenant: string, now: number): Promise<StatsRows> {
    const worker = this.worker ?? this.start();
    const request: Request = { id: this.nextId++, tenant, now };
    return new Promise((resolve, reject) => {
      this.pending.set(request.id, { resolve, reject });
      worker.postMessage(request);
    });
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.failAll(new StoreUnavailableError('the job store is closed'));
    if (worker !== undefined) await worker.terminate();
  }

  private start(): Worker {
    const worker = new Worker(WORKER_SCRIPT, {
      eval: true,
      // The script is CommonJS: a parent started with --input-type=module must not pass that flag on.
      execArgv: [],
      workerData: {
        driver: driverPath,
        path: this.path,
        busyTimeoutMs: this.busyTimeoutMs,
        sql: STATS_SQL,
      },
    });
    // An idle reader must not keep a process alive that is otherwise done.
    worker.unref();
    worker.on('message', (reply: Reply) => {
      const waiting = this.pending.get(reply.id);
      if (waiting === undefined) return;
      this.pending.delete(reply.id);
      if ('rows' in reply) waiting.resolve(reply.rows);
      else
        waiting.reject(new StoreUnavailableError('the job store could not be read', Object.assign(new Error(reply.error.message), { code: reply.error.code })));
    });
    worker.on('error', (error) => this.failAll(new StoreUnavailableError('the job store could not be read', error)));
    worker.on('exit', () => {
      if (this.worker === worker) this.worker = undefined;
      this.failAll(new StoreUnavailableError('the job store could not be read'));
    });
    this.worker = worker;
    return worker;
  }

  private failAll(error: unknown): void {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}
