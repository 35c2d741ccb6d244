/**
 * Enqueue for SQLite, inside the write transaction: an idempotency key that
 * exists answers as a replay (same request hash) or a conflict; a new one
 * inserts the job and counts its payload in the tenant's storage. A job with
 * dependsOn, a concurrencyKey, a dedupe or a unique key takes enqueueFlowJob:
 * its keys may fold it into an existing job or refuse it (enqueue-keys.ts);
 * its parents are looked up in the enqueuer's scope (one it cannot see is
 * refused as unknown), and decideStart (core/dependencies.ts) says whether it
 * starts queued, waiting or dead with dependency_failed.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { hasEnqueueKeys } from '../../core/dedupe.js';
import { decideParentEnd, decideStart } from '../../core/dependencies.js';
import { LeaseholdError } from '../../core/errors.js';
import { crashPoint } from '../../core/fault-points.js';
import { enqueuedGroupKey } from '../group-lease.js';
import { hasFlow } from '../enqueue-paths.js';
import { newJobId } from '../../core/ids.js';
import type { JobStatus } from '../../core/states.js';
import { DEPENDENCY_FAILED, lastErrorColumns } from '../lease-endings.js';
import type { EnqueueOutcome, EnqueueParams, HandoffLease, JobRecord, LeasedJob } from '../store.js';
import { keyFacts } from './dependencies.js';
import { keyColumns, resolveEnqueueKeys } from './enqueue-keys.js';
import { reloadJobById } from './locked-rows.js';
import { insertReady } from './group-lease.js';
import type { Statements } from './queries.js';
import { toLeasedJob, type LeaseRow } from './rows.js';
import { lazyStatements } from './database.js';
import { CounterMoves } from './counter-moves.js';
import type { Database as Db } from 'better-sqlite3';

/** `counts` gathers what the new job adds to the counter rows; the transaction's owner applies it before COMMIT. */
export function enqueueInTx(st: Statements, counts: CounterMoves, params: EnqueueParams, now: number): EnqueueOutcome {
  const existing = existingKey(st, params);
  if (existing !== undefined) return existing;
  if (hasFlow(params)) return enqueueFlowJob(st, counts, params, now);
  return insertPlain(st, counts, params, now, null).outcome;
}

/**
 * enqueueInTx of a plain job (mayHandOff, store/enqueue-paths.ts) whose lease goes to `lease` at once, in place of its
 * ready row, unless its kind is paused, limited or has groups (jobInsertLeased's guard): then it is queued.
 */
export function enqueueLeasedInTx(
  st: Statements,
  counts: CounterMoves,
  params: EnqueueParams,
  lease: HandoffLease,
  now: number,
): { readonly outcome: EnqueueOutcome; readonly leased: LeasedJob | null } {
  const existing = existingKey(st, params);
  return existing === undefined ? insertPlain(st, counts, params, now, lease) : { outcome: existing, leased: null };
}

/** The answer for an idempotency key that exists (a replay or a conflict); undefined for a new key. */
function existingKey(st: Statements, params: EnqueueParams): EnqueueOutcome | undefined {
  const existing = st.jobByIdempotencyKey.get(params.tenant, params.owner, params.idempotencyKey) as { id: string; request_hash: string } | undefined;
  if (existing === undefined) return undefined;
  if (existing.request_hash !== params.requestHash) return { kind: 'conflict', existingJobId: existing.id };
  return { kind: 'replayed', job: reloadJobById(st, existing.id) };
}

/** A job without flow: queued (its ready row), or leased to `lease` when one is given and its kind is not held. */
function insertPlain(
  st: Statements,
  counts: CounterMoves,
  params: EnqueueParams,
  now: number,
  lease: HandoffLease | null,
): { readonly outcome: EnqueueOutcome; readonly leased: LeasedJob | null } {
  const row = newJobRow(params, now);
  const { id, runAfter, deadlineAt } = row;
  const seq = Number(st.jobInsert.run(row).lastInsertRowid);
  const leaseRow =
    lease === null
      ? undefined
      : (st.jobInsertLeased.get({ ...row, seq, workerId: lease.workerId, leaseMs: lease.leaseMs, tenant: params.tenant }) as LeaseRow | undefined);
  if (leaseRow === undefined) readyRow(st, row, seq);
  counts.created(params.tenant, params.kind, 'queued', params.payloadBytes, now);
  const counted = { tenant: params.tenant, kind: params.kind, createdAt: now, startedAt: null, finishedAt: null };
  if (leaseRow !== undefined) counts.moved({ ...counted, status: 'queued' }, { ...counted, status: 'running', startedAt: now });
  crashPoint('enqueue.before-commit');
  // Built from what was inserted rather than read back: enqueue is the hottest write.
  const outcome: EnqueueOutcome = { kind: 'created', job: insertedJob(id, params, { status: 'queued', runAfter, deadlineAt, now, dependsOn: [] }) };
  const job = { seq, id, group_key: '', payload: row.payload, max_attempts: params.maxAttempts, checkpoint_step: null, checkpoint_state: null };
  return { outcome, leased: leaseRow === undefined ? null : toLeasedJob(leaseRow, { ...job, created_at: now, started_at: null, finished_at: null }) };
}

