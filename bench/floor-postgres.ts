/**
 * The storage designs `npm run floor -- --db postgres://…` weighs (issue 28),
 * each in a fresh schema, as the hot path's statements with nothing around
 * them (synchronous_commit = on, generic plans, as the store's connections):
 *
 *   a  today's schema (PostgresStore's migrations) and the store's own
 *      statements: JOB_INSERT_MANY, JOB_LEASE_KINDS, JOB_COMPLETE_MANY
 *   b  a ready table of queued jobs (what the lease reads) with an index in
 *      lease order and a uuid key; the job row written once at enqueue and
 *      updated at the end, a HOT update: no index of jobs depends on its
 *      status, and jobs has fillfactor 50 so that a page has room for each of
 *      its rows' second version (at 80, 78% of those updates left the page
 *      and wrote an entry in every index); a running job is a row of
 *      job_leases; counters by statement triggers, as today
 *   c  b with bigint row ids inside (jobs, ready, leases, attempts; the
 *      public id keeps its unique index) and the ready table's one index in
 *      lease order, covering what the pick reads
 *   d  c with the attempt row written once at the end and the counter rows
 *      moved by the statements themselves instead of triggers
 *
 * Each lease is one statement: the pick (FOR UPDATE SKIP LOCKED, in lease
 * order) deletes the ready rows and inserts the leases with their epoch
 * bumped; each completion batch one statement guarded on token and a live
 * lease, in key order so that concurrent batches lock in the same order.
 */

import pg from 'pg';
import { newJobId, newLeaseToken } from '../src/core/ids.js';
import * as Q from '../src/store/postgres/queries.js';
import { PostgresStore } from '../src/store/postgres/postgres-store.js';
import { bind } from '../src/store/postgres/sql-fragments.js';
import { KIND, LEASE_MS, TENANT, type FloorDb, type Leased, type NewJob } from './floor-db.js';

export interface PgDesign {
  /** c, d: bigint row ids inside and one covering index on the ready table. */
  readonly intIds: boolean;
  /** d: the attempt row written once at the end; counters by the statements, not triggers. */
  readonly onceAtEnd: boolean;
  /** jobs' fillfactor: the room on a page for the HOT update at the end (50 unless given). */
  readonly fillfactor?: number;
}

const SHARD = `(pg_backend_pid() % 16)`;

