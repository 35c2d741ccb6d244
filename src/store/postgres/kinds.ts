/**
 * Kinds for PostgreSQL: a kind's registration (its schema in canonical JSON,
 * limits, retention, flow rules and group rules, with its group rows' holds
 * lifted, in one transaction) and its pause, one statement. The
 * store announces the kind afterwards, since a new limit or a resume may admit
 * jobs that were held back.
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { NO_KIND_RETENTION } from '../retention.js';
import type { KindPauseParams, KindRecord, KindUpsertParams } from '../store.js';
import { encodeGroupRules } from '../group-lease.js';
import * as C from './catalog-queries.js';
import * as Q from './queries.js';
import type { PgDatabase } from './database.js';
import { retentionValues } from './retention.js';
import { toKindRecord, type KindRow } from './rows.js';
import { bind } from './sql-fragments.js';

export async function upsertKind(db: PgDatabase, params: KindUpsertParams): Promise<KindRecord> {
  const schema = params.payloadSchema === undefined || params.payloadSchema === null ? null : canonicalJson(params.payloadSchema);
  const values = [
    params.tenant,
    params.kind,
    schema,
    params.maxPayloadBytes,
    params.maxAttempts,
    params.leaseMs,
    params.backoff.baseMs,
    params.backoff.maxMs,
    params.deadlineMs,
    params.maxResultBytes,
    params.maxCheckpointBytes,
    ...retentionValues(params.retention ?? NO_KIND_RETENTION),
    params.maxConcurrent ?? null,
    params.rate?.limit ?? null,
    params.rate?.perMs ?? null,
    encodeGroupRules(params.groups),
  ];
  return db.transaction(async (tx) => {
    const row = (await tx.query<KindRow>(bind(C.KIND_UPSERT, values))).rows[0];
    if (row === undefined) throw new Error('KIND_UPSERT returned no row');
    // Rules send the kind down the fair path even before its first job with a group; any holds are decided again under them.
    if ((params.groups ?? null) !== null) await tx.query(bind(Q.GROUP_CLOCK_ENSURE, [params.tenant, params.kind]));
    await tx.query(bind(Q.GROUP_HOLDS_LIFT, [params.tenant, params.kind]));
    return toKindRecord(row);
  });
}

/** The kind after its pause is set, or null when the tenant has no such kind. */
export async function setKindPaused(db: PgDatabase, params: KindPauseParams): Promise<KindRecord | null> {
  const row = (await db.query<KindRow>(bind(C.KIND_SET_PAUSED, [params.tenant, params.kind, params.paused]))).rows[0];
  return row === undefined ? null : toKindRecord(row);
}
