/**
 * SQLite counts a write transaction's new jobs once before COMMIT
 * (new-job-counts.ts) rather than by a trigger per row. The counter rows and
 * the tenant's stored bytes must still equal a recount of the table after a
 * batch that the group commit had to run again one operation at a time
 * (one enqueue in it refused), after jobs that start waiting or dead, and
 * after enqueues in an application's own transaction, committed or rolled
 * back.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams } from '../../src/store/store.js';
import { enqueueParams, TENANT } from '../conformance/harness.js';

let dir: string;
let path: string;
let store: SqliteStore;

/** The conformance suite's enqueue, with payload sizes that differ by key (so a wrong byte count shows). */
function params(key: string, overrides: Partial<EnqueueParams> = {}): EnqueueParams {
  return enqueueParams(key, { payloadBytes: 7 + key.length, ...overrides });
}

/** The counter rows and stored bytes beside what a recount of jobs gives, read on a connection of its own. */
function countersAndRecount(): { counters: unknown; recount: unknown } {
  const db = new Database(path, { readonly: true });
  try {
    return {
      counters: {
        jobs: db.prepare('SELECT tenant, kind, status, jobs FROM job_counters WHERE jobs <> 0 ORDER BY 1, 2, 3').all(),
        bytes: db.prepare('SELECT tenant, storage_bytes AS bytes FROM tenant_counters WHERE storage_bytes <> 0 ORDER BY 1').all(),
      },
      recount: {
        jobs: db.prepare('SELECT tenant, kind, status, COUNT(*) AS jobs FROM jobs GROUP BY 1, 2, 3 ORDER BY 1, 2, 3').all(),
        bytes: db.prepare('SELECT tenant, SUM(payload_bytes) AS bytes FROM jobs GROUP BY 1 ORDER BY 1').all(),
      },
    };
  } finally {
    db.close();
  }
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-new-job-counts-'));
  path = join(dir, 'jobs.db');
  store = SqliteStore.open({ path, clock: new ManualClock() });
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

it('counts every job of a batch that ran again one enqueue at a time, and none of the refused one', async () => {
  const enqueues = [
    ...Array.from({ length: 20 }, (_, i) => params(`a${i}`, { kind: i % 2 === 0 ? 'email' : 'sms' })),
    // Refused inside the transaction: the whole batch is rolled back and run again with each enqueue in a savepoint.
    params('orphan', { dependsOn: ['00000000-0000-7000-8000-0000000000ff'] }),
    ...Array.from({ length: 20 }, (_, i) => params(`b${i}`, { tenant: `${TENANT}-other` })),
    params('a3', { kind: 'sms' }), // a replay in the same batch: no new row
  ];
  const outcomes = await Promise.allSettled(enqueues.map((p) => store.jobEnqueue(p)));
  expect(outcomes.filter((o) => o.status === 'rejected')).toHaveLength(1);
  expect(outcomes.at(-1)).toMatchObject({ status: 'fulfilled', value: { kind: 'replayed' } });
  const { counters, recount } = countersAndRecount();
  expect(counters).toEqual(recount);
  expect((recount as { jobs: unknown[] }).jobs).toHaveLength(3);
});

it('counts jobs that start waiting or dead under their own status', async () => {
  const parent = await store.jobEnqueue(params('parent'));
  if (parent.kind !== 'created') throw new Error('the parent was not created');
  const waiting = store.jobEnqueue(params('waits', { dependsOn: [parent.job.id] }));
  const keyed = store.jobEnqueue(params('keyed', { concurrencyKey: 'k' }));
  await Promise.all([waiting, keyed]);
  await store.jobCancel({ scope: { tenant: TENANT }, id: parent.job.id });
  // A child of a cancelled parent is dead at its enqueue (dependency_failed).
  expect(await store.jobEnqueue(params('dead', { dependsOn: [parent.job.id] }))).toMatchObject({ kind: 'created', job: { status: 'dead' } });
  const { counters, recount } = countersAndRecount();
  expect(counters).toEqual(recount);
  expect(recount).toMatchObject({ jobs: expect.arrayContaining([expect.objectContaining({ status: 'dead', jobs: 2 })]) });
});

it('counts an enqueue in the application’s transaction only when that transaction commits', async () => {
  const app = new Database(path);
  try {
    app.transaction(() => store.enqueueOnConnection(app, params('committed')))();
    expect(() =>
      app.transaction(() => {
        store.enqueueOnConnection(app, params('rolled-back', { kind: 'sms' }));
        throw new Error('the application changes its mind');
      })(),
    ).toThrow('the application changes its mind');
  } finally {
    app.close();
  }
  const { counters, recount } = countersAndRecount();
  expect(counters).toEqual(recount);
  expect(recount).toEqual({ jobs: [{ tenant: TENANT, kind: 'email', status: 'queued', jobs: 1 }], bytes: [{ tenant: TENANT, bytes: 7 + 'committed'.length }] });
});
