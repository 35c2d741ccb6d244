/**
 * The lease for SQLite, inside the write transaction: the statement for the
 * lease's kinds filter walks the available index (lease-statements.ts); when
 * it leases nothing, a kind it may take can be paused or limited, and the
 * restricted path gives each candidate kind what its limits allow
 * (flow-limits.ts) and walks the kinds with those caps. The write lock is held
 * throughout, so no other process leases in between. Each leased job gets its
 * attempt row in the same transaction.
 */

import { inReach, kindsFilter, leaseCaps, MAX_QUEUED_KINDS, windowsMoved } from '../flow-limits.js';
import { kindFlowState, type KindFlowColumns } from '../row-records.js';
import type { LeasedJob, LeaseParams } from '../store.js';
import type { LeaseStatements } from './lease-statements.js';
import type { Statements } from './queries.js';
import { toLeasedJob, type LeasedRow } from './rows.js';

interface LeaseBindings {
  readonly tenant: string;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly max: number;
  readonly now: number;
}

/** @k0, @k1, … for the lease statements of a kinds filter. */
function kindBindings(distinctKinds: readonly string[]): Record<string, string> {
  return Object.fromEntries(distinctKinds.map((kind, i) => [`k${i}`, kind]));
}

export function leaseInTx(st: Statements, leases: LeaseStatements, params: LeaseParams, now: number): LeasedJob[] {
  // Duplicates are dropped, so no kind is walked twice.
  const kinds = kindsFilter(params.kinds);
  const bindings: LeaseBindings = { tenant: params.tenant, workerId: params.workerId, leaseMs: params.leaseMs, max: params.max, now };
  const lease = leases.lease(kinds === null ? 0 : kinds.length, params.max);
  let rows = (kinds === null ? lease.all(bindings) : lease.all({ ...bindings, ...kindBindings(kinds) })) as LeasedRow[];
  // Nothing leased: either nothing is available, or a kind it may take is paused or limited (the statement's guard).
  if (rows.length === 0) rows = leaseRestricted(st, leases, bindings, kinds);
  rows.sort((a, b) => b.priority - a.priority || a.run_after - b.run_after || a.seq - b.seq);
  for (const row of rows) st.attemptInsert.run(row.seq, row.epoch, row.attempts, params.workerId, now);
  return rows.map(toLeasedJob);
}

/** The lease of a tenant with restricted kinds: each candidate kind capped by its limits, the rate windows moved by what was leased. */
function leaseRestricted(st: Statements, leases: LeaseStatements, bindings: LeaseBindings, kinds: readonly string[] | null): LeasedRow[] {
  const states = (st.kindFlowState.all({ tenant: bindings.tenant }) as KindFlowColumns[]).map(kindFlowState);
  const restricted = new Map(inReach(states, kinds).map((s) => [s.kind, s]));
  if (restricted.size === 0) return [];
  const candidates = kinds ?? (st.jobQueuedKinds.all({ tenant: bindings.tenant, limit: MAX_QUEUED_KINDS }) as { kind: string }[]).map((r) => r.kind);
  const caps = leaseCaps(candidates, restricted, bindings.max, bindings.now);
  if (caps.length === 0) return [];
  const capBindings = Object.fromEntries(
    caps.flatMap(({ kind, cap }, i) => [
      [`k${i}`, kind],
      [`m${i}`, cap],
    ]),
  );
  const rows = leases.cappedLease(caps.length).all({ ...bindings, ...capBindings }) as LeasedRow[];
  for (const window of windowsMoved(rows, restricted, bindings.now)) st.kindWindowSet.run({ tenant: bindings.tenant, ...window });
  return rows;
}
