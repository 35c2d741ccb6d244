/**
 * Backpressure on enqueue, per tenant: a limit on pending jobs (queued plus
 * running), on the age of the oldest available job, and on stored bytes
 * (payloads plus results). Over a limit, enqueue answers 503 `overloaded`
 * with a Retry-After derived from the measured drain rate; reads, leases and
 * completions never pass through here, so they go on at normal speed.
 *
 * Reading stats costs a few aggregate queries, so a tenant's snapshot is
 * reused for `statsCacheMs`. Jobs and bytes this process accepted since the
 * snapshot are added to it, which keeps the pending limit tight between
 * refreshes (jobs drained meanwhile are not subtracted: the estimate errs
 * towards refusing). The drain rate is the rate at which jobs left the
 * pending set between two snapshots, smoothed.
 */

import { performance } from 'node:perf_hooks';
import { LeaseholdError } from '../core/errors.js';
import type { Store, TenantStats } from '../store/store.js';
import type { BackpressureConfig } from './config.js';

interface TenantState {
  stats: TenantStats;
  takenAt: number;
  acceptedJobs: number;
  acceptedBytes: number;
  /** Jobs per second leaving the pending set; null until two snapshots were taken. */
  drainPerSecond: number | null;
  /** Finished-job count and time the drain rate is measured from. */
  baseline: { readonly finished: number; readonly at: number };
}

export const MAX_RETRY_AFTER_SECONDS = 60;
const MIN_RATE_WINDOW_MS = 200;

function finishedCount(stats: TenantStats): number {
  const c = stats.counts;
  return (c.succeeded ?? 0) + (c.dead ?? 0) + (c.cancelled ?? 0) + (c.unknown ?? 0);
}

function pendingCount(stats: TenantStats): number {
  return (stats.counts.queued ?? 0) + (stats.counts.running ?? 0);
}

/** Seconds until `backlog` jobs drain at `rate`, clamped to [1, 60]; the maximum when nothing drains. */
export function retryAfterSeconds(backlog: number, rate: number | null): number {
  if (rate === null || rate <= 0) return MAX_RETRY_AFTER_SECONDS;
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, Math.ceil(backlog / rate)));
}

export class Backpressure {
  private readonly tenants = new Map<string, TenantState>();
  private readonly loading = new Map<string, Promise<TenantState>>();
  readonly enabled: boolean;

  constructor(
    private readonly store: Store,
    private readonly config: BackpressureConfig,
  ) {
    this.enabled = config.maxPendingJobs !== null || config.maxOldestAvailableAgeMs !== null || config.maxStorageBytes !== null;
  }

  /** Throws 503 overloaded when accepting `jobs` more jobs of `bytes` payload bytes would exceed a limit. */
  async check(tenant: string, jobs: number, bytes: number): Promise<void> {
    if (!this.enabled) return;
    this.evaluate(await this.current(tenant), jobs, bytes);
  }

  /**
   * The same check, synchronously, against the last snapshot (for an enqueue inside an application's
   * SQLite transaction, which cannot wait): a stale snapshot is refreshed in the background, and with
   * none yet the enqueue passes while the first is taken.
   */
  checkSnapshot(tenant: string, jobs: number, bytes: number): void {
    if (!this.enabled) return;
    const state = this.tenants.get(tenant);
    if (state === undefined || performance.now() - state.takenAt >= this.config.statsCacheMs) void this.current(tenant).catch(() => undefined);
    if (state !== undefined) this.evaluate(state, jobs, bytes);
  }

  private evaluate(state: TenantState, jobs: number, bytes: number): void {
    const { maxPendingJobs, maxOldestAvailableAgeMs, maxStorageBytes } = this.config;
    const pending = pendingCount(state.stats) + state.acceptedJobs;
    if (maxPendingJobs !== null && pending + jobs > maxPendingJobs) {
      throw overloaded(
        `the tenant has ${pending} pending jobs; the limit is ${maxPendingJobs}`,
        retryAfterSeconds(pending + jobs - maxPendingJobs, state.drainPerSecond),
      );
    }
    const oldest = state.stats.oldestAvailableAgeMs;
    if (maxOldestAvailableAgeMs !== null && oldest !== null && oldest > maxOldestAvailableAgeMs) {
      throw overloaded(
        `the tenant's oldest available job waited ${oldest} ms; the limit is ${maxOldestAvailableAgeMs} ms`,
        retryAfterSeconds(state.stats.counts.queued ?? 0, state.drainPerSecond),
      );
    }
    const stored = state.stats.storageBytes + state.acceptedBytes;
    if (maxStorageBytes !== null && stored + bytes > maxStorageBytes) {
      // Stored bytes only shrink when jobs are deleted; a client can only wait for an operator.
      throw overloaded(`the tenant stores ${stored} bytes; the budget is ${maxStorageBytes}`, MAX_RETRY_AFTER_SECONDS);
    }
  }

  /** Counts jobs this process accepted, until the next snapshot includes them. */
  recordAccepted(tenant: string, jobs: number, bytes: number): void {
    if (!this.enabled) return;
    const state = this.tenants.get(tenant);
    if (state === undefined) return;
    state.acceptedJobs += jobs;
    state.acceptedBytes += bytes;
  }

  private async current(tenant: string): Promise<TenantState> {
    const state = this.tenants.get(tenant);
    if (state !== undefined && performance.now() - state.takenAt < this.config.statsCacheMs) return state;
    const pending = this.loading.get(tenant);
    if (pending !== undefined) return pending;
    const load = this.refresh(tenant, state).finally(() => this.loading.delete(tenant));
    this.loading.set(tenant, load);
    return load;
  }

  private async refresh(tenant: string, previous: TenantState | undefined): Promise<TenantState> {
    const stats = await this.store.stats({ tenant });
    const takenAt = performance.now();
    const finished = finishedCount(stats);
    let drain = previous?.drainPerSecond ?? null;
    let baseline = previous?.baseline ?? { finished, at: takenAt };
    // A rate measured over a very short window is noise: keep the baseline until the window is long enough.
    if (takenAt - baseline.at >= MIN_RATE_WINDOW_MS) {
      const rate = ((finished - baseline.finished) * 1000) / (takenAt - baseline.at);
      drain = drain === null ? rate : 0.5 * drain + 0.5 * rate;
      baseline = { finished, at: takenAt };
    }
    const next: TenantState = { stats, takenAt, acceptedJobs: 0, acceptedBytes: 0, drainPerSecond: drain, baseline };
    this.tenants.set(tenant, next);
    return next;
  }
}

function overloaded(message: string, retryAfter: number): LeaseholdError {
  return new LeaseholdError('overloaded', message, { retryAfterSeconds: retryAfter });
}