/** The bindings of a new job's row that every insert shares: its id, the request's columns, and its times. */
function newJobRow(params: EnqueueParams, now: number) {
  return {
    id: newJobId(now),
    tenant: params.tenant,
    owner: params.owner,
    idempotencyKey: params.idempotencyKey,
    requestHash: params.requestHash,
    kind: params.kind,
    payload: params.payloadJson ?? canonicalJson(params.payload ?? null),
    payloadBytes: params.payloadBytes,
    maxAttempts: params.maxAttempts,
    priority: params.priority,
    runAfter: params.runAfter ?? now,
    deadlineMs: params.deadlineMs,
    deadlineAt: params.deadlineMs === null ? null : now + params.deadlineMs,
    groupKey: enqueuedGroupKey(params),
    now,
  };
}

/** A new queued job's ready row (migration 14): what the lease reads, in lease order; a grouped job counts in its group. */
function readyRow(st: Statements, row: ReturnType<typeof newJobRow>, seq: number): void {
  insertReady(
    st,
    {
      tenant: row.tenant,
      kind: row.kind,
      groupKey: row.groupKey,
      priority: row.priority,
      runAfter: row.runAfter,
      seq,
      deadlineAt: row.deadlineAt,
      attempts: 0,
      epoch: 0,
    },
    1,
  );
}

function insertedJob(
  id: string,
  params: EnqueueParams,
  fields: {
    readonly status: JobStatus;
    readonly runAfter: number;
    readonly deadlineAt: number | null;
    readonly now: number;
    readonly dependsOn: readonly string[];
  },
): JobRecord {
  const { status, runAfter, deadlineAt, now } = fields;
  return {
    id,
    tenant: params.tenant,
    owner: params.owner,
    kind: params.kind,
    payload: params.payload ?? null,
    status,
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
    finishedAt: status === 'dead' ? now : null,
    lastError: status === 'dead' ? DEPENDENCY_FAILED.lastError : null,
    progress: null,
    cancelRequested: false,
    effectStartedAt: null,
    checkpoint: null,
    result: null,
    concurrencyKey: params.concurrencyKey ?? null,
    group: params.group ?? null,
    dependsOn: fields.dependsOn,
    children: [],
  };
}

/** A job with parents, a concurrency key, a dedupe or a unique key (the idempotency key is new). */
function enqueueFlowJob(st: Statements, counts: CounterMoves, params: EnqueueParams, now: number): EnqueueOutcome {
  const row = newJobRow(params, now);
  // A request that the keys fold into an existing job, or refuse, creates nothing: its parents are not looked at.
  const answered = hasEnqueueKeys(params) ? resolveEnqueueKeys(st, counts, params, row.payload, now) : null;
  if (answered !== null) return answered;
  const named = [...new Set(params.dependsOn ?? [])];
  const parents = (
    named.length === 0 ? [] : st.jobParentsFind.all({ tenant: params.tenant, owner: params.dependsOnOwner ?? null, ids: JSON.stringify(named) })
  ) as {
    seq: number;
    id: string;
    status: JobStatus;
  }[];
  // Another tenant's or owner's job is as unknown as one that never existed: the answer says nothing of it.
  if (parents.length !== named.length) throw new LeaseholdError('invalid_request', 'body/dependsOn names a job that does not exist');
  let pendingParents = 0;
  let failedParent = false;
  for (const parent of parents) {
    const effect = decideParentEnd(parent.status);
    if (effect.kind === 'failed') failedParent = true;
    else if (effect.kind === 'none') pendingParents++;
  }
  const key = params.concurrencyKey ?? null;
  const decision = decideStart({ pendingParents, failedParent, key: keyFacts(st, { tenant: params.tenant, kind: params.kind, key }) });
  const status: JobStatus = decision.kind === 'dependency_failed' ? 'dead' : decision.kind;
  const { id, runAfter, deadlineAt } = row;
  const error = lastErrorColumns(status === 'dead' ? DEPENDENCY_FAILED : { status, outcome: null, lastError: null, attemptCode: null });
  const inserted = st.jobInsertFlow.get({
    ...row,
    status,
    ...error,
    pendingParents: status === 'waiting' ? pendingParents : 0,
    concurrencyKey: key,
    ...keyColumns(params, now),
  }) as { seq: number };
  if (parents.length > 0) {
    const seqs = JSON.stringify(parents.map((p) => p.seq));
    st.dependencyInsert.run({ child: inserted.seq, parents: seqs });
    st.jobParentsMark.run({ parents: seqs });
  }
  if (status === 'queued') readyRow(st, row, inserted.seq);
  counts.created(params.tenant, params.kind, status, params.payloadBytes, now);
  crashPoint('enqueue.before-commit');
  const dependsOn = [...parents].sort((a, b) => a.seq - b.seq).map((p) => p.id);
  return { kind: 'created', job: insertedJob(id, params, { status, runAfter, deadlineAt, now, dependsOn }) };
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
  const counts = new CounterMoves(statements);
  const outcome = enqueueInTx(statements, counts, params, now);
  counts.apply();
  return outcome;
}
