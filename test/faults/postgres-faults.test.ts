/**
 * PostgreSQL faults with the real server. The first test turns a database of
 * its own read-only under a running coordinator, as a failover to a standby
 * would: new sessions get default_transaction_read_only and the store's
 * connections are terminated. Writes answer 503 store_unavailable (SQLSTATE
 * 25006), reads answer, and after the setting is reset and the sessions
 * replaced the coordinator works again without a restart, with exactly the
 * accepted jobs in the database and nothing half-written.
 *
 * The second test feeds real server and client errors (read-only
 * transaction, statement timeout, terminated backend, refused connection) and
 * the disk and I/O SQLSTATEs a test cannot provoke on a shared server (disk
 * full, out of memory, I/O error) through the store's translation and the
 * error handler: each is a 503 store_unavailable; a constraint violation is a
 * bug, a 500 whose message carries no SQL.
 *
 * Runs when DATABASE_URL is set, and then fails rather than skips if the
 * server cannot be reached.
 */

import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { toHttpError } from '../../src/coordinator/error-handler.js';
import { translatePgError } from '../../src/store/postgres/errors.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { createKey, enqueue, get, lease, post } from '../support/http-fixtures.js';
import { waitFor } from '../support/wait-for.js';
import { captureLog, driverCodeOf, expectRefusalsLogged, expectStoreUnavailable } from './fault-harness.js';

const DATABASE_URL = process.env['DATABASE_URL'] ?? '';

