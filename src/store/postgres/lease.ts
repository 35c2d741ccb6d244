/**
 * The lease for PostgreSQL. The common lease is one statement
 * (JOB_LEASE_KINDS or JOB_LEASE_ANY_KIND) that also answers whether a kind it
 * may take is paused or limited or has groups; then it leased nothing, and
 * the restricted path runs in one transaction: lock the tenant's kinds rows
 * (KIND_FLOW_LOCK), read their counts after the lock (KIND_FLOW_STATE), give
 * each candidate kind what its limits allow (flow-limits.ts), walk the kinds
 * with those caps (a kind with groups by its fair plan, group-lease.ts) and
 * move the rate windows by what was leased.
 *
 * Each lease also answers whether expired leases or passed deadlines are due
 * in any tenant (the statement's `due`, the restricted path's DUE_PROBE): the
 * store settles them and leases again for the room left.
 *
 * A lease filter (tenant and kinds) that last found a restricted kind in reach
 * goes to the restricted path at once, saving the round trip of a statement
 * that would only say so; the restricted path forgets the filter when it finds
 * no restricted kind any more, so a lifted limit costs one restricted lease,
 * never a wrong one.
 */

import { newLeaseToken } from '../../core/ids.js';
import { inReach, kindsFilter, leaseCaps, MAX_QUEUED_KINDS, windowsMoved } from '../flow-limits.js';
import { kindFlowState, type KindFlowColumns } from '../row-records.js';
import type { LeasedJob, LeaseParams } from '../store.js';
import type { PgDatabase, TxClient } from './database.js';
import { groupedKinds, leaseWithGroups } from './group-lease.js';
import * as Q from './queries.js';
import { toLeasedJob, type JobRow } from './rows.js';
import { bind } from './sql-fragments.js';

/** What one lease took, and whether expired leases or passed deadlines are due for the reaper. */
export interface LeaseAnswer {
  readonly jobs: readonly LeasedJob[];
  readonly due: boolean;
  /**
   * When it took fewer than `max` on the common path: the next due time of what is left (NextDue's runAfter and
   * the database's clock), read by the same statement; absent otherwise (a full lease, the restricted path).
   */
  readonly left?: { readonly runAfter: number | null; readonly now: number };
}

/** Lease filters remembered as having a restricted kind in reach; forgotten all at once beyond this. */
const MAX_REMEMBERED_REACHES = 10_000;

export class Leases {
  private readonly restrictedReach = new Set<string>();

  constructor(private readonly db: PgDatabase) {}

  async lease(params: LeaseParams): Promise<LeaseAnswer> {
    const tokens = Array.from({ length: params.max }, () => newLeaseToken());
    const base = [params.tenant, params.max, tokens, params.workerId, params.leaseMs];
    const kinds = kindsFilter(params.kinds);
    const reach = `${params.tenant}\u0000${kinds === null ? '*' : [...kinds].sort().join('\u0000')}`;
    if (this.restrictedReach.has(reach)) return this.db.transaction((tx) => this.leaseRestricted(tx, reach, params.tenant, base, params.max, kinds));
    const query = kinds === null ? bind(Q.JOB_LEASE_ANY_KIND, base) : bind(Q.JOB_LEASE_KINDS, [...base, kinds]);
    const rows = (await this.db.query<JobRow & { held: boolean; due: boolean; next_due_ms: number | null; now_ms: number }>(query)).rows;
    // The statement always answers a row saying whether a kind it may take is restricted (then it leased nothing).
    const first = rows[0];
    if (first?.held === true) return this.db.transaction((tx) => this.leaseRestricted(tx, reach, params.tenant, base, params.max, kinds));
    const jobs = rows.filter((row) => row.id !== null).map(toLeasedJob);
    const due = first?.due === true;
    return first === undefined || jobs.length >= params.max ? { jobs, due } : { jobs, due, left: { runAfter: first.next_due_ms, now: first.now_ms } };
  }

  private noteReach(reach: string, restricted: boolean): void {
    if (!restricted) {
      this.restrictedReach.delete(reach);
      return;
    }
    if (this.restrictedReach.size >= MAX_REMEMBERED_REACHES) this.restrictedReach.clear();
    this.restrictedReach.add(reach);
  }

  private async leaseRestricted(
    tx: TxClient,
    reach: string,
    tenant: string,
    base: readonly unknown[],
    max: number,
    kinds: readonly string[] | null,
  ): Promise<LeaseAnswer> {
    const due = (await tx.query<{ due: boolean }>(bind(Q.DUE_PROBE, []))).rows[0]?.due === true;
    await tx.query(bind(Q.KIND_FLOW_LOCK, [tenant, kinds]));
    const stateRows = (await tx.query<KindFlowColumns & { now_ms: number }>(bind(Q.KIND_FLOW_STATE, [tenant]))).rows;
    // A tenant without restricted kinds reads no flow row: the clock then comes from its own query (a fair lease needs it).
    const now = stateRows[0]?.now_ms ?? (await tx.query<{ now_ms: number }>(bind(Q.NOW, []))).rows[0]?.now_ms ?? 0;
    const restricted = new Map(inReach(stateRows.map(kindFlowState), kinds).map((state) => [state.kind, state]));
    const grouped = await groupedKinds(tx, tenant, kinds);
    this.noteReach(reach, restricted.size > 0 || grouped.size > 0);
    const candidates = kinds ?? (await tx.query<{ kind: string }>(bind(Q.JOB_QUEUED_KINDS, [tenant, MAX_QUEUED_KINDS]))).rows.map((row) => row.kind);
    const caps = leaseCaps(candidates, restricted, max, now);
    if (caps.length === 0) return { jobs: [], due };
    if (caps.some((cap) => grouped.has(cap.kind))) {
      const rows = await leaseWithGroups(tx, base, tenant, max, caps, grouped, now);
      for (const window of windowsMoved(rows, restricted, now)) await tx.query(bind(Q.KIND_WINDOW_SET, [tenant, window.kind, window.start, window.count]));
      return { jobs: rows.map(toLeasedJob), due };
    }
    const capped = caps.map((c) => c.kind);
    const rows = (await tx.query<JobRow>(bind(Q.JOB_LEASE_CAPPED, [...base, capped, caps.map((c) => c.cap)]))).rows;
    for (const window of windowsMoved(rows, restricted, now)) await tx.query(bind(Q.KIND_WINDOW_SET, [tenant, window.kind, window.start, window.count]));
    return { jobs: rows.map(toLeasedJob), due };
  }
}
