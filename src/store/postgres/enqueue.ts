/**
 * Enqueue for PostgreSQL: one INSERT … ON CONFLICT DO NOTHING for a whole
 * batch, then one read of the rows whose idempotency key already existed, to
 * answer each of those as a replay (same request hash) or a conflict.
 *
 * Each request is checked and serialized on its own first (`prepareEnqueue`),
 * so a bad request fails alone even when the store batches it with others.
 *
 * A job with dependsOn, a concurrencyKey, a dedupe or a unique key takes
 * insertFlowJob, one row at a time inside the caller's transaction: its
 * dedupe and unique keys may fold it into an existing job or refuse it
 * (enqueue-keys.ts); its parents are locked and looked up in the enqueuer's
 * scope (one it cannot see is refused as unknown), its concurrency key is
 * locked, and decideStart (core/dependencies.ts) says whether it starts
 * queued, waiting or dead with dependency_failed. A batch with such a job is
 * inserted item by item, in order, in one transaction.
 */

import type pg from 'pg';
import { canonicalJson } from '../../core/canonical-json.js';
import { hasEnqueueKeys } from '../../core/dedupe.js';
import { decideParentEnd, decideStart } from '../../core/dependencies.js';
import { LeaseholdError, StoreUnavailableError } from '../../core/errors.js';
import { enqueuedGroupKey } from '../group-lease.js';
import { hasFlow as paramsHaveFlow } from '../enqueue-paths.js';
import { crashPoint } from '../../core/fault-points.js';
import { isJobId, newJobId, newLeaseToken } from '../../core/ids.js';
import { DEPENDENCY_FAILED, lastErrorColumns } from '../lease-endings.js';
import { keyFacts } from './dependencies.js';
import { keyBindings, resolveEnqueueKeys } from './enqueue-keys.js';
import { distinctAvailability, type Availability, type EnqueueOutcome, type EnqueueParams, type HandoffLease, type LeasedJob } from '../store.js';
import type { PgDatabase } from './database.js';
import * as Q from './queries.js';
import { toJobRecord, toLeasedJob, toStatus, type JobRow } from './rows.js';
import { bind, bindUnplanned, pgText } from './sql-fragments.js';

export interface PreparedEnqueue {
  readonly params: EnqueueParams;
  /** The payload in canonical JSON, as stored and as idempotency compares it. */
  readonly payload: string;
}

const INT4_MAX = 2 ** 31 - 1;

function isInt4(value: number): boolean {
  return Number.isInteger(value) && value >= -INT4_MAX - 1 && value <= INT4_MAX;
}

export function prepareEnqueue(params: EnqueueParams): PreparedEnqueue {
  if (!isInt4(params.maxAttempts) || !isInt4(params.priority) || !isInt4(params.payloadBytes)) {
    throw new LeaseholdError('invalid_request', 'maxAttempts, priority and payloadBytes must be 32-bit integers');
  }
  if ((params.runAfter !== null && !Number.isFinite(params.runAfter)) || (params.deadlineMs !== null && !Number.isFinite(params.deadlineMs))) {
    throw new LeaseholdError('invalid_request', 'runAfter and deadlineMs must be finite numbers');
  }
  const durations = [params.dedupe?.ttlMs, params.dedupe?.maxDelayMs, params.unique?.forMs].filter((value) => value !== undefined);
  if (!durations.every((value) => Number.isSafeInteger(value) && value >= 0)) {
    throw new LeaseholdError('invalid_request', 'ttlMs, maxDelayMs and forMs must be whole numbers of milliseconds');
  }
  // Identifying text as PostgreSQL will store it, so replies match rows by the same key.
  const stored = {
    ...params,
    tenant: pgText(params.tenant),
    owner: pgText(params.owner),
    idempotencyKey: pgText(params.idempotencyKey),
    requestHash: pgText(params.requestHash),
    kind: pgText(params.kind),
    ...(params.concurrencyKey === undefined || params.concurrencyKey === null ? {} : { concurrencyKey: pgText(params.concurrencyKey) }),
    ...(params.dedupe === undefined ? {} : { dedupe: { ...params.dedupe, key: pgText(params.dedupe.key) } }),
    ...(params.unique === undefined ? {} : { unique: { ...params.unique, key: pgText(params.unique.key) } }),
    ...(params.dependsOnOwner === undefined ? {} : { dependsOnOwner: pgText(params.dependsOnOwner) }),
  };
  return { params: stored, payload: params.payloadJson ?? canonicalJson(params.payload ?? null) };
}

