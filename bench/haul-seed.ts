/**
 * Seeds a database for the long-haul benchmark before any coordinator runs,
 * in this process and through the Store API only (no SQL of its own): the
 * finished history is enqueued in batches (jobEnqueueMany), leased in the
 * same batches (jobLease with a large max) and completed (jobCompleteMany),
 * so every row, attempt and counter is what the coordinator would have
 * written; then the backlog is enqueued and left queued. History alternates
 * kinds A and B; the backlog is all kind B.
 */

import { openStore } from '../src/cli/open-store.js';
import type { EnqueueParams, LeasedJob, Store } from '../src/store/store.js';

export interface SeedPlan {
  readonly tenant: string;
  /** Finished (succeeded) jobs, kinds A and B alternating. */
  readonly history: number;
  /** Queued jobs of kind B. */
  readonly backlog: number;
  /** Printed every this many jobs. */
  readonly onProgress?: (phase: 'history' | 'backlog', done: number, total: number) => void;
}

export interface SeedReport {
  readonly seconds: number;
  readonly jobsPerSecond: number;
}

/** Jobs per transaction: large enough that commits do not dominate, small enough to keep a batch in memory. */
const BATCH = 5_000;
/** Jobs per lease and per completion call within a batch. */
const LEASE_SLICE = 1_000;

export async function seedDatabase(db: string, plan: SeedPlan): Promise<SeedReport> {
  const started = performance.now();
  const store = await openStore(db);
  try {
    for (let from = 0; from < plan.history; from += BATCH) {
      const count = Math.min(BATCH, plan.history - from);
      await seedFinished(store, plan.tenant, from, count);
      plan.onProgress?.('history', from + count, plan.history);
    }
    for (let from = 0; from < plan.backlog; from += BATCH) {
      const count = Math.min(BATCH, plan.backlog - from);
      const enqueued = await store.jobEnqueueMany(Array.from({ length: count }, (_, k) => enqueueParams(plan.tenant, 'B', `backlog-${from + k}`, from + k)));
      if (enqueued.some((o) => o.kind !== 'created')) throw new Error('a backlog job was not created');
      plan.onProgress?.('backlog', from + count, plan.backlog);
    }
  } finally {
    await store.close();
  }
  const seconds = (performance.now() - started) / 1000;
  return { seconds, jobsPerSecond: (plan.history + plan.backlog) / seconds };
}

async function seedFinished(store: Store, tenant: string, from: number, count: number): Promise<void> {
  const enqueued = await store.jobEnqueueMany(
    Array.from({ length: count }, (_, k) => enqueueParams(tenant, (from + k) % 2 === 0 ? 'A' : 'B', `history-${from + k}`, from + k)),
  );
  if (enqueued.some((o) => o.kind !== 'created')) throw new Error('a history job was not created');
  // Nothing else is queued while history is seeded, so leases without a kinds filter take exactly this batch.
  // Several leases of LEASE_SLICE at once: PostgreSQL runs them side by side (SKIP LOCKED), and one lease of
  // thousands is slow there once the prepared statement's generic plan is used (from its sixth run on a connection).
  let leased: LeasedJob[] = [];
  while (leased.length < count) {
    const slices = Math.ceil((count - leased.length) / LEASE_SLICE);
    const parts = await Promise.all(
      Array.from({ length: slices }, (_, s) =>
        store.jobLease({ tenant, workerId: 'seed', leaseMs: 3_600_000, max: Math.min(LEASE_SLICE, count - leased.length - s * LEASE_SLICE) }),
      ),
    );
    const got = parts.flat();
    if (got.length === 0) throw new Error(`leased ${leased.length} of ${count} history jobs`);
    leased = leased.concat(got);
  }
  const completed = await Promise.all(
    Array.from({ length: Math.ceil(leased.length / LEASE_SLICE) }, (_, s) =>
      store.jobCompleteMany(leased.slice(s * LEASE_SLICE, (s + 1) * LEASE_SLICE).map((job) => ({ tenant, id: job.id, token: job.token }))),
    ),
  );
  if (completed.flat().some((o) => o.kind !== 'completed')) throw new Error('a history job was not completed');
}

function enqueueParams(tenant: string, kind: string, idempotencyKey: string, i: number): EnqueueParams {
  const payloadJson = `{"i":${i}}`;
  return {
    tenant,
    owner: 'seed',
    idempotencyKey,
    // Any value that differs per key: no request is ever replayed against a seeded job.
    requestHash: idempotencyKey,
    kind,
    payload: { i },
    payloadJson,
    maxAttempts: 5,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: payloadJson.length,
  };
}
