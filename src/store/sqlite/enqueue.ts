/**
 * Enqueue for SQLite, inside the write transaction: an idempotency key that
 * exists answers as a replay (same request hash) or a conflict; a new one
 * inserts the job and counts its payload in the tenant's storage.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { crashPoint } from '../../core/fault-points.js';
import { newJobId } from '../../core/ids.js';
import type { EnqueueOutcome, EnqueueParams, JobRecord } from '../store.js';
import { reloadJobById } from './locked-rows.js';
import type { Statements } from './queries.js';
import { lazyStatements } from './database.js';
import type { Database as Db } from 'better-sqlite3';

export function enqueueInTx(st: Statements, params: EnqueueParams, now: number): EnqueueOutcome {
  const existing = st.jobByIdempotencyKey.get(params.tenant, params.owner, params.idempotencyKey) as
    | { id: string; request_hash: string }
    | undefined;
  if (existing !== undefined) {
    if (existing.request_hash !== params.requestHash) return { kind: 'conflict', existingJobId: existing.id };
    return { kind: 'replayed', job: reloadJobById(st, existing.id) };
  }
  const id = newJobId(now);
  const runAfter = params.runAfter ?? now;
  const deadlineAt = params.deadlineMs === null ? null : now + params.deadlineMs;
  st.jobInsert.run({
    id,
    tenant: params.tenant,
    owner: params.owner,
    idempotencyKey: params.idempotencyKey,
    requestHash: params.requestHash,
    kind: params.kind,
    payload: params.payloadJson ?? canonicalJson(params.payload ?? null),
    payloadBytes: params.payloadBytes,
    maxAttempts: params.maxAttempts,
    priority: params.priority,
    runAfter,
    deadlineMs: params.deadlineMs,
    deadlineAt,
    now,
  });
  st.counterAddStorage.run(params.tenant, params.payloadBytes);
  crashPoint('enqueue.before-commit');
  // Built from what was inserted rather than read back: enqueue is the hottest write.
  const job: JobRecord = {
    id,
    tenant: params.tenant,
    owner: params.owner,
    kind: params.kind,
    payload: params.payload ?? null,
    status: 'queued',
    attempts: 0,
    maxAttempts: params.maxAttempts,
    priority: params.priority,
    runAfter,
    deadlineAt,
    leaseOwner: null,
    leaseExpiresAt: null,
    epoch: 0,
    createdAt: now,
    startedAt: null,
    finishedAt: null,
    lastError: null,
    progress: null,
    cancelRequested: false,
    effectStartedAt: null,
    checkpoint: null,
    result: null,
  };
  return { kind: 'created', job };
}

const onConnections = new WeakMap<Db, Statements>();

/**
 * Enqueue on an application's own connection to the store's file, inside the transaction it has open
 * (a library Queue's enqueueInTransaction): the job and its reserved key exist only if that transaction
 * commits. Synchronous, as better-sqlite3 transactions are.
 */
export function enqueueOnConnection(db: Db, params: EnqueueParams, now: number): EnqueueOutcome {
  if (!db.inTransaction) throw new TypeError('enqueueInTransaction must be called inside the application\u2019s transaction (db.transaction(() => …))');
  let statements = onConnections.get(db);
  if (statements === undefined) {
    statements = lazyStatements(db);
    onConnections.set(db, statements);
  }
  return enqueueInTx(statements, params, now);
}
