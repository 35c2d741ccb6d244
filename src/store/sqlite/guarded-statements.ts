/**
 * The token operations that keep a lease going, inside the write transaction:
 * renew, checkpoint and the effect mark. decideRenew and decideLiveLeaseWrite
 * decide on the snapshot; the guarded statement repeats their condition. A
 * renew and the effect mark write the lease row; progress and a checkpoint
 * belong to the job (they outlive the attempt) and are written to its row
 * under the same guard, a live lease row with the token.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { decideLiveLeaseWrite, decideRenew } from '../../core/transitions.js';
import type { CheckpointParams, RenewOutcome, RenewParams, TokenOutcome, TokenParams } from '../store.js';
import type { CounterMoves } from './counter-moves.js';
import { countingStorage, expectOne, lockJob } from './locked-rows.js';
import type { Statements } from './queries.js';
import { toSnapshot, type SnapshotRow } from './rows.js';

export function renewLease(st: Statements, moves: CounterMoves, params: RenewParams, now: number): RenewOutcome {
  const row = lockJob(st, params.id, params.tenant);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideRenew(toSnapshot(row), params.token, params.leaseMs, now);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  if (params.progress !== undefined) {
    const progress = canonicalJson(params.progress);
    expectOne(countingStorage(st, moves, row, () => st.jobProgress.run({ seq: row.seq, token: params.token, progress, now }).changes));
  }
  expectOne(st.leaseRenew.run({ seq: row.seq, token: params.token, leaseExpiresAt: decision.leaseExpiresAt, now }).changes);
  return { kind: 'renewed', leaseExpiresAt: decision.leaseExpiresAt };
}

export function storeCheckpoint(st: Statements, moves: CounterMoves, params: CheckpointParams, now: number): TokenOutcome {
  const state = canonicalJson(params.checkpoint.state ?? null);
  return underLiveLease(st, params, now, (row) =>
    countingStorage(st, moves, row, () => st.jobCheckpoint.run({ seq: row.seq, token: params.token, now, step: params.checkpoint.step, state }).changes),
  );
}

export function markEffectStarted(st: Statements, params: TokenParams, now: number): TokenOutcome {
  return underLiveLease(st, params, now, (row) => st.leaseEffectStarted.run({ seq: row.seq, token: params.token, now }).changes);
}

function underLiveLease(st: Statements, params: TokenParams, now: number, apply: (row: SnapshotRow) => number): TokenOutcome {
  const row = lockJob(st, params.id, params.tenant);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideLiveLeaseWrite(toSnapshot(row), params.token, now);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  expectOne(apply(row));
  return { kind: 'ok' };
}