describe.skipIf(DATABASE_URL === '')('PostgreSQL (DATABASE_URL)', () => {
  const database = `lh_fault_${process.pid}_${randomBytes(4).toString('hex')}`;
  let admin: pg.Client;
  let store: PostgresStore;
  let app: FastifyInstance;
  const { logger, logLines } = captureLog();

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    const url = new URL(DATABASE_URL);
    url.pathname = `/${database}`;
    store = await PostgresStore.connect({ connectionString: url.toString(), schema: 'leasehold', poolSize: 2 });
    app = await buildCoordinator({ store, logger, config: { reaperIntervalMs: 0, authCacheMs: 0 } });
  });

  afterAll(async () => {
    await app?.close();
    await store?.close();
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });

  /** Ends every session of the test's database, so the pool opens new ones with the database's current settings. */
  async function replaceSessions(): Promise<void> {
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [database]);
  }

  async function inDatabase<T extends pg.QueryResultRow>(sql: string): Promise<T[]> {
    const url = new URL(DATABASE_URL);
    url.pathname = `/${database}`;
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      return (await client.query<T>(sql)).rows;
    } finally {
      await client.end();
    }
  }

  it('answers writes 503 store_unavailable (25006) and reads 200 while the database is read-only, then recovers when it is writable again', async () => {
    const producer = await createKey(store, 't1', 'alice', 'producer');
    const worker = await createKey(store, 't1', 'w', 'worker');
    const adminKey = await createKey(store, 't1', 'root', 'admin');
    const accepted = new Set<string>();
    for (const n of [1, 2]) {
      const response = await enqueue(app, producer, { kind: 'email', payload: { n } }, `before-${n}`);
      expect(response.statusCode).toBe(202);
      accepted.add((response.json() as { id: string }).id);
    }
    const [leased] = await lease(app, worker, { leaseMs: 60_000 });
    expect(leased).toBeDefined();

    await admin.query(`ALTER DATABASE ${database} SET default_transaction_read_only = on`);
    await replaceSessions();
    // The first request after the termination may meet a dead pooled connection (also a 503); wait for a fresh session.
    await waitFor('a read-only session to answer reads', async () => (await get(app, adminKey, `/jobs/${leased!.id}`)).statusCode === 200);
    expect(await driverCodeOf(() => store.apiKeyRevoke({ id: 'none' }))).toBe('25006');
    const logFrom = logLines.length;

    const refusals = [
      await enqueue(app, producer, { kind: 'email', payload: { n: 3 } }, 'during'),
      await post(app, worker, '/lease', { workerId: 'w1', leaseMs: 60_000 }),
      await post(app, worker, `/jobs/${leased!.id}/complete`, { token: leased!.token, result: 'r' }),
      ...(await Promise.all(Array.from({ length: 4 }, (_, k) => enqueue(app, producer, { kind: 'email', payload: { k } }, `burst-${k}`)))),
    ];
    for (const response of refusals) expectStoreUnavailable(response);
    const read = await get(app, adminKey, `/jobs/${leased!.id}`);
    expect(read.statusCode).toBe(200);
    expect(read.json()).toMatchObject({ status: 'running' });
    expect((await get(app, adminKey, '/jobs')).statusCode).toBe(200);
    expectRefusalsLogged(logLines.slice(logFrom), /^25006$/, [producer, worker, adminKey, leased!.token]);

    await admin.query(`ALTER DATABASE ${database} RESET default_transaction_read_only`);
    await replaceSessions();
    await waitFor('a writable session', async () => (await enqueue(app, producer, { kind: 'email', payload: { n: 3 } }, 'during')).statusCode === 202);
    const retried = await enqueue(app, producer, { kind: 'email', payload: { n: 3 } }, 'during');
    // The refused enqueues changed nothing: the first to succeed created the job, and this one replays it.
    expect(retried.headers['idempotent-replayed']).toBe('true');
    accepted.add((retried.json() as { id: string }).id);
    expect((await post(app, worker, `/jobs/${leased!.id}/complete`, { token: leased!.token, result: 'r' })).statusCode).toBe(200);
    const rest = await lease(app, worker, { max: 10, leaseMs: 60_000 });
    expect(rest).toHaveLength(2);
    for (const job of rest) expect((await post(app, worker, `/jobs/${job.id}/complete`, { token: job.token, result: 'r' })).statusCode).toBe(200);

    const jobs = await inDatabase<{ id: string; status: string }>('SELECT id, status FROM leasehold.jobs');
    expect(new Set(jobs.map((job) => job.id))).toEqual(accepted);
    expect(jobs.every((job) => job.status === 'succeeded')).toBe(true);
    const [halfWritten] = await inDatabase<{ attempts: number; open: number; results: number }>(`
      SELECT
        (SELECT count(*)::int FROM leasehold.jobs j WHERE j.epoch <> (SELECT count(*) FROM leasehold.job_attempts a WHERE a.job_seq = j.seq)) AS attempts,
        (SELECT count(*)::int FROM leasehold.job_attempts WHERE ended_at IS NULL) + (SELECT count(*)::int FROM leasehold.job_leases) AS open,
        (SELECT count(*)::int FROM leasehold.jobs j WHERE NOT EXISTS (SELECT 1 FROM leasehold.job_results r WHERE r.job_id = j.id)) AS results`);
    expect(halfWritten).toEqual({ attempts: 0, open: 0, results: 0 });
    console.log(`postgres read-only: ${refusals.length} writes refused 503 (25006); reads answered 200; recovered after RESET and new sessions`);
  });

  it('translates real server errors and the disk, memory and I/O SQLSTATEs into 503 store_unavailable, and a constraint violation into a 500 without SQL', async () => {
    const real: Error[] = [];
    const capture = async (run: () => Promise<unknown>): Promise<void> => {
      try {
        await run();
      } catch (error) {
        real.push(error as Error);
        return;
      }
      throw new Error('expected the query to fail');
    };
    await capture(async () => {
      await admin.query('BEGIN READ ONLY');
      try {
        await admin.query('CREATE TEMP TABLE t (a int)');
      } finally {
        await admin.query('ROLLBACK');
      }
    });
    await capture(async () => {
      await admin.query('BEGIN');
      try {
        await admin.query("SET LOCAL statement_timeout = '10ms'");
        await admin.query('SELECT pg_sleep(5)');
      } finally {
        await admin.query('ROLLBACK');
      }
    });
    const victim = new pg.Client({ connectionString: DATABASE_URL });
    await victim.connect();
    const connectionError = new Promise<Error>((resolve) => victim.on('error', resolve));
    const { rows } = await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    // The server's FATAL 57P01 reaches the client either as the answer to its next query or, when it
    // arrives first, as the connection's error event (the query then fails without a code).
    const queryError = await victim.query('SELECT 1').then(
      () => new Error('expected the query to fail'),
      (error: unknown) => error as Error,
    );
    const timeout = new Promise<Error>((resolve) => setTimeout(() => resolve(new Error('no error event after the backend was terminated')), 5_000).unref());
    real.push((queryError as { code?: string }).code !== undefined ? queryError : await Promise.race([connectionError, timeout]));
    await victim.end().catch(() => undefined);
    await capture(() => new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:1/none', connectionTimeoutMillis: 2_000 }).connect());
    expect(real.map((error) => (error as { code?: string }).code)).toEqual(['25006', '57014', '57P01', 'ECONNREFUSED']);

    const stated = (code: string, message: string): Error => Object.assign(new Error(message), { code });
    const unavailable = [
      ...real,
      stated('53100', 'could not extend file "base/16384/16385": No space left on device'),
      stated('53200', 'out of memory'),
      stated('58030', 'could not write to file "pg_wal/xlogtemp.123": I/O error'),
      stated('08006', 'connection failure'),
      stated('57P03', 'the database system is starting up'),
    ];
    for (const error of unavailable) {
      const answer = toHttpError(translatePgError(error));
      expect({ code: (error as { code?: string }).code, status: answer.status, error: answer.code, retryAfter: answer.retryAfterSeconds }).toEqual({
        code: (error as { code?: string }).code,
        status: 503,
        error: 'store_unavailable',
        retryAfter: 1,
      });
      expect(answer.message).not.toContain(error.message);
    }
    const bug = toHttpError(translatePgError(stated('23505', 'duplicate key value violates unique constraint "jobs_pkey" DETAIL: Key (id)=(secret)')));
    expect(bug).toEqual({ status: 500, code: 'internal_error', message: 'internal error' });
  });
});
