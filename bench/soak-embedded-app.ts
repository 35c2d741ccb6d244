/**
 * The application process of the embedded chaos soak (bench/soak-embedded.ts):
 * it enqueues through a library Queue on its own database handle and keeps,
 * in a table of its own (`soak_app_orders`), a row per job it knows was
 * accepted. That table is the soak's record of what was accepted, the way
 * the HTTP soak counts 202s.
 *
 * Even payload numbers go through `enqueueInTransaction`: the job and the
 * application's row are written in one transaction of the application (a
 * better-sqlite3 `db.transaction(…).immediate()` on SQLite, a pg client's
 * BEGIN … COMMIT on PostgreSQL), so a kill anywhere leaves both or neither.
 * Odd ones go through `queue.enqueue` and are recorded after it answers, so a
 * kill between the two leaves a job the application never heard of; on its
 * restart the application starts again at the first number it has no row for,
 * with the same idempotency key, and the replay names that same job.
 *
 *   node dist/bench/soak-embedded-app.js
 *   env: SOAK_DB (file or postgres:// URL with `schema=`), SOAK_RATE (jobs/s), SOAK_LEASE_MS,
 *        SOAK_TX_HOLD_MS (how long a transaction announced by `tx-open <n>` stays open)
 *
 * Prints `ready <first number>` once enqueuing, and one JSON line per refused or failed
 * attempt (`{"retry":"<code>"}`; the same number is tried again). SIGTERM
 * stops it after the enqueue in flight.
 */

import { writeSync } from 'node:fs';
import Database from 'better-sqlite3';
import pg from 'pg';
import { openQueue, LeaseholdError, type Queue } from '../src/index.js';
import { soakJob } from './soak-producer.js';
import type { CoordinatorConfigInput } from '../src/engine/config.js';

export const SOAK_TENANT = 'soak';

/** Short backoff and a frequent reaper, as the HTTP soak gives its coordinator (`serve --backoff-base-ms 100 …`). */
export const soakQueueConfig: CoordinatorConfigInput = { reaperIntervalMs: 200, defaultBackoff: { baseMs: 100, maxMs: 1_000 } };

/** How payload n is enqueued. */
export function viaOf(n: number): 'transaction' | 'enqueue' {
  return n % 2 === 0 ? 'transaction' : 'enqueue';
}

/** One job in 50 holds SQLite's write lock inside its handler (always an `ok` fate: n ≡ 5 mod 50). */
export function kindOf(n: number): 'soak' | 'soak-hold' {
  return n % 50 === 5 ? 'soak-hold' : 'soak';
}

export function embeddedSoakJob(n: number, leaseMs: number): Parameters<Queue['enqueue']>[0] {
  const { idempotencyKey, payload, maxAttempts } = soakJob(n, leaseMs);
  return { kind: kindOf(n), payload, idempotencyKey, ...(maxAttempts === undefined ? {} : { maxAttempts }) };
}

/**
 * One transactional enqueue in 50 (n ≡ 10 mod 50) stays open a while after its writes, before COMMIT,
 * and says so on stdout (`tx-open <n>`): the soak kills the application there, inside its own
 * transaction, and checks that neither the job nor the row survived.
 */
export function holdsTransactionOpen(n: number): boolean {
  return n % 50 === 10;
}

/** Written with writeSync: the line is out before the transaction goes on (a kill on it lands inside). */
function announceOpen(n: number): void {
  writeSync(1, `tx-open ${n}\n`);
}

/** The application's table, created by the soak before any process starts. */
export const APP_TABLE_SQL = 'CREATE TABLE IF NOT EXISTS soak_app_orders (n INTEGER PRIMARY KEY, job_id TEXT NOT NULL, via TEXT NOT NULL, at BIGINT NOT NULL)';

interface AppBackend {
  readonly queue: Queue;
  /** The first payload number with no row. */
  nextNumber(): Promise<number>;
  /** Enqueues payload n and records it as the application would. */
  enqueue(n: number): Promise<void>;
  close(): Promise<void>;
}

