/**
 * Kinds for SQLite, inside the write transaction: a kind's registration (its
 * schema in canonical JSON, limits, retention, flow rules and group rules)
 * and its pause.
 * The store announces the kind afterwards, since a new limit or a resume may
 * admit jobs that were held back.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { encodeGroupRules } from '../group-lease.js';
import { NO_KIND_RETENTION } from '../retention.js';
import type { KindPauseParams, KindRecord, KindUpsertParams } from '../store.js';
import type { Statements } from './queries.js';
import { retentionBindings } from './retention.js';
import { toKindRecord, type KindRow } from './rows.js';

export function upsertKindInTx(st: Statements, params: KindUpsertParams, now: number): KindRecord {
  const retention = params.retention ?? NO_KIND_RETENTION;
  const maxConcurrent = params.maxConcurrent ?? null;
  const rate = params.rate ?? null;
  const groups = params.groups ?? null;
  const row = st.kindUpsert.get({
    tenant: params.tenant,
    kind: params.kind,
    payloadSchema: params.payloadSchema === undefined || params.payloadSchema === null ? null : canonicalJson(params.payloadSchema),
    maxPayloadBytes: params.maxPayloadBytes,
    maxAttempts: params.maxAttempts,
    leaseMs: params.leaseMs,
    backoffBaseMs: params.backoff.baseMs,
    backoffMaxMs: params.backoff.maxMs,
    deadlineMs: params.deadlineMs,
    maxResultBytes: params.maxResultBytes,
    maxCheckpointBytes: params.maxCheckpointBytes,
    ...retentionBindings(retention),
    maxConcurrent,
    rateLimit: rate?.limit ?? null,
    ratePerMs: rate?.perMs ?? null,
    groupRules: encodeGroupRules(groups),
    now,
  }) as { paused: number };
  // Rules send the kind down the fair path even before its first job with a group; any holds are decided again under them.
  if (groups !== null) st.groupClockEnsure.run({ tenant: params.tenant, kind: params.kind });
  st.groupHoldsLift.run({ tenant: params.tenant, kind: params.kind });
  return { ...params, retention, maxConcurrent, rate, groups, paused: row.paused === 1, updatedAt: now };
}

/** The kind after its pause is set, or null when the tenant has no such kind. */
export function setKindPausedInTx(st: Statements, params: KindPauseParams): KindRecord | null {
  const row = st.kindSetPaused.get({ tenant: params.tenant, kind: params.kind, paused: params.paused ? 1 : 0 }) as KindRow | undefined;
  return row === undefined ? null : toKindRecord(row);
}
