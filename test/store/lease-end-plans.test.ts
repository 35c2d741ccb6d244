/**
 * PostgreSQL's statements that name running jobs by id (the batch lease endings JOB_COMPLETE_MANY and
 * JOB_END_LEASES, and renew, complete, checkpoint, effect and cancel request) look each job up by its id. The
 * reaper's partial index `jobs_lease_expiry … WHERE status = 'running'` keeps an entry for every job that
 * stopped running since the last vacuum, and statistics taken while few jobs ran make a scan of it look
 * cheaper than the id lookups; such a scan read thousands of entries for a batch of 16. The setup makes
 * exactly that state: the statistics are taken before any job runs, then 3,000 jobs are leased and completed
 * (their entries stay), and the statements must still reach jobs through jobs_pkey only.
 */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as Q from '../../src/store/postgres/queries.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { EnqueueParams, LeasedJob } from '../../src/store/store.js';
import { planNodes, type PlanNode, storeInNewSchema } from '../support/pg-plan.js';

const url = process.env['DATABASE_URL'] ?? '';
const TENANT = 't1';
const FINISHED = 3_000;
const BATCH = 16;

function job(n: number): EnqueueParams {
  return {
    tenant: TENANT,
    owner: 'u',
    idempotencyKey: `job-${n}`,
    requestHash: `h-${n}`,
    kind: 'k',
    payload: { n },
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 8,
  };
}

describe.skipIf(url === '')('statements on running jobs look them up by id (postgres)', () => {
  let store: PostgresStore;
  let client: pg.Client;
  let close = async (): Promise<void> => undefined;

  beforeAll(async () => {
    ({ store, client, close } = await storeInNewSchema(url, 'lh_test_end_plans'));
    for (let n = 0; n < FINISHED + 4 * BATCH; n += 500) await store.jobEnqueueMany(Array.from({ length: 500 }, (_, i) => job(n + i)));
    // Statistics of a queue where nothing runs yet; autovacuum must not refresh them (or clean the index) meanwhile.
    await client.query('ALTER TABLE jobs SET (autovacuum_enabled = false)');
    await client.query('ANALYZE jobs');
    for (let done = 0; done < FINISHED; ) {
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 600_000, max: 500 });
      await store.jobCompleteMany(leased.map((leasedJob) => ({ tenant: TENANT, id: leasedJob.id, token: leasedJob.token })));
      done += leased.length;
    }
  }, 120_000);
  afterAll(() => close());

  /** The indexes through which the statement reached jobs, and the index entries those scans read. */
  async function jobsAccess(text: string, values: readonly unknown[]): Promise<{ indexes: string[]; entries: number }> {
    await client.query('BEGIN');
    try {
      const explained = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, [...values]);
      const nodes = [...planNodes(explained.rows[0]!['QUERY PLAN'][0].Plan)];
      const jobsIndexes = nodes.filter((node) => node['Index Name']?.startsWith('jobs_') === true);
      expect(nodes.some((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'jobs')).toBe(false);
      return {
        indexes: [...new Set(jobsIndexes.map((node) => node['Index Name'] as string))],
        entries: jobsIndexes.reduce((sum, node) => sum + node['Actual Rows'] * node['Actual Loops'], 0),
      };
    } finally {
      await client.query('ROLLBACK');
    }
  }

  async function leaseBatch(): Promise<readonly LeasedJob[]> {
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 600_000, max: BATCH });
    expect(leased).toHaveLength(BATCH);
    return leased;
  }

  it('completes a batch through jobs_pkey, reading one entry per job', async () => {
    const leased = await leaseBatch();
    const access = await jobsAccess(Q.JOB_COMPLETE_MANY.text, [
      leased.map((j) => j.id),
      leased.map(() => TENANT),
      leased.map((j) => j.token),
      leased.map(() => null),
      leased.map(() => null),
      leased.map(() => null),
    ]);
    expect(access.indexes).toEqual(['jobs_pkey']);
    expect(access.entries).toBe(BATCH);
  });

  it('ends a batch of leases (fail, retry, the reaper) through jobs_pkey too', async () => {
    const leased = await leaseBatch();
    const each = <T>(value: T): T[] => leased.map(() => value);
    const access = await jobsAccess(Q.JOB_END_LEASES.text, [
      leased.map((j) => j.id),
      leased.map((j) => j.token),
      each('dead'),
      each('failed'),
      each('boom'),
      each('it failed'),
      each(null),
      each('boom'),
      true,
      [],
      [],
      [],
      [],
      each('permanent'),
    ]);
    expect(access.indexes).toEqual(['jobs_pkey']);
    expect(access.entries).toBe(BATCH);
  });

  it('renews, completes one, checkpoints, marks an effect and requests a cancel through jobs_pkey', async () => {
    const [one] = await leaseBatch();
    if (one === undefined) throw new Error('expected a leased job');
    const statements = [
      [Q.JOB_RENEW, [one.id, TENANT, one.token, 60_000, false, null]],
      [Q.JOB_COMPLETE_ONE, [one.id, TENANT, one.token, null, null, null]],
      [Q.JOB_CHECKPOINT, [one.id, TENANT, one.token, 1, '{}']],
      [Q.JOB_EFFECT_STARTED, [one.id, TENANT, one.token]],
      [Q.JOB_CANCEL_REQUEST, [one.id]],
    ] as const;
    for (const [query, values] of statements)
      expect({ query: query.name, ...(await jobsAccess(query.text, values)) }).toEqual({ query: query.name, indexes: ['jobs_pkey'], entries: 1 });
  });
});
