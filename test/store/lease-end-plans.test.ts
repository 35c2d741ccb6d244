/**
 * PostgreSQL's statements that name running jobs by id (the batch lease endings JOB_COMPLETE_MANY and
 * JOB_END_LEASES, and renew, complete, checkpoint, effect and cancel request) look each job up by its id
 * (jobs_id_key), then its lease by the job's row id (job_leases_pkey) and the row itself by that id
 * (jobs_pkey). The reaper's index `job_leases_expiry` keeps an entry for every lease that ended since the
 * last vacuum, and statistics taken while few jobs ran could make a scan of it, or of job_leases, look
 * cheaper than the key lookups; such a scan read thousands of entries for a batch of 16. The setup makes
 * exactly that state: the statistics are taken before any job runs, then 3,000 jobs are leased and completed
 * (their entries stay), and the statements must still reach jobs and job_leases through their keys only, one
 * entry per job in each.
 */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as Q from '../../src/store/postgres/queries.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { EnqueueParams, LeasedJob } from '../../src/store/store.js';
import { completeManyValues, planNodes, type PlanNode, storeInNewSchema } from '../support/pg-plan.js';

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
    for (const table of ['jobs', 'job_leases']) {
      await client.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
      await client.query(`ANALYZE ${table}`);
    }
    for (let done = 0; done < FINISHED; ) {
      const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 600_000, max: 500 });
      await store.jobCompleteMany(leased.map((leasedJob) => ({ tenant: TENANT, id: leasedJob.id, token: leasedJob.token })));
      done += leased.length;
    }
  }, 120_000);
  afterAll(() => close());

  /** The index entries the statement read in each index of jobs and job_leases (it never scans either table). */
  async function jobsAccess(text: string, values: readonly unknown[]): Promise<Record<string, number>> {
    await client.query('BEGIN');
    try {
      const explained = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, [...values]);
      const nodes = [...planNodes(explained.rows[0]!['QUERY PLAN'][0].Plan)];
      expect(nodes.some((node) => node['Node Type'] === 'Seq Scan' && ['jobs', 'job_leases'].includes(node['Relation Name'] ?? ''))).toBe(false);
      const entries: Record<string, number> = {};
      for (const node of nodes) {
        const index = node['Index Name'];
        if (index === undefined || !/^jobs_|^job_leases_/.test(index)) continue;
        entries[index] = (entries[index] ?? 0) + node['Actual Rows'] * node['Actual Loops'];
      }
      return entries;
    } finally {
      await client.query('ROLLBACK');
    }
  }

  async function leaseBatch(): Promise<readonly LeasedJob[]> {
    const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 600_000, max: BATCH });
    expect(leased).toHaveLength(BATCH);
    return leased;
  }

  it('completes a batch through the keys, reading one entry per job of each', async () => {
    const leased = await leaseBatch();
    const access = await jobsAccess(Q.JOB_COMPLETE_MANY.text, completeManyValues(TENANT, leased));
    expect(access).toEqual({ jobs_id_key: BATCH, job_leases_pkey: BATCH, jobs_pkey: BATCH });
  });

  it('ends a batch of leases (fail, retry, the reaper) through the keys too', async () => {
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
    expect(access).toEqual({ jobs_id_key: BATCH, job_leases_pkey: BATCH, jobs_pkey: BATCH });
  });

  it('renews, completes one, checkpoints, marks an effect and requests a cancel through the keys', async () => {
    const [one] = await leaseBatch();
    if (one === undefined) throw new Error('expected a leased job');
    // Renew reads the lease twice (the progress it replaces, then the row it updates). A statement that names the
    // job by id and tenant finds its seq by the id, then the row by the seq (jobWithId, sql-fragments.ts).
    const statements = [
      [Q.JOB_RENEW, [one.id, TENANT, one.token, 60_000, false, null], { jobs_id_key: 1, jobs_pkey: 1, job_leases_pkey: 2 }],
      [Q.JOB_COMPLETE_ONE, [one.id, TENANT, one.token, null, null, null], { jobs_id_key: 1, job_leases_pkey: 1, jobs_pkey: 1 }],
      [Q.JOB_CHECKPOINT, [one.id, TENANT, one.token, 1, '{}'], { jobs_id_key: 1, jobs_pkey: 2, job_leases_pkey: 1 }],
      [Q.JOB_EFFECT_STARTED, [one.id, TENANT, one.token], { jobs_id_key: 1, jobs_pkey: 1, job_leases_pkey: 1 }],
      [Q.JOB_CANCEL_REQUEST, [one.id], { jobs_id_key: 1, job_leases_pkey: 1 }],
    ] as const;
    for (const [query, values, expected] of statements)
      expect({ query: query.name, ...(await jobsAccess(query.text, values)) }).toEqual({ query: query.name, ...expected });
  });
});