export interface InsertedJobs {
  readonly outcomes: readonly EnqueueOutcome[];
  /** The distinct (tenant, kind) of the jobs created: waiting long polls should hear of them. */
  readonly available: readonly Availability[];
}

/** A job with parents, a concurrency key, a dedupe or a unique key: it needs a transaction (insertJobs then takes it item by item). */
export function hasFlow(item: PreparedEnqueue): boolean {
  return paramsHaveFlow(item.params);
}

/** Inserts `items` in order; with a job that hasFlow, `db` must be inside a transaction. */
export async function insertJobs(db: Pick<PgDatabase, 'query'>, items: readonly PreparedEnqueue[]): Promise<InsertedJobs> {
  if (items.length === 0) return { outcomes: [], available: [] };
  if (!items.some(hasFlow)) return insertPlainJobs(db, items);
  const outcomes: EnqueueOutcome[] = [];
  const available: Availability[] = [];
  for (const item of items) {
    const inserted = hasFlow(item) ? await insertFlowJob(db, item) : await insertPlainJobs(db, [item]);
    outcomes.push(...inserted.outcomes);
    available.push(...inserted.available);
  }
  return { outcomes, available: distinctAvailability(available) };
}

async function insertPlainJobs(db: Pick<PgDatabase, 'query'>, items: readonly PreparedEnqueue[]): Promise<InsertedJobs> {
  crashPoint('enqueue.before-commit');
  const ids = items.map(() => newJobId());
  const params = items.map((item) => item.params);
  const groupKeys = params.map((p) => enqueuedGroupKey(p));
  const grouped = groupKeys.some((key) => key !== '');
  const inserted = await db.query<JobRow>(
    bind(grouped ? Q.JOB_INSERT_MANY : Q.JOB_INSERT_MANY_UNGROUPED, [
      ids,
      params.map((p) => p.tenant),
      params.map((p) => p.owner),
      params.map((p) => p.idempotencyKey),
      params.map((p) => p.requestHash),
      params.map((p) => p.kind),
      items.map((item) => item.payload),
      params.map((p) => p.payloadBytes),
      params.map((p) => p.maxAttempts),
      params.map((p) => p.priority),
      params.map((p) => p.runAfter),
      params.map((p) => p.deadlineMs),
      ...(grouped ? [groupKeys] : []),
    ]),
  );
  const created = new Map(inserted.rows.map((row) => [row.id, row]));
  const keyOf = (tenant: string, owner: string, key: string): string => JSON.stringify([tenant, owner, key]);
  const missing = params.filter((_, i) => !created.has(ids[i] ?? ''));
  const existing = new Map<string, JobRow>();
  if (missing.length > 0) {
    // Committed by now: ON CONFLICT waited for any concurrent insert of the same key to finish.
    const rows = await db.query<JobRow>(
      bindUnplanned(Q.JOB_BY_KEYS, [missing.map((p) => p.tenant), missing.map((p) => p.owner), missing.map((p) => p.idempotencyKey)]),
    );
    for (const row of rows.rows) existing.set(keyOf(row.tenant, row.owner, row.idempotency_key), row);
  }
  const outcomes = params.map((p, i): EnqueueOutcome => {
    const row = created.get(ids[i] ?? '');
    if (row !== undefined) return { kind: 'created', job: toJobRecord(row) };
    const other = existing.get(keyOf(p.tenant, p.owner, p.idempotencyKey));
    if (other === undefined) throw new Error('an idempotency key conflicted but its job cannot be read');
    if (other.request_hash !== p.requestHash) return { kind: 'conflict', existingJobId: other.id };
    return { kind: 'replayed', job: toJobRecord(other) };
  });
  return { outcomes, available: distinctAvailability(inserted.rows) };
}

