/**
 * The token operations that keep a lease going, inside the write transaction:
 * renew, checkpoint and the effect mark. decideRenew and decideLiveLeaseWrite
 * decide on the snapshot; the guarded statement repeats their condition.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { decideLiveLeaseWrite, decideRenew } from '../../core/transitions.js';
import type { CheckpointParams, RenewOutcome, RenewParams, TokenOutcome, TokenParams } from '../store.js';
import { countingStorage, expectOne, lockJob } from './locked-rows.js';
import type { Statements } from './queries.js';
import { toSnapshot, type SnapshotRow } from './rows.js';

export function renewLease(st: Statements, params: RenewParams, now: number): RenewOutcome {
  const row = lockJob(st, params.id, params.tenant);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideRenew(toSnapshot(row), params.token, params.leaseMs, now);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  const progress = params.progress === undefined ? null : canonicalJson(params.progress);
  const renew = (): number => st.jobRenew.run({ seq: row.seq, token: params.token, leaseExpiresAt: decision.leaseExpiresAt, progress, now }).changes;
  expectOne(progress === null ? renew() : countingStorage(st, row, renew));
  return { kind: 'renewed', leaseExpiresAt: decision.leaseExpiresAt };
}

export function storeCheckpoint(st: Statements, params: CheckpointParams, now: number): TokenOutcome {
  const state = canonicalJson(params.checkpoint.state ?? null);
  return underLiveLease(st, params, now, (row) =>
    countingStorage(st, row, () => st.jobCheckpoint.run({ seq: row.seq, token: params.token, now, step: params.checkpoint.step, state }).changes),
  );
}

export function markEffectStarted(st: Statements, params: TokenParams, now: number): TokenOutcome {
  return underLiveLease(st, params, now, (row) => st.jobEffectStarted.run({ seq: row.seq, token: params.token, now }).changes);
}

function underLiveLease(st: Statements, params: TokenParams, now: number, apply: (row: SnapshotRow) => number): TokenOutcome {
  const row = lockJob(st, params.id, params.tenant);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideLiveLeaseWrite(toSnapshot(row), params.token, now);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  expectOne(apply(row));
  return { kind: 'ok' };
}
