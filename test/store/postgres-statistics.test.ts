/**
 * PostgreSQL's plans on a queue that grew after its statements were planned. Each connection of the store
 * plans a named statement once (a generic plan) and keeps that plan until the statistics of a table it reads
 * change; a new queue's plans are therefore made while its tables are empty, and on a server whose
 * autovacuum is off nothing analyzes them later. The store's connections price sequential scans out
 * (PLANNER_SETTINGS, database.ts), so the plans made on the empty queue go by the indexes, and they still
 * read O(max) rows once the queue holds thousands of jobs it was never analyzed with. With sequential scans
 * allowed, the plans made on the empty queue scan jobs: the lease and completion tests below then fail. A
 * statement that names one job by id and tenant reads one row whichever index its plan took (jobWithId,
 * sql-fragments.ts); written `j.id = $1 AND j.tenant = $2`, five of them read the whole tenant.
 */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientConfig } from '../../src/store/postgres/database.js';
import * as Q from '../../src/store/postgres/queries.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { QUEUE_TABLES } from '../../src/store/postgres/retention.js';
import { statisticsStale } from '../../src/store/postgres/statistics.js';
import type { EnqueueParams } from '../../src/store/store.js';
import { completeManyValues, explainPrepared, JOB_TABLES, type PlanNode, planNodes, scanRowsRead, storeInNewSchema } from '../support/pg-plan.js';

const url = process.env['DATABASE_URL'] ?? '';
const TENANT = 't1';
const BACKLOG = 3_000;
const RUN = 500;
const MAX = 10;
const NO_JOB = '00000000-0000-0000-0000-000000000000';

/**
 * Statements that address one job by its id, with their arguments for job `id` of TENANT. Each also names the
 * tenant (or a status), which an index leads with too: planned on the empty queue, a tie in cost may pick that
 * index and read every job of the tenant to find one.
 */
const BY_ID: readonly (readonly [name: string, text: string, values: (id: string) => unknown[]])[] = [
  ['get', Q.JOB_GET.text, (id) => [id, TENANT, null]],
  ['peek', Q.JOB_PEEK.text, (id) => [id, TENANT]],
  ['lock', Q.JOB_LOCK.text, (id) => [id, TENANT, null]],
  ['renew', Q.JOB_RENEW.text, (id) => [id, TENANT, 'none', 60_000, false, null]],
  ['checkpoint', Q.JOB_CHECKPOINT.text, (id) => [id, TENANT, 'none', 1, '{}']],
  ['effect_started', Q.JOB_EFFECT_STARTED.text, (id) => [id, TENANT, 'none']],
  ['requeue', Q.JOB_REQUEUE.text, (id) => [id, 3, 'dead', 'queued', 0]],
  ['cancel_now', Q.JOB_CANCEL_NOW.text, (id) => [id, 'cancelled', 'cancelled', 'cancelled', null]],
  ['cancel_request', Q.JOB_CANCEL_REQUEST.text, (id) => [id]],
  ['reconcile', Q.JOB_RECONCILE.text, (id) => [id, 'succeeded', null, null, null]],
  // By its keys: concurrency, dedupe and unique keys (none of the jobs here has one, so these find nothing, by
  // their own indexes). The idempotency key's lookup is planned at each call (the test below).
  ['key_facts', Q.JOB_KEY_FACTS.text, () => [TENANT, 'b', 'k', 10]],
  ['key_head', Q.JOB_KEY_HEAD.text, () => [TENANT, 'b', 'k']],
  ['dedupe_holder', Q.JOB_DEDUPE_HOLDER.text, () => [TENANT, 'u', 'b', 'd']],
  ['unique_holder', Q.JOB_UNIQUE_HOLDER.text, () => [TENANT, 'u', 'b', 'q']],
];

function job(kind: string, n: number, priority: number): EnqueueParams {
  return {
    tenant: TENANT,
    owner: 'u',
    idempotencyKey: `${kind}-${n}`,
    requestHash: `h-${kind}-${n}`,
    kind,
    payload: { n },
    maxAttempts: 3,
    priority,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 8,
  };
}

describe('stale statistics', () => {
  it('for the retention tick’s upkeep, PostgreSQL autovacuum’s rule: more than 50 rows plus a tenth of the table changed', () => {
    expect(statisticsStale(50, 0)).toBe(false);
    expect(statisticsStale(51, 0)).toBe(true);
    expect(statisticsStale(100_050, 1_000_000)).toBe(false);
    expect(statisticsStale(100_051, 1_000_000)).toBe(true);
  });
});

/** Rows the scans of the queue's job tables read, over all loops; a sequential scan of one of them fails the test. */
function jobRowsOf(nodes: readonly PlanNode[]): number {
  expect(nodes.filter((node) => node['Node Type'] === 'Seq Scan' && JOB_TABLES.some((table) => table === node['Relation Name']))).toEqual([]);
  return scanRowsRead(nodes, JOB_TABLES).reduce((sum, rows) => sum + rows, 0);
}

