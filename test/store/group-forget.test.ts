/**
 * The reaper forgets group rows that say nothing a new row would not
 * (core/fair-share.ts isGroupStateForgettable), on both backends: a group
 * with nothing queued or running and a finish tag not ahead of the kind's
 * virtual time goes; one ahead of it (it would start later than a new group),
 * one with a job running and one with a job queued stay. A forgotten group
 * that comes back starts level with the others, as it would have.
 */

import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams, LeasedJob, Store } from '../../src/store/store.js';
import { storeInNewSchema } from '../support/pg-plan.js';
import { plainJob } from '../support/plain-jobs.js';

const TENANT = 't1';
const KIND = 'report';
let n = 0;

function job(group: string): EnqueueParams {
  n += 1;
  return { ...plainJob(TENANT, KIND, n), group, payload: { group } };
}

const groupOf = (leased: LeasedJob): string => (leased.payload as { group: string }).group;

/** a (1 job) and b (5) run to the end, busy's one job keeps running, waiting's one job is delayed; then the reaper. */
async function history(store: Store): Promise<void> {
  const later = (await store.now()) + 3_600_000;
  await store.jobEnqueueMany([job('a'), ...Array.from({ length: 5 }, () => job('b')), job('busy'), { ...job('waiting'), runAfter: later }]);
  const order: string[] = [];
  for (let i = 0; i < 7; i++) {
    const [leased] = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 1, kinds: [KIND] });
    if (leased === undefined) throw new Error('nothing to lease');
    order.push(groupOf(leased));
    if (groupOf(leased) !== 'busy') await store.jobComplete({ tenant: TENANT, id: leased.id, token: leased.token });
  }
  // Level at 0: a, b and busy in key order; then b alone, up to the virtual time 4,000,000 (b's next tag 5,000,000).
  expect(order).toEqual(['a', 'b', 'busy', 'b', 'b', 'b', 'b']);
  await store.jobReapExpired();
}

/** After a forgotten group comes back: it starts level with b's next job (its tag is V, b's is ahead). */
async function comesBack(store: Store): Promise<void> {
  await store.jobEnqueueMany([job('a'), job('b')]);
  const leased = await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 60_000, max: 1, kinds: [KIND] });
  expect(leased.map(groupOf)).toEqual(['a']);
}

describe('idle group rows forgotten by the reaper (sqlite)', () => {
  it('forgets the idle group at or behind the virtual time and keeps the others', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lh-group-forget-'));
    try {
      const path = join(dir, 'jobs.db');
      const store = SqliteStore.open({ path });
      await history(store);
      const db = new Database(path, { readonly: true });
      const rows = db.prepare('SELECT group_key FROM group_states ORDER BY group_key').all() as { group_key: string }[];
      db.close();
      expect(rows.map((row) => row.group_key)).toEqual(['b', 'busy', 'waiting']);
      await comesBack(store);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('idle group rows forgotten by the reaper (postgres)', () => {
  it('forgets the idle group at or behind the virtual time and keeps the others', async () => {
    const { store, client, close } = await storeInNewSchema(url, 'lh_test_group_forget');
    try {
      await history(store);
      const rows = (await client.query<{ group_key: string }>('SELECT group_key FROM group_states ORDER BY group_key')).rows;
      expect(rows.map((row) => row.group_key)).toEqual(['b', 'busy', 'waiting']);
      await comesBack(store);
    } finally {
      await close();
    }
  });
});