/** A client on `schema` with the store's session settings. */
export async function connect(url: string, schema: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema} -c plan_cache_mode=force_generic_plan -c synchronous_commit=on` });
  await client.connect();
  return client;
}

async function backendPid(client: pg.Client): Promise<number> {
  return (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? 0;
}

function rowsOf(jobs: readonly NewJob[]): { ids: string[]; keys: string[]; payloads: string[] } {
  return { ids: jobs.map(() => newJobId()), keys: jobs.map((j) => `k${j.n}`), payloads: jobs.map((j) => `{"n":${j.n}}`) };
}

async function inTransaction<T>(client: pg.Client, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  }
}

/** `floor` on `client`, with completeAndLease (its complete and lease in one transaction) and its server process. */
async function withPairedCommit(client: pg.Client, floor: Omit<FloorDb, 'completeAndLease' | 'serverPid'>): Promise<FloorDb> {
  return {
    ...floor,
    completeAndLease: (jobs, max) =>
      inTransaction(client, async () => {
        await floor.complete(jobs);
        return floor.lease(max);
      }),
    serverPid: await backendPid(client),
  };
}

/** (a)'s schema: PostgresStore's migrations in `schema`. */
export async function createTodayPg(url: string, schema: string): Promise<void> {
  await (await PostgresStore.connect({ connectionString: url, schema })).close();
}

/** (a) Today, on a schema createTodayPg made: one connection. */
export async function openTodayPg(url: string, schema: string): Promise<FloorDb> {
  const client = await connect(url, schema);
  const insert = (jobs: readonly NewJob[]): Promise<unknown> => {
    const { ids, keys, payloads } = rowsOf(jobs);
    const each = <T>(value: T): T[] => jobs.map(() => value);
    return client.query(
      bind(Q.JOB_INSERT_MANY, [
        ids,
        each(TENANT),
        each(''),
        keys,
        each('h'.repeat(64)),
        each(KIND),
        payloads,
        payloads.map((p) => p.length),
        each(3),
        each(0),
        each(null),
        each(null),
      ]),
    );
  };
  const floor: Omit<FloorDb, 'completeAndLease' | 'serverPid'> = {
    enqueue: (jobs) =>
      inTransaction(client, async () => {
        for (const job of jobs) await insert([job]);
      }),
    enqueueBatch: async (jobs) => void (await insert(jobs)),
    async lease(max) {
      const tokens = Array.from({ length: max }, () => newLeaseToken());
      const rows = (
        await client.query<{ id: string | null; lease_token: string; seq: number }>(bind(Q.JOB_LEASE_KINDS, [TENANT, max, tokens, 'floor', LEASE_MS, [KIND]]))
      ).rows;
      return rows.filter((r) => r.id !== null).map((r) => ({ seq: Number(r.seq), id: r.id ?? '', token: r.lease_token }));
    },
    async complete(jobs) {
      const sorted = [...jobs].sort((a, b) => (a.id < b.id ? -1 : 1));
      const each = <T>(value: T): T[] => sorted.map(() => value);
      const done = await client.query(
        bind(Q.JOB_COMPLETE_MANY, [sorted.map((j) => j.id), each(TENANT), sorted.map((j) => j.token), each(null), each(null), each(null)]),
      );
      if (done.rows.length !== jobs.length) throw new Error(`completed ${done.rows.length} of ${jobs.length}`);
    },
    close: () => client.end(),
  };
  return withPairedCommit(client, floor);
}

function counterTables(): string {
  return `CREATE TABLE job_counters (
  tenant text NOT NULL, kind text NOT NULL, status text NOT NULL, shard smallint NOT NULL,
  jobs bigint NOT NULL DEFAULT 0, started bigint NOT NULL DEFAULT 0, wait_ms bigint NOT NULL DEFAULT 0, run_jobs bigint NOT NULL DEFAULT 0,
  run_ms bigint NOT NULL DEFAULT 0, completed bigint NOT NULL DEFAULT 0, completion_ms bigint NOT NULL DEFAULT 0, stored_bytes bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, kind, status, shard)
);
CREATE TABLE tenant_sums (
  tenant text NOT NULL, shard smallint NOT NULL, ended_attempts bigint NOT NULL DEFAULT 0, attempt_run_ms bigint NOT NULL DEFAULT 0,
  result_bytes bigint NOT NULL DEFAULT 0, PRIMARY KEY (tenant, shard)
);`;
}

/** Adds `select`'s (tenant, kind, status, jobs, started, run_jobs) rows to the counters. */
function countInto(select: string): string {
  return `INSERT INTO job_counters AS c (tenant, kind, status, shard, jobs, started, run_jobs, completed)
    SELECT tenant, kind, status, ${SHARD}, sum(jobs), sum(started), sum(run_jobs), sum(run_jobs) FROM (${select}) AS d
     GROUP BY tenant, kind, status ORDER BY tenant, kind, status
    ON CONFLICT (tenant, kind, status, shard) DO UPDATE SET jobs = c.jobs + EXCLUDED.jobs, started = c.started + EXCLUDED.started,
      run_jobs = c.run_jobs + EXCLUDED.run_jobs, completed = c.completed + EXCLUDED.completed`;
}

function sumsInto(select: string): string {
  return `INSERT INTO tenant_sums AS s (tenant, shard, ended_attempts, attempt_run_ms)
    SELECT tenant, ${SHARD}, count(*), sum(run_ms)::bigint FROM (${select}) AS d GROUP BY tenant ORDER BY tenant
    ON CONFLICT (tenant, shard) DO UPDATE SET ended_attempts = s.ended_attempts + EXCLUDED.ended_attempts, attempt_run_ms = s.attempt_run_ms + EXCLUDED.attempt_run_ms`;
}

function statementTrigger(name: string, table: string, event: 'INSERT' | 'UPDATE' | 'DELETE', body: string): string {
  const referencing =
    event === 'INSERT' ? 'NEW TABLE AS new_rows' : event === 'DELETE' ? 'OLD TABLE AS old_rows' : 'OLD TABLE AS old_rows NEW TABLE AS new_rows';
  return `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN ${body}; RETURN NULL; END $fn$;