describe.skipIf(url === '')('plans made on an empty queue serve it grown, never analyzed (postgres)', () => {
  let store: PostgresStore;
  let client: pg.Client;
  /** A connection with the store's own settings, whose plans are made while the queue is empty. */
  let planner: pg.Client;
  let close = async (): Promise<void> => undefined;
  const tokens = Array.from({ length: MAX }, (_, i) => `token-${i}`);

  beforeAll(async () => {
    let schema: string;
    ({ store, client, close, schema } = await storeInNewSchema(url, 'lh_test_young_plans'));
    // No autovacuum to analyze the tables meanwhile, as on a server where it is off.
    for (const table of QUEUE_TABLES) await client.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
    planner = new pg.Client(clientConfig({ connectionString: url, schema }));
    await planner.connect();
    await planner.query(`PREPARE young_lease AS ${Q.JOB_LEASE_KINDS.text}`);
    await planner.query(`PREPARE young_complete AS ${Q.JOB_COMPLETE_MANY.text}`);
    // Their first executions, on the empty queue, make the plans the connection keeps.
    await explainPrepared(planner, 'young_lease', [TENANT, MAX, tokens, 'w', 60_000, ['b', 'w', 'idle']]);
    await explainPrepared(planner, 'young_complete', completeManyValues(TENANT, [{ id: NO_JOB, token: 'none' }]));
    for (const [name, text, values] of BY_ID) {
      await planner.query(`PREPARE young_${name} AS ${text}`);
      await explainPrepared(planner, `young_${name}`, values(NO_JOB));
    }
    // Kind w's jobs come first in lease order (a higher priority) and have all run; kind b has a backlog.
    await store.jobEnqueueMany(Array.from({ length: RUN }, (_, i) => job('w', i, 10)));
    for (let n = 0; n < BACKLOG; n += 500) await store.jobEnqueueMany(Array.from({ length: 500 }, (_, i) => job('b', n + i, 0)));
    for (let done = 0; done < RUN; ) {
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', kinds: ['w'], leaseMs: 60_000, max: 100 });
      await store.jobCompleteMany(leased.map((j) => ({ tenant: TENANT, id: j.id, token: j.token })));
      done += leased.length;
    }
  }, 120_000);
  afterAll(async () => {
    await planner?.end();
    await close();
  });

  it('was never analyzed: the plans below are the ones made on the empty queue', async () => {
    const analyzed = await client.query<{ relname: string }>(
      `SELECT relname FROM pg_stat_user_tables WHERE relname = ANY($1) AND schemaname = current_schema()
          AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)`,
      [[...JOB_TABLES]],
    );
    expect(analyzed.rows).toEqual([]);
  });

  it('leases with a kinds filter reading O(max) rows, not the backlog, nor the jobs that ran', async () => {
    const rows = jobRowsOf(await explainPrepared(planner, 'young_lease', [TENANT, MAX, tokens, 'w', 60_000, ['b', 'w', 'idle']]));
    // The pick walks job_ready: MAX entries of kind b and none of kinds w and idle; it deletes those ready rows
    // and reads the jobs it took.
    expect(rows).toBeLessThanOrEqual(3 * MAX + 2);
  });

  it('completes a batch through the keys, reading a few rows per job', async () => {
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', kinds: ['b'], leaseMs: 60_000, max: MAX });
    expect(leased).toHaveLength(MAX);
    const rows = jobRowsOf(await explainPrepared(planner, 'young_complete', completeManyValues(TENANT, leased)));
    expect(rows).toBeLessThanOrEqual(4 * MAX);
  });

  it('looks up the job of a replayed idempotency key in one row, planned for the queue as it is (the store sends it unnamed)', async () => {
    const explained = await planner.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${Q.JOB_BY_KEYS.text}`, [
      [TENANT],
      ['u'],
      ['b-5'],
    ]);
    const nodes = [...planNodes(explained.rows[0]?.['QUERY PLAN'][0].Plan as PlanNode)];
    expect(nodes.some((node) => node['Index Name'] === 'jobs_tenant_owner_idempotency_key_key')).toBe(true);
    expect(jobRowsOf(nodes)).toBeLessThanOrEqual(3);
  });

  it.each(BY_ID.map(([name, , values]) => [name, values] as const))('%s reads the one job it names, not the tenant’s', async (name, values) => {
    const [queued] = (await store.jobList({ scope: { tenant: TENANT }, status: 'queued', limit: 1 })).jobs;
    expect(queued).toBeDefined();
    expect(jobRowsOf(await explainPrepared(planner, `young_${name}`, values(queued?.id ?? NO_JOB)))).toBeLessThanOrEqual(3);
  });
});
