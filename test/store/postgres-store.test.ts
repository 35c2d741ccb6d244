/**
 * PostgreSQL-specific behaviour the conformance suite cannot see: concurrent
 * migration, the table settings, errors when the server is unreachable or a
 * connection is killed mid-request, and the LISTEN connection coming back
 * after it was killed. Runs when DATABASE_URL is set (and then fails, rather
 * than skips, if the server cannot be reached).
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { migrate } from '../../src/store/postgres/migrate.js';
import { MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { translatePgError } from '../../src/store/postgres/errors.js';
import { listenerName } from '../../src/store/postgres/listener-peers.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { EnqueueParams } from '../../src/store/store.js';
import { waitFor } from '../support/wait-for.js';

const url = process.env['DATABASE_URL'] ?? '';

function enqueueParams(key: string): EnqueueParams {
  return {
    tenant: 't',
    owner: 'u',
    idempotencyKey: key,
    requestHash: key,
    kind: 'k',
    payload: { key },
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 10,
  };
}

describe('translatePgError', () => {
  it('turns connection, shutdown and timeout errors into store_unavailable', () => {
    const cases = [
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
      Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
      Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' }),
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
    ];
    for (const error of cases) expect(translatePgError(error)).toBeInstanceOf(StoreUnavailableError);
  });

  it('names only the SQLSTATE of any other error, never its text', () => {
    const error = Object.assign(new Error('syntax error at or near "SELECT secret FROM api_keys"'), { code: '42601' });
    const translated = translatePgError(error);
    expect(translated).not.toBeInstanceOf(StoreUnavailableError);
    expect(translated.message).toBe('unexpected PostgreSQL error (SQLSTATE 42601)');
  });
});

describe.skipIf(url === '')('PostgresStore (DATABASE_URL)', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  async function admin(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    cleanups.push(() => client.end());
    return client;
  }

  function freshSchema(): string {
    const schema = `lh_pgtest_${randomBytes(6).toString('hex')}`;
    cleanups.push(() => PostgresStore.dropSchema({ connectionString: url, schema }));
    return schema;
  }

  async function connect(schema: string, poolSize = 2): Promise<PostgresStore> {
    const store = await PostgresStore.connect({ connectionString: url, schema, poolSize });
    cleanups.push(() => store.close());
    return store;
  }

  it('answers store_unavailable when the server cannot be reached', async () => {
    await expect(PostgresStore.connect({ connectionString: 'postgres://postgres@127.0.0.1:1/test', schema: 'lh_nowhere' })).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
  });

  it('reads schema and pool_size from the connection string', async () => {
    const schema = freshSchema();
    const withParams = new URL(url);
    withParams.searchParams.set('schema', schema);
    withParams.searchParams.set('pool_size', '3');
    const store = await PostgresStore.connect({ connectionString: withParams.toString() });
    cleanups.push(() => store.close());
    await store.jobEnqueue(enqueueParams('k'));
    const client = await admin();
    const count = await client.query(`SELECT count(*)::int AS n FROM ${schema}.jobs`);
    expect(count.rows[0]).toEqual({ n: 1 });
  });

  it('refuses a schema name it would have to quote', async () => {
    await expect(PostgresStore.connect({ connectionString: url, schema: 'Robert"); DROP TABLE jobs;--' })).rejects.toThrow(/schema name/);
  });

  it('migrates once when several coordinators start together', async () => {
    const schema = freshSchema();
    await Promise.all([connect(schema), connect(schema), connect(schema), connect(schema)]);
    const client = await admin();
    const rows = await client.query(`SELECT version, name FROM ${schema}.schema_migrations ORDER BY version`);
    expect(rows.rows).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
  });

  it('commits synchronously even when the server default is off', async () => {
    const client = await admin();
    const role = `lh_async_${randomBytes(4).toString('hex')}`;
    await client.query(`CREATE ROLE ${role} LOGIN SUPERUSER`);
    cleanups.push(async () => {
      await client.query(`DROP ROLE IF EXISTS ${role}`);
    });
    await client.query(`ALTER ROLE ${role} SET synchronous_commit = off`);
    const schema = freshSchema();
    const asRole = new URL(url);
    asRole.username = role;
    const asyncStore = await PostgresStore.connect({ connectionString: asRole.toString(), schema, poolSize: 1 });
    cleanups.push(() => asyncStore.close());
    // Reaches into the pool: the setting is per session and no Store method shows it.
    const pool = (asyncStore as unknown as { db: { query(config: { text: string }): Promise<{ rows: unknown[] }> } }).db;
    expect((await pool.query({ text: 'SHOW synchronous_commit' })).rows).toEqual([{ synchronous_commit: 'on' }]);
    const direct = new pg.Client({ connectionString: asRole.toString() });
    await direct.connect();
    expect((await direct.query('SHOW synchronous_commit')).rows).toEqual([{ synchronous_commit: 'off' }]);
    await direct.end();
  });

  it('applies only the migrations a schema is missing', async () => {
    const schema = freshSchema();
    const client = await admin();
    const first = MIGRATIONS[0];
    if (first === undefined) throw new Error('no migrations');
    expect((await migrate(client, schema, [first])).applied).toEqual([first.version]);
    await connect(schema);
    const rows = await client.query(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`);
    expect(rows.rows.map((r: { version: number }) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
    expect((await migrate(client, schema)).applied).toEqual([]);
  });

  it('creates the jobs table with a fill factor below 100', async () => {
    const schema = freshSchema();
    await connect(schema);
    const client = await admin();
    const result = await client.query<{ reloptions: string[] | null }>(
      `SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'jobs'`,
      [schema],
    );
    const option = (result.rows[0]?.reloptions ?? []).find((o) => o.startsWith('fillfactor='));
    expect(Number(option?.split('=')[1])).toBeLessThan(100);
  });

  it('answers store_unavailable when its connection is killed mid-request, then recovers', async () => {
    const schema = freshSchema();
    const store = await connect(schema);
    const outcome = await store.jobEnqueue(enqueueParams('k'));
    if (outcome.kind !== 'created') throw new Error('expected created');
    const blocker = await admin();
    await blocker.query('BEGIN');
    await blocker.query(`SELECT 1 FROM ${schema}.jobs WHERE id = $1 FOR UPDATE`, [outcome.job.id]);
    const cancel = store.jobCancel({ scope: { tenant: 't' }, id: outcome.job.id });
    const settled = cancel.then(
      () => 'resolved',
      (error: unknown) => error,
    );
    await waitFor('the cancel to wait on the row lock', async () => {
      const waiting = await blocker.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, [
        `leasehold:${schema}`,
      ]);
      return waiting.rows[0]?.n === 1;
    });
    await blocker.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [`leasehold:${schema}`]);
    const error = await settled;
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).not.toMatch(/SELECT|UPDATE|jobs/);
    await blocker.query('ROLLBACK');
    expect((await store.jobGet({ scope: { tenant: 't' }, id: outcome.job.id }))?.status).toBe('queued');
    expect(await store.jobCancel({ scope: { tenant: 't' }, id: outcome.job.id })).toMatchObject({ kind: 'cancelled' });
  });

  it('listens again after its LISTEN connection is killed', async () => {
    const schema = freshSchema();
    const store = await connect(schema);
    const peer = await connect(schema);
    let wakes = 0;
    const stop = store.watchAvailable(() => {
      wakes++;
    });
    cleanups.push(async () => stop());
    const client = await admin();
    const listenerPids = async (): Promise<number[]> =>
      (await client.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, [listenerName(schema)])).rows.map((r) => r.pid);
    const [first] = await waitFor('the listener to connect', async () => {
      const pids = await listenerPids();
      return pids.length === 1 ? pids : null;
    });
    await client.query('SELECT pg_terminate_backend($1)', [first]);
    await waitFor(
      'a new listener connection',
      async () => {
        const pids = await listenerPids();
        return pids.length === 1 && pids[0] !== first;
      },
      { timeoutMs: 10_000 },
    );
    wakes = 0;
    await peer.jobEnqueue(enqueueParams('after-reconnect'));
    await waitFor('the wake-up from the other store', () => wakes > 0, { timeoutMs: 5_000 });
  });

  it('tells its finished watchers of its own completion once, and of another store’s through NOTIFY', async () => {
    const schema = freshSchema();
    const store = await connect(schema);
    const peer = await connect(schema);
    const heard: (string | null)[] = [];
    const stop = store.watchFinished((job) => heard.push(job === null ? null : job.id));
    // The store listens before the peer starts to, so it hears the peer's hello (two listeners started together
    // may instead each learn of the other from the census and the earlier one's hello).
    await waitFor('the finished listener to listen', () => heard.includes(null), { timeoutMs: 10_000 });
    // The peer listens too, so the store is not alone and sends its NOTIFYs (listener-peers.ts). The peer hears
    // null when its LISTEN takes effect and again when the store answers its hello, which the store does once
    // it counts the peer.
    let peerNulls = 0;
    const stopPeer = peer.watchFinished((job) => {
      if (job === null) peerNulls++;
    });
    cleanups.push(async () => {
      stop();
      stopPeer();
    });
    await waitFor('the store to answer the peer’s hello', () => peerNulls >= 2, { timeoutMs: 10_000 });
    // A connection of the test's own sees every finished notification as the server delivers it, in commit order.
    const observer = await admin();
    const delivered: string[] = [];
    observer.on('notification', (message) => delivered.push(message.payload ?? ''));
    await observer.query(`LISTEN "${`lh_finished_${schema}`.slice(0, 63)}"`);
    const finish = async (on: PostgresStore, key: string): Promise<string> => {
      const outcome = await on.jobEnqueue(enqueueParams(key));
      if (outcome.kind !== 'created') throw new Error('expected created');
      const { job } = outcome;
      const [leased] = await on.jobLease({ tenant: 't', workerId: 'w', kinds: ['k'], leaseMs: 60_000, max: 1 });
      expect(leased?.id).toBe(job.id);
      await on.jobCompleteMany([{ tenant: 't', id: job.id, token: leased?.token ?? '' }]);
      return job.id;
    };
    const own = await finish(store, 'own');
    await waitFor('the own completion’s notification to be delivered', () => delivered.some((payload) => payload.includes(own)), { timeoutMs: 5_000 });
    const other = await finish(peer, 'other');
    // The other store's notification was committed after the own one, so the listener has had both once it hears this.
    await waitFor('the other store’s completion', () => heard.includes(other), { timeoutMs: 5_000 });
    expect(heard.filter((id) => id === own)).toHaveLength(1);
    expect(heard.filter((id) => id === other)).toHaveLength(1);
  });

  it('counts its own schema in databaseSize, not the tables of other schemas beside it', async () => {
    const store = await connect(freshSchema());
    const neighbour = freshSchema();
    const client = await admin();
    const before = await store.databaseSize();
    // 8 MB of incompressible rows in another schema of the same database: an application's tables in library mode.
    await client.query(`CREATE SCHEMA ${neighbour}; CREATE TABLE ${neighbour}.filler AS
      SELECT md5(i::text) || md5((i + 1)::text) AS text FROM generate_series(1, 100000) i`);
    const afterNeighbour = await store.databaseSize();
    expect(Math.abs(afterNeighbour - before)).toBeLessThan(1_000_000);
    await store.jobEnqueue({ ...enqueueParams('big'), payload: { blob: randomBytes(1_000_000).toString('hex') }, payloadBytes: 2_000_011 });
    expect(await store.databaseSize()).toBeGreaterThan(afterNeighbour + 1_000_000);
  });

  it('drops a schema with everything in it', async () => {
    const schema = `lh_pgtest_${randomBytes(6).toString('hex')}`;
    const store = await PostgresStore.connect({ connectionString: url, schema, poolSize: 1 });
    await store.close();
    await PostgresStore.dropSchema({ connectionString: url, schema });
    const client = await admin();
    const found = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    expect(found.rowCount).toBe(0);
  });
  it('vacuums the queue tables itself when the server runs no autovacuum and they have dead rows, and leaves them to autovacuum otherwise', async () => {
    const schema = freshSchema();
    const store = await connect(schema);
    const client = await admin();
    const autovacuum = (await client.query<{ on: boolean }>(`SELECT current_setting('autovacuum') = 'on' AS on`)).rows[0]?.on;
    const jobsStats = async (): Promise<{ vacuums: number; dead: number }> => {
      await client.query('SELECT pg_stat_clear_snapshot()');
      const row = await client.query<{ n: string; dead: string }>(
        `SELECT vacuum_count AS n, n_dead_tup AS dead FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'`,
        [schema],
      );
      return { vacuums: Number(row.rows[0]?.n ?? 0), dead: Number(row.rows[0]?.dead ?? 0) };
    };
    await store.jobEnqueue(enqueueParams('vacuum-me'));
    const [leased] = await store.jobLease({ tenant: 't', workerId: 'w', leaseMs: 60_000, max: 1 });
    if (leased === undefined) throw new Error('nothing leased');
    await store.jobComplete({ tenant: 't', id: leased.id, token: leased.token });
    // The lease and the completion rewrote the job's row: a dead row, once the server's statistics show it.
    await waitFor('the dead row of jobs to show in pg_stat_user_tables', async () => (await jobsStats()).dead > 0);
    const before = (await jobsStats()).vacuums;
    expect(await store.reclaimSpace()).toBe(autovacuum === false);
    if (autovacuum !== false) {
      expect((await jobsStats()).vacuums).toBe(before);
      return;
    }
    await waitFor('the vacuum of jobs to show in pg_stat_user_tables', async () => (await jobsStats()).vacuums === before + 1);
    // Nothing changed since: an idle queue is neither vacuumed nor analyzed again.
    expect(await store.reclaimSpace()).toBe(false);
    expect((await jobsStats()).vacuums).toBe(before + 1);
  });
  it('sets autovacuum on the churning tables by a number of dead rows, not by a fraction of the table', async () => {
    const schema = freshSchema();
    await connect(schema);
    const client = await admin();
    const { rows } = await client.query<{ relname: string; reloptions: string[] | null }>(
      `SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relname IN ('jobs', 'job_attempts', 'job_results') ORDER BY c.relname`,
      [schema],
    );
    const options = Object.fromEntries(rows.map((row) => [row.relname, row.reloptions ?? []]));
    expect(options['jobs']).toEqual(expect.arrayContaining(['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=10000']));
    expect(options['job_attempts']).toEqual(expect.arrayContaining(['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=10000']));
    expect(options['job_results']).toEqual(expect.arrayContaining(['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=5000']));
    // Migration 11: vacuum leaves the files at their high-water mark (no ACCESS EXCLUSIVE lock to truncate them).
    for (const table of ['jobs', 'job_attempts', 'job_results']) expect(options[table]).toEqual(expect.arrayContaining(['vacuum_truncate=false']));
  });
});