CREATE TRIGGER ${name} AFTER ${event} ON ${table} REFERENCING ${referencing} FOR EACH STATEMENT EXECUTE FUNCTION ${name}();`;
}

const MS = (expression: string): string => `(extract(epoch FROM ${expression}) * 1000)`;

function readySchema(design: PgDesign): string {
  // The key of a job inside the store: its uuid (b) or a bigint row id (c, d).
  const key = design.intIds ? 'job_seq bigint' : 'job_id uuid';
  const jobKey = design.intIds ? 'seq' : 'id';
  const triggers = design.onceAtEnd
    ? ''
    : [
        statementTrigger(
          'count_enqueued',
          'jobs',
          'INSERT',
          countInto(`SELECT tenant, kind, 'queued' AS status, 1 AS jobs, 0 AS started, 0 AS run_jobs FROM new_rows`),
        ),
        statementTrigger(
          'count_leased',
          'job_leases',
          'INSERT',
          countInto(`SELECT tenant, kind, 'queued' AS status, -1 AS jobs, 0 AS started, 0 AS run_jobs FROM new_rows
            UNION ALL SELECT tenant, kind, 'running', 1, 1, 0 FROM new_rows`),
        ),
        statementTrigger(
          'count_lease_ended',
          'job_leases',
          'DELETE',
          countInto(`SELECT tenant, kind, 'running' AS status, -1 AS jobs, 0 AS started, 0 AS run_jobs FROM old_rows`),
        ),
        statementTrigger(
          'count_ended',
          'jobs',
          'UPDATE',
          countInto(`SELECT n.tenant, n.kind, n.status, 1 AS jobs, 0 AS started, (n.status = 'succeeded')::int AS run_jobs
            FROM new_rows n JOIN old_rows o USING (${jobKey}) WHERE n.status IS DISTINCT FROM o.status`),
        ),
        statementTrigger(
          'count_attempts',
          'job_attempts',
          'UPDATE',
          sumsInto(`SELECT j.tenant, ${MS('n.ended_at')} - ${MS('n.started_at')} AS run_ms
            FROM new_rows n JOIN old_rows o USING (${key.split(' ')[0]}, epoch) JOIN jobs j ON j.${jobKey} = n.${key.split(' ')[0]}
           WHERE o.ended_at IS NULL AND n.ended_at IS NOT NULL`),
        ),
      ].join('\n');
  return `
