/**
 * PostgreSQL query plans of the due-time read and the retention batch, on a
 * schema holding 20,000 finished jobs and 20,000 queued jobs of another kind
 * (analyzed, their ready rows in job_ready): jobNextDue for one kind seeks
 * job_ready_order and never reads the other kind's backlog; the purge walks
 * job_endings_finished (each ended job's row in job_endings). Runs when
 * DATABASE_URL is set.
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropSchema, migrate } from '../../src/store/postgres/migrate.js';
import { JOB_NEXT_DUE_ANY_KIND, JOB_NEXT_DUE_KINDS } from '../../src/store/postgres/next-due.js';
import { JOB_PURGE_SELECT } from '../../src/store/postgres/retention.js';

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('PostgreSQL plans of jobNextDue and jobPurge', () => {
  const schema = `lh_plans_${randomBytes(4).toString('hex')}`;
  let client: pg.Client;

  beforeAll(async () => {
    client = new pg.Client({ connectionString: url });
    await client.connect();
    await migrate(client, schema);
    await client.query(`SET search_path = ${schema}`);
    const insert = (status: string, kind: string, from: number, extra: string): string =>
      `INSERT INTO jobs (id, tenant, owner, idempotency_key, request_hash, kind, payload, payload_bytes, status, max_attempts, run_after, created_at${extra === '' ? '' : ', started_at, finished_at'})
       SELECT gen_random_uuid(), 't', 'u', '${kind}-' || i, 'h', '${kind}', '{}'::json, 2, '${status}', 1, now() - interval '1 day', now() - interval '1 day'${extra}
       FROM generate_series(${from}, ${from + 19_999}) AS i`;
    await client.query(insert('succeeded', 'done', 0, `, now() - interval '1 day', now() - interval '1 day' + i * interval '1 ms'`));
    await client.query(insert('queued', 'backlog', 0, ''));
    await client.query(`INSERT INTO job_ready (tenant, kind, priority, run_after, seq, deadline_at)
      SELECT tenant, kind, priority, run_after, seq, deadline_at FROM jobs WHERE status = 'queued'`);
    await client.query(`INSERT INTO job_endings (status, finished_at, seq) SELECT status, finished_at, seq FROM jobs WHERE status = 'succeeded'`);
    await client.query('ANALYZE jobs, job_ready, job_endings');
  }, 60_000);

  afterAll(async () => {
    await client.end();
    await dropSchema(url, schema);
  });

  async function plan(text: string, values: readonly unknown[]): Promise<string> {
    await client.query(`PREPARE q AS ${text}`);
    try {
      const params = values.map((v) =>
        v === null ? 'NULL' : typeof v === 'string' ? `'${v}'` : Array.isArray(v) ? `ARRAY[${v.map((x) => `'${String(x)}'`).join(',')}]` : String(v),
      );
      const rows = (await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE q(${params.join(', ')})`)).rows;
      return rows.map((row) => row['QUERY PLAN']).join('\n');
    } finally {
      await client.query('DEALLOCATE q');
    }
  }

  it("seeks job_ready_order per kind: the other kind's 20,000 queued jobs are not read", async () => {
    const kinds = await plan(JOB_NEXT_DUE_KINDS.text, ['t', ['wanted']]);
    // One seek on (tenant, kind) for a kind with no queued job: no row of the backlog is read.
    expect(kinds).toMatch(/Index Only Scan using job_ready_order on job_ready(?: \w+)? \(actual rows=0 loops=1\)/);
    expect(kinds).toMatch(/Index Cond: \(\(tenant = 't'::text\) AND \(kind = /);
    expect(kinds).not.toMatch(/Seq Scan on (jobs|job_ready)/);
    // Without a filter: the skip scan of the kinds, then one entry per (kind, priority): the backlog's first.
    const anyKind = await plan(JOB_NEXT_DUE_ANY_KIND.text, ['t']);
    expect(anyKind).toMatch(/job_ready_order/);
    expect(anyKind).not.toMatch(/Seq Scan on (jobs|job_ready)/);
    for (const rows of anyKind.matchAll(/on job_ready(?: \w+)? \(actual rows=(\d+) loops=(\d+)\)/g))
      expect(Number(rows[1]) * Number(rows[2])).toBeLessThanOrEqual(2);
  });

  it('walks job_endings_finished oldest first for a purge batch, and reaches each job by its key', async () => {
    const purge = await plan(JOB_PURGE_SELECT.text, ['succeeded', 0, false, null, null, 0, 100]);
    expect(purge).toMatch(/Index (Only )?Scan using job_endings_finished/);
    expect(purge).toMatch(/Index Scan using jobs_pkey/);
    expect(purge).not.toMatch(/Seq Scan on (jobs|job_endings)/);
    expect(purge).not.toMatch(/Sort/);
  });
});