/**
 * One plain job (mayHandOff, store/enqueue-paths.ts) inserted and, unless its kind is held, leased to `lease` in the same statement
 * (JOB_INSERT_LEASED). A key that exists creates nothing, and the answer is its job's (replayed or conflict).
 */
export async function insertLeasedJob(
  db: Pick<PgDatabase, 'query'>,
  item: PreparedEnqueue,
  lease: HandoffLease,
): Promise<{ readonly outcome: EnqueueOutcome; readonly leased: LeasedJob | null; readonly available: readonly Availability[] }> {
  crashPoint('enqueue.before-commit');
  const p = item.params;
  const values = [[newJobId()], [p.tenant], [p.owner], [p.idempotencyKey], [p.requestHash], [p.kind], [item.payload], [p.payloadBytes]];
  const rows = (
    await db.query<JobRow & { handed: boolean }>(
      bind(Q.JOB_INSERT_LEASED, [...values, [p.maxAttempts], [p.priority], [p.runAfter], [p.deadlineMs], newLeaseToken(), lease.workerId, lease.leaseMs]),
    )
  ).rows;
  const inserted = rows.find((row) => !row.handed);
  if (inserted === undefined) {
    // Committed by now: ON CONFLICT waited for any concurrent insert of the same key to finish.
    const outcome = await existingKey(db, p);
    if (outcome === undefined) throw new Error('an idempotency key conflicted but its job cannot be read');
    return { outcome, leased: null, available: [] };
  }
  const leasedRow = rows.find((row) => row.handed);
  return {
    outcome: { kind: 'created', job: toJobRecord(inserted) },
    leased: leasedRow === undefined ? null : toLeasedJob(leasedRow),
    available: leasedRow === undefined ? [{ tenant: p.tenant, kind: p.kind }] : [],
  };
}

/** The job of an idempotency key that exists: a replay (same request hash) or a conflict; undefined for a new key. */
async function existingKey(db: Pick<PgDatabase, 'query'>, p: EnqueueParams): Promise<EnqueueOutcome | undefined> {
  const row = (await db.query<JobRow>(bindUnplanned(Q.JOB_BY_KEYS, [[p.tenant], [p.owner], [p.idempotencyKey]]))).rows[0];
  if (row === undefined) return undefined;
  return row.request_hash === p.requestHash ? { kind: 'replayed', job: toJobRecord(row) } : { kind: 'conflict', existingJobId: row.id };
}

const UNKNOWN_PARENT = 'body/dependsOn names a job that does not exist';

/**
 * Times an enqueue with a dedupe or unique key reads the keys' holders again after another transaction moved one
 * (each round means another enqueue, lease or requeue of the key committed in between).
 */
const KEY_ROUNDS = 5;

/** One job with parents, a concurrency key, a dedupe or a unique key, inside the caller's transaction. */
async function insertFlowJob(db: Pick<PgDatabase, 'query'>, item: PreparedEnqueue): Promise<InsertedJobs> {
  const p = item.params;
  // A key that exists answers as it always has, whatever became of the parents since.
  const existing = await existingKey(db, p);
  if (existing !== undefined) return { outcomes: [existing], available: [] };
  for (let round = 1; round <= KEY_ROUNDS; round++) {
    // A request that the keys fold into an existing job, or refuse, creates nothing: its parents are not looked at.
    const keys = hasEnqueueKeys(p) ? await resolveEnqueueKeys(db, p, item.payload) : ({ kind: 'free' } as const);
    if (keys.kind === 'answered') return { outcomes: [keys.outcome], available: [] };
    if (keys.kind === 'free') {
      const inserted = await insertFlowRow(db, item);
      if (inserted !== undefined) return inserted;
      // The same idempotency key committed beside this one (ON CONFLICT waited for it), or a dedupe or unique key.
      const other = await existingKey(db, p);
      if (other !== undefined) return { outcomes: [other], available: [] };
      if (!hasEnqueueKeys(p)) throw new Error('an enqueue conflicted but no key explains it');
    }
  }
  throw new StoreUnavailableError('the dedupe or unique key of this job kept changing hands; try again');
}