CREATE TABLE jobs (
  ${design.intIds ? 'seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id uuid NOT NULL UNIQUE' : 'id uuid PRIMARY KEY, seq bigint GENERATED ALWAYS AS IDENTITY'},
  tenant text NOT NULL, owner text NOT NULL, idempotency_key text NOT NULL, request_hash text NOT NULL, kind text NOT NULL,
  payload json NOT NULL, payload_bytes integer NOT NULL CHECK (payload_bytes >= 0),
  -- queued, or running while a row of job_leases exists; the ending statuses once it ends.
  status text NOT NULL CHECK (status IN ('queued', 'waiting', 'succeeded', 'dead', 'cancelled', 'unknown')),
  attempts integer NOT NULL DEFAULT 0, max_attempts integer NOT NULL CHECK (max_attempts >= 1), priority integer NOT NULL DEFAULT 0,
  run_after timestamptz NOT NULL, deadline_ms bigint, deadline_at timestamptz, epoch integer NOT NULL DEFAULT 0, last_outcome text,
  created_at timestamptz NOT NULL, started_at timestamptz, finished_at timestamptz, last_error_code text, last_error_message text, last_error_class text,
  UNIQUE (tenant, owner, idempotency_key)
) WITH (fillfactor = ${design.fillfactor ?? 50});
-- No index of jobs reads status, so the one update at the end is HOT (retention and the status lists walk jobs_by_tenant).
CREATE INDEX jobs_by_tenant ON jobs (tenant, seq);
CREATE TABLE job_ready (
  ${key} NOT NULL${design.intIds ? '' : ' PRIMARY KEY'}, seq bigint NOT NULL, tenant text NOT NULL, kind text NOT NULL, priority integer NOT NULL,
  run_after timestamptz NOT NULL, deadline_at timestamptz, attempts integer NOT NULL, max_attempts integer NOT NULL, epoch integer NOT NULL
);
CREATE INDEX job_ready_order ON job_ready (tenant, kind, priority DESC, run_after, seq)${design.intIds ? ' INCLUDE (deadline_at)' : ''};
CREATE INDEX job_ready_deadline ON job_ready (deadline_at) WHERE deadline_at IS NOT NULL;
CREATE TABLE job_leases (
  ${key} PRIMARY KEY, tenant text NOT NULL, kind text NOT NULL, priority integer NOT NULL, run_after timestamptz NOT NULL,
  epoch integer NOT NULL CHECK (epoch >= 1), attempt integer NOT NULL, max_attempts integer NOT NULL, token text NOT NULL,
  worker_id text NOT NULL, started_at timestamptz NOT NULL, expires_at timestamptz NOT NULL, deadline_at timestamptz,
  CHECK (attempt <= max_attempts)
);
CREATE INDEX job_leases_expiry ON job_leases (expires_at);
CREATE TABLE job_attempts (
  ${key} NOT NULL, epoch integer NOT NULL, attempt integer NOT NULL CHECK (attempt >= 1), worker_id text NOT NULL,
  started_at timestamptz NOT NULL, ended_at timestamptz, outcome text, error_code text,
  PRIMARY KEY (${key.split(' ')[0]}, epoch)
);
${counterTables()}
${triggers}`;
}

/** The schema of b, c or d, created as `schema`. */
export async function createReadyPg(url: string, schema: string, design: PgDesign): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.query(`SET search_path = ${schema}`);
  await admin.query(readySchema(design));
  await admin.end();
}

/** b, c or d on a schema createReadyPg made: one connection. */
export async function openReadyPg(url: string, schema: string, design: PgDesign): Promise<FloorDb> {
  const client = await connect(url, schema);
  const k = design.intIds ? 'job_seq' : 'job_id';
  const jobKey = design.intIds ? 'seq' : 'id';
  const counted = (select: string): string => (design.onceAtEnd ? `, counted AS (${countInto(select)})` : '');
  const insert = {
    name: `floor_insert_${schema}`,
    text: `WITH input AS (
        SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[]) WITH ORDINALITY AS i(id, idempotency_key, payload, ord)
      ), ins AS (
        INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status, max_attempts, priority, run_after, created_at)
        SELECT id, $4, '', idempotency_key, $5, $6, payload::json, octet_length(payload), 'queued', 3, 0, now(), now() FROM input ORDER BY ord
        ON CONFLICT (tenant, owner, idempotency_key) DO NOTHING
        RETURNING id, seq, tenant, kind, priority, run_after, deadline_at, max_attempts
      ), ready AS (
        INSERT INTO job_ready (${k}, seq, tenant, kind, priority, run_after, deadline_at, attempts, max_attempts, epoch)
        SELECT ${jobKey}, seq, tenant, kind, priority, run_after, deadline_at, 0, max_attempts, 0 FROM ins
      )${counted(`SELECT tenant, kind, 'queued' AS status, 1 AS jobs, 0 AS started, 0 AS run_jobs FROM ins`)}
      SELECT count(*)::int AS n FROM ins`,
  };
  const leaseQuery = {
    name: `floor_lease_${schema}`,
    // As today's, the statement also answers whether expiries or queued deadlines are due for the reaper.
    text: `WITH due AS (
        SELECT EXISTS (SELECT 1 FROM job_leases WHERE expires_at <= now()) OR EXISTS (SELECT 1 FROM job_ready WHERE deadline_at <= now()) AS due
      ), picked AS (
        DELETE FROM job_ready r WHERE r.ctid = ANY (ARRAY(
          SELECT ctid FROM job_ready WHERE tenant = $1 AND kind = $6 AND run_after <= now() AND (deadline_at IS NULL OR deadline_at > now())
           ORDER BY priority DESC, run_after, seq LIMIT $2 FOR UPDATE SKIP LOCKED))
        RETURNING r.*
      ), numbered AS (
        SELECT picked.*, row_number() OVER () AS n FROM picked
      ), leased AS (
        INSERT INTO job_leases (${k}, tenant, kind, priority, run_after, epoch, attempt, max_attempts, token, worker_id, started_at, expires_at, deadline_at)
        SELECT ${k}, tenant, kind, priority, run_after, epoch + 1, attempts + 1, max_attempts, t.token, $4, now(),
               LEAST(now() + $5 * interval '1 millisecond', deadline_at), deadline_at
          FROM numbered JOIN unnest($3::text[]) WITH ORDINALITY AS t(token, n) USING (n)
        RETURNING ${k}, tenant, kind, epoch, attempt, token, worker_id
      )${
        design.onceAtEnd
          ? ''
          : `, attempt_rows AS (
        INSERT INTO job_attempts (${k}, epoch, attempt, worker_id, started_at) SELECT ${k}, epoch, attempt, worker_id, now() FROM leased
      )`
      }${counted(`SELECT tenant, kind, 'queued' AS status, -1 AS jobs, 0 AS started, 0 AS run_jobs FROM leased
          UNION ALL SELECT tenant, kind, 'running', 1, 1, 0 FROM leased`)}
      SELECT j.id::text AS id, j.payload, l.token, due.due FROM due, leased l JOIN jobs j ON j.${jobKey} = l.${k}`,
  };
  const completeQuery = {
    name: `floor_complete_${schema}`,
    text: `WITH c AS (
        SELECT * FROM unnest($1::uuid[], $2::text[]) AS c(id, token)
      ), ended AS (
        DELETE FROM job_leases l USING jobs j, c
         WHERE j.id = c.id AND j.tenant = $3 AND l.${k} = j.${jobKey} AND l.token = c.token AND l.expires_at > now()
           AND (l.deadline_at IS NULL OR l.deadline_at > now())
        RETURNING l.${k}, l.tenant, l.kind, l.epoch, l.attempt, l.worker_id, l.started_at
      ), done AS (
        UPDATE jobs j SET status = 'succeeded', finished_at = now(), epoch = e.epoch, attempts = e.attempt, last_outcome = 'succeeded',
               started_at = coalesce(j.started_at, e.started_at)
          FROM ended e WHERE j.${jobKey} = e.${k} AND j.status = 'queued'
        RETURNING j.${jobKey}
      ), attempt_rows AS (
        ${
          design.onceAtEnd
            ? `INSERT INTO job_attempts (${k}, epoch, attempt, worker_id, started_at, ended_at, outcome)
             SELECT ${k}, epoch, attempt, worker_id, started_at, now(), 'succeeded' FROM ended`
            : `UPDATE job_attempts a SET ended_at = now(), outcome = 'succeeded' FROM ended e WHERE a.${k} = e.${k} AND a.epoch = e.epoch AND a.ended_at IS NULL`
        }
      )${counted(`SELECT tenant, kind, 'running' AS status, -1 AS jobs, 0 AS started, 0 AS run_jobs FROM ended
          UNION ALL SELECT tenant, kind, 'succeeded', 1, 0, 1 FROM ended`)}${design.onceAtEnd ? `, sums AS (${sumsInto(`SELECT tenant, ${MS('now()')} - ${MS('started_at')} AS run_ms FROM ended`)})` : ''}
      SELECT count(*)::int AS n FROM done`,
  };
  const insertRows = async (jobs: readonly NewJob[]): Promise<void> => {
    const { ids, keys, payloads } = rowsOf(jobs);
    const inserted = (await client.query<{ n: number }>({ ...insert, values: [ids, keys, payloads, TENANT, 'h'.repeat(64), KIND] })).rows[0]?.n;
    if (inserted !== jobs.length) throw new Error(`inserted ${String(inserted)} of ${jobs.length}`);
  };
  const floor: Omit<FloorDb, 'completeAndLease' | 'serverPid'> = {
    enqueue: (jobs) =>
      inTransaction(client, async () => {
        for (const job of jobs) await insertRows([job]);
      }),
    enqueueBatch: insertRows,
    async lease(max) {
      const tokens = Array.from({ length: max }, () => newLeaseToken());
      const rows = (await client.query<{ id: string; token: string }>({ ...leaseQuery, values: [TENANT, max, tokens, 'floor', LEASE_MS, KIND] })).rows;
      return rows.map((r) => ({ seq: 0, id: r.id, token: r.token }));
    },
    async complete(jobs: readonly Leased[]) {
      const sorted = [...jobs].sort((a, b) => (a.id < b.id ? -1 : 1));
      const done = (await client.query<{ n: number }>({ ...completeQuery, values: [sorted.map((j) => j.id), sorted.map((j) => j.token), TENANT] })).rows[0]?.n;
      if (done !== jobs.length) throw new Error(`completed ${String(done)} of ${jobs.length}`);
    },
    close: () => client.end(),
  };
  return withPairedCommit(client, floor);
}
