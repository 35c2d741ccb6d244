/**
 * One worker process of the embedded chaos soak (bench/soak-embedded.ts): a
 * library Queue opened on the soak's database (`openQueue`, no coordinator,
 * no HTTP) and a `Worker` running the soak's handler (bench/soak-handlers.ts,
 * which appends each execution to the effects ledger and names it in the
 * result it returns).
 *
 * `soak-hold` jobs run the same handler after holding SQLite's write lock for
 * a while from a connection of their own to the queue's file: BEGIN
 * IMMEDIATE, one row into `soak_holds`, a line `hold-start <exec>` on stdout,
 * a pause, COMMIT. The soak kills a worker right after such a line, so the
 * process dies holding the lock, and the other processes must get it back
 * (the kernel releases a dead process's locks; SQLite rolls back its
 * uncommitted WAL frames). A hold whose row is missing at the end is one the
 * kill interrupted. On PostgreSQL there is no file lock to hold; the kind runs
 * the handler alone.
 *
 *   node dist/bench/soak-embedded-worker.js <worker id>
 *   env: SOAK_DB (file or postgres:// URL), SOAK_LEDGER, SOAK_LEASE_MS, SOAK_CONCURRENCY, SOAK_HOLD_MS
 *
 * Prints `ready` once leasing. SIGTERM stops it (no grace: what runs is left to its lease).
 */

import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { logRedaction } from '../src/core/log-redaction.js';
import { openQueue, Worker, type JobContext } from '../src/index.js';
import { handlers as soakHandlers, type SoakPayload, type SoakResult } from './soak-handlers.js';
import { SOAK_TENANT, soakQueueConfig } from './soak-embedded-app.js';

const workerId = process.argv[2];
const db = process.env['SOAK_DB'];
if (workerId === undefined || db === undefined) {
  process.stderr.write('usage: SOAK_DB=… soak-embedded-worker <worker id>\n');
  process.exit(2);
}
const leaseMs = Number(process.env['SOAK_LEASE_MS'] ?? '3000');
const concurrency = Number(process.env['SOAK_CONCURRENCY'] ?? '8');
const holdMs = Number(process.env['SOAK_HOLD_MS'] ?? '200');
const isPostgres = /^postgres(ql)?:\/\//i.test(db);

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** This process's own connection to the queue's file, for the holds; busy_timeout 0, so waiting for the lock never blocks the event loop. */
const holder = isPostgres ? undefined : new Database(db);
holder?.pragma('busy_timeout = 0');
const insertHold = holder?.prepare('INSERT INTO soak_holds (exec, job_id, pid, at) VALUES (?, ?, ?, ?)');

async function holdWriteLock(jobId: string): Promise<void> {
  if (holder === undefined || insertHold === undefined) return;
  for (;;) {
    try {
      holder.exec('BEGIN IMMEDIATE');
      break;
    } catch (error) {
      if (!/^SQLITE_BUSY/.test(String((error as { code?: unknown }).code))) throw error;
      await pause(2);
    }
  }
  try {
    const exec = randomBytes(8).toString('hex');
    insertHold.run(exec, jobId, process.pid, Date.now());
    process.stdout.write(`hold-start ${exec}\n`);
    await pause(holdMs);
    holder.exec('COMMIT');
  } finally {
    if (holder.inTransaction) holder.exec('ROLLBACK');
  }
}

const queue = await openQueue({ db, tenant: SOAK_TENANT, config: soakQueueConfig });
const logger = pino({ name: 'soak-worker', level: 'info', redact: logRedaction() }, pino.destination({ dest: 1, sync: true }));
const worker = new Worker({
  queue,
  concurrency,
  leaseMs,
  waitMs: 2_000,
  workerId,
  logger,
  handlers: {
    soak: soakHandlers.soak,
    'soak-hold': async (context: JobContext<SoakPayload>): Promise<SoakResult> => {
      await holdWriteLock(context.id);
      return soakHandlers.soak(context);
    },
  },
});
const running = worker.run();
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void (async () => {
    await worker.stop({ graceMs: 0 });
    await running;
    await queue.close();
    holder?.close();
    process.exit(0);
  })();
});
