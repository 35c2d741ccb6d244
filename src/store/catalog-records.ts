/**
 * What operators register beside the jobs, as the store keeps them: API keys
 * (their hashes, never the keys), kinds with their limits and retention, and
 * recurring schedules; with the parameters and outcomes of their store
 * methods (the Store interface in store.ts, which re-exports all of this;
 * a schedule's firing, which enqueues, is there).
 */

import type { BackoffPolicy } from '../core/backoff.js';
import type { GroupRules } from '../core/fair-share.js';
import type { Role } from '../core/states.js';
import type { KindRate } from './flow-limits.js';
import type { KindRetention } from './retention.js';

export interface ApiKeyRecord {
  readonly id: string;
  readonly tenant: string;
  readonly user: string;
  readonly role: Role;
  readonly keyHash: string;
  readonly createdAt: number;
  readonly revokedAt: number | null;
}

export interface ApiKeyInsertParams {
  readonly id: string;
  readonly tenant: string;
  readonly user: string;
  readonly role: Role;
  readonly keyHash: string;
}

export interface KindRecord {
  readonly tenant: string;
  readonly kind: string;
  readonly payloadSchema: unknown;
  readonly maxPayloadBytes: number;
  readonly maxAttempts: number;
  readonly leaseMs: number;
  readonly backoff: BackoffPolicy;
  readonly deadlineMs: number | null;
  readonly maxResultBytes: number;
  /** Largest checkpoint state, in bytes of canonical JSON. */
  readonly maxCheckpointBytes: number;
  /** Retention periods of its finished jobs (src/store/retention.ts). */
  readonly retention: KindRetention;
  /** A paused kind is never leased; its jobs still enqueue and its running jobs finish (flow-limits.ts). */
  readonly paused: boolean;
  /** Live leases of the kind at once across every worker and coordinator of the tenant; null for no limit. */
  readonly maxConcurrent: number | null;
  /** Leases of the kind started per window; null for no limit. */
  readonly rate: KindRate | null;
  /** How the lease shares the kind among its jobs' groups (core/fair-share.ts): per-group limits and weights; null for none. */
  readonly groups: GroupRules | null;
  readonly updatedAt: number;
}

/**
 * Without `retention`, every period is the default; without `maxConcurrent` or `rate`, no limit. A kind is
 * replaced whole, but its paused state is its own (kindSetPaused): registering a kind again keeps it.
 */
export type KindUpsertParams = Omit<KindRecord, 'updatedAt' | 'retention' | 'paused' | 'maxConcurrent' | 'rate' | 'groups'> & {
  readonly retention?: KindRetention;
  readonly maxConcurrent?: number | null;
  readonly rate?: KindRate | null;
  readonly groups?: GroupRules | null;
};

export interface KindPauseParams {
  readonly tenant: string;
  readonly kind: string;
  readonly paused: boolean;
}

// --- recurring schedules (src/store/schedules.ts) ------------------------------

export type ScheduleOverlap = 'skip' | 'allow';

export interface ScheduleRecord {
  readonly tenant: string;
  readonly name: string;
  /** The user who last set it; its jobs are enqueued as this user's. */
  readonly owner: string;
  readonly kind: string;
  readonly payload: unknown;
  readonly cron: string;
  /** A canonical IANA zone name. */
  readonly timezone: string;
  readonly overlap: ScheduleOverlap;
  readonly catchUp: number;
  /** The first occurrence not yet handled; null when the expression names none within eight years. */
  readonly nextAt: number | null;
  /** The last occurrence enqueued; null before the first. */
  readonly lastAt: number | null;
  readonly lastJobId: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface ScheduleUpsertParams {
  readonly tenant: string;
  readonly name: string;
  readonly owner: string;
  readonly kind: string;
  readonly payload: unknown;
  /** canonicalJson(payload). */
  readonly payloadJson: string;
  readonly cron: string;
  readonly timezone: string;
  readonly overlap: ScheduleOverlap;
  readonly catchUp: number;
  readonly nextAt: number | null;
  /** The scheduler's clock, for createdAt/updatedAt. */
  readonly now: number;
  /** A new name is refused when the tenant has this many schedules already (a replacement never is). */
  readonly maxPerTenant: number;
}

export type ScheduleUpsertOutcome = { readonly kind: 'saved'; readonly schedule: ScheduleRecord } | { readonly kind: 'too_many'; readonly count: number };

export interface ScheduleListParams {
  readonly tenant: string;
  readonly limit: number;
  /** The last name of the previous page. */
  readonly after?: string;
}

export interface ScheduleDueParams {
  /** Schedules whose nextAt is at or before this. */
  readonly now: number;
  readonly limit: number;
  /** At most this many of one tenant's schedules in one answer, so one tenant cannot fill a batch. */
  readonly perTenant: number;
}
