/**
 * Enqueue for PostgreSQL: one INSERT … ON CONFLICT DO NOTHING for a whole
 * batch, then one read of the rows whose idempotency key already existed, to
 * answer each of those as a replay (same request hash) or a conflict.
 *
 * Each request is checked and serialized on its own first (`prepareEnqueue`),
 * so a bad request fails alone even when the store batches it with others.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { LeaseholdError } from '../../core/errors.js';
import { crashPoint } from '../../core/fault-points.js';
import { newJobId } from '../../core/ids.js';
import { distinctAvailability, type Availability, type EnqueueOutcome, type EnqueueParams } from '../store.js';
import type { PgDatabase } from './database.js';
import * as Q from './queries.js';
import { toJobRecord, type JobRow } from './rows.js';
import { bind, pgText } from './sql-fragments.js';

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
  // Identifying text as PostgreSQL will store it, so replies match rows by the same key.
  const stored = {
    ...params,
    tenant: pgText(params.tenant),
    owner: pgText(params.owner),
    idempotencyKey: pgText(params.idempotencyKey),
    requestHash: pgText(params.requestHash),
    kind: pgText(params.kind),
  };
  return { params: stored, payload: params.payloadJson ?? canonicalJson(params.payload ?? null) };
}

export interface InsertedJobs {
  readonly outcomes: readonly EnqueueOutcome[];
  /** The distinct (tenant, kind) of the jobs created: waiting long polls should hear of them. */
  readonly available: readonly Availability[];
}

export async function insertJobs(db: Pick<PgDatabase, 'query'>, items: readonly PreparedEnqueue[]): Promise<InsertedJobs> {
  if (items.length === 0) return { outcomes: [], available: [] };
  crashPoint('enqueue.before-commit');
  const ids = items.map(() => newJobId());
  const params = items.map((item) => item.params);
  const inserted = await db.query<JobRow>(
    bind(Q.JOB_INSERT_MANY, [
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
    ]),
  );
  const created = new Map(inserted.rows.map((row) => [row.id, row]));
  const keyOf = (tenant: string, owner: string, key: string): string => JSON.stringify([tenant, owner, key]);
  const missing = params.filter((_, i) => !created.has(ids[i] ?? ''));
  const existing = new Map<string, JobRow>();
  if (missing.length > 0) {
    // Committed by now: ON CONFLICT waited for any concurrent insert of the same key to finish.
    const rows = await db.query<JobRow>(
      bind(Q.JOB_BY_KEYS, [missing.map((p) => p.tenant), missing.map((p) => p.owner), missing.map((p) => p.idempotencyKey)]),
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
