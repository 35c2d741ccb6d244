/**
 * The queue's state as GET /metrics reports it: jobs by tenant, kind and
 * status, available and running counts, the oldest available age, stored
 * bytes, lease expiries and the database size. Everything the store is asked
 * for a scrape goes through readQueueGauges, so that moving these figures to
 * counter rows the store keeps (instead of TenantStats, which counts a
 * tenant's jobs) changes this file and nothing else.
 *
 * Per group (docs/FAIRNESS.md), the tenant's GROUP_SERIES_PER_TENANT groups
 * with the most jobs waiting or running, and the rest summed under kind and
 * group `*`, so that a scrape's series stay bounded however many groups wait.
 *
 * TenantStats has no per-kind counts, so the kind label is `*` (all kinds);
 * and its `queued` count includes delayed jobs not yet due, so
 * leasehold_jobs_available is queued jobs, due or not.
 */

import { JOB_STATUSES, type JobStatus } from '../core/states.js';
import type { GroupStats } from '../store/group-lease.js';
import type { Store } from '../store/store.js';

/** The kind label of a count over all of a tenant's kinds. */
export const ALL_KINDS = '*';

export interface TenantGauges {
  readonly tenant: string;
  readonly jobs: readonly { readonly kind: string; readonly status: JobStatus; readonly count: number }[];
  readonly available: number;
  readonly running: number;
  /** Seconds; null when nothing is available. */
  readonly oldestAvailableAgeSeconds: number | null;
  readonly storageBytes: number;
  /** Expired leases applied since the tenant's first job (a counter the store keeps). */
  readonly leaseExpirations: number;
  readonly groups: GroupStats;
}

/** Groups of one tenant GET /metrics shows one by one; the others are summed. */
export const GROUP_SERIES_PER_TENANT = 20;

export interface QueueGauges {
  readonly tenants: readonly TenantGauges[];
  readonly databaseBytes: number;
}

/** The gauges of `tenants`, read one tenant after another so that a scrape never holds more than one read. */
export async function readQueueGauges(store: Store, tenants: readonly string[]): Promise<QueueGauges> {
  const rows: TenantGauges[] = [];
  for (const tenant of tenants) {
    const stats = await store.stats({ tenant });
    rows.push({
      tenant,
      jobs: JOB_STATUSES.map((status) => ({ kind: ALL_KINDS, status, count: stats.counts[status] ?? 0 })),
      available: stats.counts.queued ?? 0,
      running: stats.counts.running ?? 0,
      oldestAvailableAgeSeconds: stats.oldestAvailableAgeMs === null ? null : stats.oldestAvailableAgeMs / 1000,
      storageBytes: stats.storageBytes,
      leaseExpirations: stats.leaseExpirations,
      groups: await store.groupStats({ tenant, limit: GROUP_SERIES_PER_TENANT }),
    });
  }
  return { tenants: rows, databaseBytes: await store.databaseSize() };
}