async function sqliteApp(file: string, leaseMs: number, txHoldMs: number): Promise<AppBackend> {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('busy_timeout = 10000');
  const queue = await openQueue({ sqlite: db, tenant: SOAK_TENANT, config: soakQueueConfig });
  const record = db.prepare('INSERT INTO soak_app_orders (n, job_id, via, at) VALUES (?, ?, ?, ?)');
  const pauseHere = new Int32Array(new SharedArrayBuffer(4));
  const inTransaction = db.transaction((n: number) => {
    const job = queue.enqueueInTransaction(db, embeddedSoakJob(n, leaseMs));
    record.run(n, job.id, 'transaction', Date.now());
    if (holdsTransactionOpen(n)) {
      announceOpen(n);
      // Nothing can be awaited inside a better-sqlite3 transaction: the wait blocks, holding the write lock.
      Atomics.wait(pauseHere, 0, 0, txHoldMs);
    }
  });
  return {
    queue,
    async nextNumber() {
      const row = db.prepare('SELECT max(n) AS n FROM soak_app_orders').get() as { n: number | null };
      return row.n === null ? 0 : row.n + 1;
    },
    async enqueue(n) {
      if (viaOf(n) === 'transaction') {
        // IMMEDIATE: the write lock is taken at BEGIN, so the transaction cannot fail to upgrade a read snapshot.
        inTransaction.immediate(n);
        return;
      }
      const job = await queue.enqueue(embeddedSoakJob(n, leaseMs));
      record.run(n, job.id, 'enqueue', Date.now());
    },
    async close() {
      await queue.close();
      db.close();
    },
  };
}

async function postgresApp(url: string, leaseMs: number, txHoldMs: number): Promise<AppBackend> {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get('schema') ?? 'leasehold';
  parsed.searchParams.delete('schema');
  const pool = new pg.Pool({ connectionString: parsed.toString(), max: 2 });
  const queue = await openQueue({ pg: pool, schema, tenant: SOAK_TENANT, config: soakQueueConfig });
  const table = `"${schema.replace(/"/g, '""')}".soak_app_orders`;
  return {
    queue,
    async nextNumber() {
      const { rows } = await pool.query<{ n: number | null }>(`SELECT max(n)::int AS n FROM ${table}`);
      const n = rows[0]?.n ?? null;
      return n === null ? 0 : n + 1;
    },
    async enqueue(n) {
      if (viaOf(n) === 'transaction') {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          const job = await queue.enqueueInTransaction(client, embeddedSoakJob(n, leaseMs));
          await client.query(`INSERT INTO ${table} (n, job_id, via, at) VALUES ($1, $2, 'transaction', $3)`, [n, job.id, Date.now()]);
          if (holdsTransactionOpen(n)) {
            announceOpen(n);
            await pause(txHoldMs);
          }
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw error;
        } finally {
          client.release();
        }
        return;
      }
      const job = await queue.enqueue(embeddedSoakJob(n, leaseMs));
      await pool.query(`INSERT INTO ${table} (n, job_id, via, at) VALUES ($1, $2, 'enqueue', $3)`, [n, job.id, Date.now()]);
    },
    async close() {
      await queue.close();
      await pool.end();
    },
  };
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const db = process.env['SOAK_DB'];
  if (db === undefined) throw new Error('SOAK_DB is not set');
  const rate = Number(process.env['SOAK_RATE'] ?? '40');
  const leaseMs = Number(process.env['SOAK_LEASE_MS'] ?? '3000');
  const txHoldMs = Number(process.env['SOAK_TX_HOLD_MS'] ?? '100');
  const app = /^postgres(ql)?:\/\//i.test(db) ? await postgresApp(db, leaseMs, txHoldMs) : await sqliteApp(db, leaseMs, txHoldMs);
  let stopping = false;
  process.once('SIGTERM', () => {
    stopping = true;
  });
  let n = await app.nextNumber();
  const first = n;
  const startedAt = performance.now();
  process.stdout.write(`ready ${first}\n`);
  while (!stopping) {
    const due = first + Math.floor(((performance.now() - startedAt) / 1000) * rate);
    if (n >= due) {
      await pause(10);
      continue;
    }
    try {
      await app.enqueue(n);
      n += 1;
    } catch (error) {
      // Refused or not reachable: try the same number again (the same key), as a caller that must not lose it would.
      const code = error instanceof LeaseholdError ? error.code : String((error as { code?: unknown }).code ?? 'error');
      process.stdout.write(`${JSON.stringify({ retry: code, message: error instanceof Error ? error.message : String(error) })}\n`);
      await pause(50);
    }
  }
  await app.close();
  process.stdout.write(`stopped at ${n}\n`);
  process.exit(0);
}

if (process.argv[1]?.endsWith('soak-embedded-app.js') === true) {
  main().catch((error: unknown) => {
    process.stderr.write(`soak app: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
