/**
 * The lease for SQLite, inside the write transaction. The lease statement
 * (lease-statements.ts) walks each kind's ready rows in lease order and
 * inserts a lease row for each job it takes, its epoch bumped; the taken
 * ready rows are deleted next by one statement for the batch, and the jobs'
 * ids and payloads read by one more: the job rows are not written. A lease
 * without a kinds filter names the tenant's queued kinds first (a skip scan
 * of job_ready). When the statement leases nothing, a kind it may take can be
 * paused or limited or have groups, and the restricted path gives each
 * candidate kind what its limits allow (flow-limits.ts) and walks the kinds
 * with those caps, a kind with groups by its fair plan (group-lease.ts). The
 * write lock is held throughout, so no other process leases in between. The
 * counter rows move once per commit (counter-moves.ts).
 */

import { inReach, kindsFilter, leaseCaps, MAX_QUEUED_KINDS, windowsMoved } from '../flow-limits.js';
import { kindFlowState, type KindFlowColumns } from '../row-records.js';
import type { LeasedJob, LeaseParams } from '../store.js';
import type { CounterMoves } from './counter-moves.js';
import { groupedKinds, leaseWithGroups } from './group-lease.js';
import type { LeaseBindings, LeaseStatements } from './lease-statements.js';
import type { Statements } from './queries.js';
import { toLeasedJob, type LeasedJobRow, type LeaseRow } from './rows.js';

/** Most kinds one lease statement walks; a tenant with more queued kinds is leased by the tenant-wide walk. */
export const KINDS_PER_LEASE = 64;

/** @k0, @k1, … for the lease statements of a kinds filter. */
function kindBindings(distinctKinds: readonly string[]): Record<string, string> {
  return Object.fromEntries(distinctKinds.map((kind, i) => [`k${i}`, kind]));
}

function queuedKinds(st: Statements, tenant: string, limit: number): string[] {
  return (st.jobQueuedKinds.all({ tenant, limit }) as { kind: string }[]).map((r) => r.kind);
}

export function leaseInTx(st: Statements, leases: LeaseStatements, moves: CounterMoves, params: LeaseParams, now: number): LeasedJob[] {
  // Duplicates are dropped, so no kind is walked twice.
  const filter = kindsFilter(params.kinds);
  const bindings: LeaseBindings = { tenant: params.tenant, workerId: params.workerId, leaseMs: params.leaseMs, max: params.max, now };
  const kinds = filter ?? queuedKinds(st, params.tenant, KINDS_PER_LEASE + 1);
  if (kinds.length === 0) return [];
  let rows: LeaseRow[];
  if (kinds.length > KINDS_PER_LEASE) rows = leases.lease(0, params.max).all(bindings) as LeaseRow[];
  else rows = leases.lease(kinds.length, params.max).all({ ...bindings, ...kindBindings(kinds) }) as LeaseRow[];
  // Nothing leased: either nothing is available, or a kind it may take is paused or limited (the statement's guard).
  if (rows.length === 0) rows = leaseRestricted(st, leases, moves, bindings, filter);
  if (rows.length === 0) return [];
  return taken(st, moves, params.tenant, rows, now);
}

/** The ready rows of the leased jobs go, and the jobs' ids and payloads are read: one statement each for the batch. */
function taken(st: Statements, moves: CounterMoves, tenant: string, rows: LeaseRow[], now: number): LeasedJob[] {
  // A plain lease's ready rows have group_key ''; a fair lease's row names its group (group-lease.ts).
  const keys = JSON.stringify(rows.map((row) => [row.kind, row.group_key ?? '', row.priority, row.run_after, row.seq]));
  const removed = st.readyDeleteMany.run({ tenant, rows: keys }).changes;
  if (removed !== rows.length) throw new Error(`the lease took ${rows.length} jobs but removed ${removed} ready rows`);
  const jobs = new Map((st.jobLeasedMany.all({ seqs: JSON.stringify(rows.map((row) => row.seq)) }) as LeasedJobRow[]).map((job) => [job.seq, job]));
  rows.sort((a, b) => b.priority - a.priority || a.run_after - b.run_after || a.seq - b.seq);
  return rows.map((row) => {
    const job = jobs.get(row.seq);
    if (job === undefined) throw new Error(`a leased job (${row.seq}) has no row`);
    const before = { tenant, kind: row.kind, createdAt: job.created_at, startedAt: job.started_at, finishedAt: job.finished_at };
    moves.moved({ ...before, status: 'queued' }, { ...before, status: 'running', startedAt: job.started_at ?? now });
    return toLeasedJob(row, job);
  });
}

/**
 * The lease of a tenant with restricted kinds or kinds with groups: each candidate kind capped by its limits, the
 * kinds with groups leased by their fair plans (group-lease.ts), the rate windows moved by what was leased.
 */
function leaseRestricted(st: Statements, leases: LeaseStatements, moves: CounterMoves, bindings: LeaseBindings, kinds: readonly string[] | null): LeaseRow[] {
  // The running counts as stored, plus what this transaction has leased or ended and not yet written.
  const states = (st.kindFlowState.all({ tenant: bindings.tenant }) as KindFlowColumns[])
    .map(kindFlowState)
    .map((state) => ({ ...state, running: state.running + moves.pending(bindings.tenant, state.kind, 'running') }));
  const restricted = new Map(inReach(states, kinds).map((s) => [s.kind, s]));
  const grouped = groupedKinds(st, bindings.tenant, kinds);
  if (restricted.size === 0 && grouped.size === 0) return [];
  const candidates = kinds ?? queuedKinds(st, bindings.tenant, MAX_QUEUED_KINDS);
  const caps = leaseCaps(candidates, restricted, bindings.max, bindings.now);
  if (caps.length === 0) return [];
  if (caps.some((cap) => grouped.has(cap.kind))) {
    const rows = leaseWithGroups(st, bindings, caps, grouped);
    for (const window of windowsMoved(rows, restricted, bindings.now)) st.kindWindowSet.run({ tenant: bindings.tenant, ...window });
    return rows;
  }
  const capBindings = Object.fromEntries(
    caps.flatMap(({ kind, cap }, i) => [
      [`k${i}`, kind],
      [`m${i}`, cap],
    ]),
  );
  const rows = leases.cappedLease(caps.length).all({ ...bindings, ...capBindings }) as LeaseRow[];
  for (const window of windowsMoved(rows, restricted, bindings.now)) st.kindWindowSet.run({ tenant: bindings.tenant, ...window });
  return rows;
}
