/**
 * PostgreSQL's hot complete is one statement (the success and the result row
 * together), so no fault point can sit between its writes and its commit.
 * This test kills the coordinator while that statement is inside the server:
 * another session holds the job's row lock, the coordinator's complete waits
 * for it, and the coordinator is SIGKILLed in the wait. When the lock is let
 * go the server runs the orphaned statement to its end on its own, and the
 * outcome must be both (success and one result row) or neither. Either way the
 * worker's retry under the same token then answers 200 and leaves exactly one
 * result. Runs when DATABASE_URL is set, like the other PostgreSQL suites.
 */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseholdNetworkError } from '../../src/client/index.js';
import { waitFor } from '../support/wait-for.js';
import { DATABASE_URL, startCrashDeployment, type CrashDeployment } from './crash-deployment.js';

describe.skipIf(DATABASE_URL === '')('a coordinator killed inside the single-statement complete (postgres)', () => {
  let d: CrashDeployment;
  let admin: pg.Client;

  beforeAll(async () => {
    d = await startCrashDeployment('postgres');
    admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.end();
    await d?.stop();
  });

  /** Statements of this deployment's coordinators still running in the server, and how many of them wait for a lock. */
  async function coordinatorStatements(): Promise<{ active: number; waitingForLock: number }> {
    const { rows } = await admin.query<{ active: number; waiting: number }>(
      `SELECT count(*)::int AS active, count(*) FILTER (WHERE wait_event_type = 'Lock')::int AS waiting
         FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'`,
      [`leasehold:${d.schema}`.slice(0, 63)],
    );
    return { active: rows[0]?.active ?? 0, waitingForLock: rows[0]?.waiting ?? 0 };
  }

  it('commits both or neither; the retried complete answers 200 with one result', async () => {
    await d.serve();
    const { job } = await d.client(d.keys.producer).enqueue({ kind: 'statement', payload: {} }, { idempotencyKey: 'statement-1' });
    const [leased] = await d.client(d.keys.worker).lease({ workerId: 'w', kinds: ['statement'], leaseMs: 60_000, max: 1 });
    if (leased === undefined) throw new Error('nothing leased');

    const locker = new pg.Client({ connectionString: DATABASE_URL });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`SELECT 1 FROM ${d.schema}.jobs WHERE id = $1 FOR UPDATE`, [job.id]);
      const completing = d.client(d.keys.worker).complete(job.id, { token: leased.token, result: { answer: 1 } });
      completing.catch(() => undefined);
      await waitFor('the complete statement to wait for the row lock', async () => (await coordinatorStatements()).waitingForLock === 1);
      d.coordinator.child.kill('SIGKILL');
      expect(await d.coordinator.exited).toBe('SIGKILL');
      await expect(completing).rejects.toBeInstanceOf(LeaseholdNetworkError);
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    // The orphaned statement ends by itself, committed or not, once the lock is free.
    await waitFor('the orphaned statement to end', async () => (await coordinatorStatements()).active === 0);

    await d.serve();
    const after = await d.client(d.keys.admin).getJob(job.id);
    const rows = await d.resultRows(job.id);
    expect(rows === 1 ? 'both' : 'neither').toBe(after.status === 'succeeded' ? 'both' : 'neither');
    expect(rows).toBeLessThanOrEqual(1);
    console.log(
      `postgres single-statement complete killed mid-statement: ${rows === 1 ? 'both committed' : 'neither committed'} (status ${after.status}, ${rows} result rows)`,
    );

    expect(await d.client(d.keys.worker).complete(job.id, { token: leased.token, result: { answer: 1 } })).toEqual({ id: job.id, status: 'succeeded' });
    expect(await d.client(d.keys.admin).getJob(job.id)).toMatchObject({ status: 'succeeded', result: { answer: 1 } });
    expect(await d.resultRows(job.id)).toBe(1);
    expect(d.coordinatorWarnings()).toEqual([]);
  });
});
