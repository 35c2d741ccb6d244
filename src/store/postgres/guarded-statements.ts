/**
 * The hot token operations, each one guarded statement in its own
 * transaction: renew, complete (with its result), checkpoint and the effect
 * mark. The WHERE clause is the 'go ahead' branch of the decide function;
 * when it matches nothing, the row is read once more and the same decide
 * function names the reason (stale, cancelled, past the deadline, a replay),
 * so answers are those the locked path would give. A completion of a job
 * with children or a concurrency key is left to the locked path.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { isJobId, sha256Hex } from '../../core/ids.js';
import { decideCompletion, decideLiveLeaseWrite, decideRenew } from '../../core/transitions.js';
import type { CheckpointParams, CompleteOutcome, CompleteParams, RenewOutcome, RenewParams, TokenOutcome, TokenParams } from '../store.js';
import type { LockedRow } from './locked-rows.js';
import type { PgDatabase } from './database.js';
import * as Q from './queries.js';
import { toSnapshot } from './rows.js';
import { bind, type NamedQuery } from './sql-fragments.js';

async function first<R extends object>(db: PgDatabase, query: NamedQuery, values: readonly unknown[]): Promise<R | undefined> {
  return (await db.query<R & Record<string, unknown>>(bind(query, values))).rows[0];
}

/** A read without a lock, to say why a guarded statement matched nothing. */
function peek(db: PgDatabase, tenant: string, id: string): Promise<LockedRow | undefined> {
  return first<LockedRow>(db, Q.JOB_PEEK, [id, tenant]);
}

export async function renewLease(db: PgDatabase, params: RenewParams): Promise<RenewOutcome> {
  const hasProgress = params.progress !== undefined;
  const values = [params.id, params.tenant, params.token, params.leaseMs, hasProgress, hasProgress ? canonicalJson(params.progress) : null];
  const renewed = await first<{ lease_expires_at: number }>(db, Q.JOB_RENEW, values);
  if (renewed !== undefined) return { kind: 'renewed', leaseExpiresAt: renewed.lease_expires_at };
  const row = await peek(db, params.tenant, params.id);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideRenew(toSnapshot(row), params.token, params.leaseMs, row.now_ms);
  // A lease never becomes live again, so 'renew' here can only be clock rounding: refuse.
  return { kind: 'rejected', code: decision.kind === 'reject' ? decision.code : 'stale_lease' };
}

/**
 * What a one-statement completion answers: an outcome, or `locked` for a job the statement may not end because
 * it has children or a concurrency key (its end moves other jobs: the caller takes the locked path).
 */
export type FastCompleteOutcome = CompleteOutcome | { readonly kind: 'locked' };

/** decideCompletion on a peeked row, after the guarded statement matched nothing. */
function explainCompletion(row: LockedRow, token: string): FastCompleteOutcome {
  const decision = decideCompletion(toSnapshot(row), token, row.now_ms);
  if (decision.kind === 'replay') return { kind: 'completed', replayed: true };
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  // 'commit' after the guard refused: a job the statement leaves to the locked path, or else clock rounding.
  return row.has_children || row.concurrency_key !== null ? { kind: 'locked' } : { kind: 'rejected', code: 'stale_lease' };
}

/**
 * A batch of completions of distinct jobs whose results fit (the caller checks
 * both): one statement, then one read to explain the items it did not apply.
 */
export async function completeDistinct(db: PgDatabase, params: readonly CompleteParams[]): Promise<readonly FastCompleteOutcome[]> {
  const valid = params.filter((p) => isJobId(p.id)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const done = new Set<string>();
  if (valid.length > 0) {
    const applied = await db.query<{ id: string }>(
      bind(Q.JOB_COMPLETE_MANY, [
        valid.map((p) => p.id),
        valid.map((p) => p.tenant),
        valid.map((p) => p.token),
        valid.map((p) => p.result?.contentType ?? null),
        valid.map((p) => p.result?.body ?? null),
        valid.map((p) => (p.result === undefined ? null : sha256Hex(p.result.body))),
      ]),
    );
    for (const row of applied.rows) done.add(row.id);
  }
  const unexplained = valid.filter((p) => !done.has(p.id)).map((p) => p.id);
  const rows = new Map<string, LockedRow>();
  if (unexplained.length > 0) {
    for (const row of (await db.query<LockedRow>(bind(Q.JOB_PEEK_MANY, [unexplained]))).rows) rows.set(row.id, row);
  }
  return params.map((p): FastCompleteOutcome => {
    if (done.has(p.id)) return { kind: 'completed', replayed: false };
    const row = rows.get(p.id);
    if (row === undefined || row.tenant !== p.tenant) return { kind: 'rejected', code: 'not_found' };
    return explainCompletion(row, p.token);
  });
}

/** A completion whose result fits (the caller checks the size). */
export async function completeOne(db: PgDatabase, params: CompleteParams): Promise<FastCompleteOutcome> {
  const result = params.result;
  const values = [
    params.id,
    params.tenant,
    params.token,
    result?.contentType ?? null,
    result?.body ?? null,
    result === undefined ? null : sha256Hex(result.body),
  ];
  if ((await first<{ id: string }>(db, Q.JOB_COMPLETE_ONE, values)) !== undefined) return { kind: 'completed', replayed: false };
  const row = await peek(db, params.tenant, params.id);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  return explainCompletion(row, params.token);
}

export function storeCheckpoint(db: PgDatabase, params: CheckpointParams): Promise<TokenOutcome> {
  const state = canonicalJson(params.checkpoint.state ?? null);
  return underLiveLease(db, params, Q.JOB_CHECKPOINT, [params.checkpoint.step, state]);
}

export function markEffectStarted(db: PgDatabase, params: TokenParams): Promise<TokenOutcome> {
  return underLiveLease(db, params, Q.JOB_EFFECT_STARTED, []);
}

/** Needs a live lease before the deadline (decideLiveLeaseWrite); when the statement matched nothing, the decision names why. */
async function underLiveLease(db: PgDatabase, params: TokenParams, query: NamedQuery, extra: readonly unknown[]): Promise<TokenOutcome> {
  if ((await first(db, query, [params.id, params.tenant, params.token, ...extra])) !== undefined) return { kind: 'ok' };
  const row = await peek(db, params.tenant, params.id);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideLiveLeaseWrite(toSnapshot(row), params.token, row.now_ms);
  // As for renew, 'apply' after the guard refused can only be clock rounding: refuse.
  return { kind: 'rejected', code: decision.kind === 'reject' ? decision.code : 'stale_lease' };
}