/** Inserts the job, or nothing when a key of it was taken first (undefined). */
async function insertFlowRow(db: Pick<PgDatabase, 'query'>, item: PreparedEnqueue): Promise<InsertedJobs | undefined> {
  const p = item.params;
  const named = [...new Set(p.dependsOn ?? [])];
  // Another tenant's or owner's job is as unknown as one that never existed: the answer says nothing of it.
  if (!named.every(isJobId)) throw new LeaseholdError('invalid_request', UNKNOWN_PARENT);
  const parents =
    named.length === 0
      ? []
      : (await db.query<{ id: string; seq: number; status: string }>(bind(Q.JOB_PARENTS_MARK, [p.tenant, p.dependsOnOwner ?? null, named]))).rows;
  if (parents.length !== named.length) throw new LeaseholdError('invalid_request', UNKNOWN_PARENT);
  let pendingParents = 0;
  let failedParent = false;
  for (const parent of parents) {
    const effect = decideParentEnd(toStatus(parent.status));
    if (effect.kind === 'failed') failedParent = true;
    else if (effect.kind === 'none') pendingParents++;
  }
  const key = p.concurrencyKey ?? null;
  const decision = decideStart({ pendingParents, failedParent, key: await keyFacts(db, { tenant: p.tenant, kind: p.kind, key }) });
  const status = decision.kind === 'dependency_failed' ? 'dead' : decision.kind;
  const error = lastErrorColumns(status === 'dead' ? DEPENDENCY_FAILED : { status, outcome: null, lastError: null, attemptCode: null });
  crashPoint('enqueue.before-commit');
  const id = newJobId();
  const row = (
    await db.query<JobRow>(
      bind(Q.JOB_INSERT_FLOW, [
        id,
        p.tenant,
        p.owner,
        p.idempotencyKey,
        p.requestHash,
        p.kind,
        item.payload,
        p.payloadBytes,
        status,
        p.maxAttempts,
        p.priority,
        p.runAfter,
        p.deadlineMs,
        error.code,
        error.message,
        error.errorClass,
        status === 'waiting' ? pendingParents : 0,
        key,
        ...keyBindings(p),
        enqueuedGroupKey(p),
      ]),
    )
  ).rows[0];
  if (row === undefined) return undefined;
  if (parents.length > 0) await db.query(bind(Q.DEPENDENCY_INSERT, [parents.map((parent) => parent.id), id]));
  const dependsOn = [...parents].sort((a, b) => a.seq - b.seq).map((parent) => parent.id);
  return {
    outcomes: [{ kind: 'created', job: { ...toJobRecord(row), dependsOn } }],
    available: status === 'queued' ? [{ tenant: p.tenant, kind: p.kind }] : [],
  };
}

/**
 * Enqueue on an application's own connection, inside the transaction it has open: the job, its reserved key
 * and its NOTIFY (`notification`) exist only if that transaction commits. The statements run with the store's
 * schema as the transaction's search_path, set back afterwards.
 */
export async function enqueueOnClient(
  client: pg.ClientBase,
  schema: string,
  notification: (available: readonly Availability[]) => pg.QueryConfig,
  params: EnqueueParams,
): Promise<EnqueueOutcome> {
  const previous = (await client.query<{ search_path: string }>('SHOW search_path')).rows[0]?.search_path ?? 'public';
  await client.query(`SELECT set_config('search_path', $1, true)`, [schema]);
  try {
    // Unnamed statements: a statement prepared on the application's connection must not outlive this search_path.
    const onClient = {
      query: <R extends pg.QueryResultRow>(config: pg.QueryConfig) =>
        client.query<R>({ text: config.text, ...(config.values === undefined ? {} : { values: config.values }) }),
    };
    const inserted = await insertJobs(onClient, [prepareEnqueue(params)]);
    if (inserted.available.length > 0) await client.query(notification(inserted.available));
    const [outcome] = inserted.outcomes;
    if (outcome === undefined) throw new Error('an enqueue returned no outcome');
    return outcome;
  } finally {
    await client.query(`SELECT set_config('search_path', $1, true)`, [previous]);
  }
}
