/**
 * The PostgreSQL Store, for several coordinators on several hosts over one
 * database. PostgreSQL's now() is the only clock. Transitions are decided by
 * the pure functions in core/transitions.ts and applied by statements whose
 * WHERE clause repeats the fencing condition (queries.ts); the hot paths
 * (enqueue, lease, renew, single complete, checkpoint) are one guarded
 * statement each, and when such a statement matches nothing the store reads
 * the row and lets the decide function name the reason. Work that needs a
 * decision made in code (fail with its backoff, batches, the reaper, operator
 * actions) locks the rows with SELECT … FOR UPDATE first.
 *
 * Long polls across coordinators wake through LISTEN/NOTIFY
 * (availability-listener.ts).
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { StoreUnavailableError } from '../../core/errors.js';
import { isJobId, newJobId, newLeaseToken, sha256Hex as sha256 } from '../../core/ids.js';
import { JOB_STATUSES, type JobStatus } from '../../core/states.js';
import { decideCancel, decideCompletion, decideFailure, decideRenew, decideRequeue, holdsLiveLease, isPastDeadline } from '../../core/transitions.js';
import type {
  ApiKeyInsertParams,
  ApiKeyRecord,
  AttemptRecord,
  CancelOutcome,
  CheckpointParams,
  CompleteOutcome,
  CompleteParams,
  EnqueueOutcome,
  EnqueueParams,
  FailOutcome,
  FailParams,
  JobListParams,
  JobPage,
  JobRecord,
  JobRef,
  KindRecord,
  KindUpsertParams,
  LeasedJob,
  LeaseParams,
  ReapOutcome,
  ReconcileOutcome,
  ReconcileParams,
  RenewOutcome,
  RenewParams,
  RequeueOutcome,
  RequeueParams,
  Store,
  TenantStats,
  TokenOutcome,
  TokenParams,
} from '../store.js';
import { AvailabilityListener } from './availability-listener.js';
import * as C from './catalog-queries.js';
import { completeBatch, failDecisionRow, reapBatch, type EndLease } from './lease-endings.js';
import { assertSchemaName, migrate } from './migrate.js';
import { clientConfig, PgDatabase, type TxClient } from './pg-database.js';
import { translatePgError } from './pg-errors.js';
import * as Q from './queries.js';
import { toApiKeyRecord, toAttemptRecord, toJobRecord, toKindRecord, toLeasedJob, toSnapshot, type ApiKeyRow, type AttemptRow, type JobRow, type KindRow } from './row-mapping.js';
import { bind, type NamedQuery } from './sql-fragments.js';

export interface PostgresStoreOptions {
  readonly connectionString: string;
  /** Connections in the pool (the LISTEN connection is extra). */
  readonly poolSize?: number;
  /** A schema to create (if missing) and use for every table; `public` when absent. */
  readonly schema?: string;
  /** PostgreSQL's own now() is the only clock; a Clock cannot be injected. */
  readonly clock?: never;
}

type NowRow = JobRow & { readonly now_ms: number };

/** How many expired leases one reaper transaction handles. */
const REAP_BATCH = 500;

export class PostgresStore implements Store {
  readonly backend = 'postgres' as const;
  private readonly listeners = new Set<() => void>();
  private listener: AvailabilityListener | null = null;
  private closed = false;

  private constructor(
    private readonly db: PgDatabase,
    private readonly options: { readonly connectionString: string; readonly schema: string },
    /** NOTIFY channel: one per schema, so test schemas do not wake each other. */
    private readonly channel: string,
  ) {}

  static async connect(options: PostgresStoreOptions): Promise<PostgresStore> {
    const schema = options.schema ?? 'public';
    assertSchemaName(schema);
    const db = new PgDatabase({ connectionString: options.connectionString, schema, poolSize: options.poolSize ?? 10 });
    try {
      const client = await db.pool.connect();
      try {
        await migrate(client, schema);
      } finally {
        client.release();
      }
    } catch (error) {
      await db.close().catch(() => undefined);
      throw translatePgError(error);
    }
    return new PostgresStore(db, { connectionString: options.connectionString, schema }, `lh_available_${schema}`.slice(0, 63));
  }

  /** Drops a schema and everything in it (test isolation). */
  static async dropSchema(options: { readonly connectionString: string; readonly schema: string }): Promise<void> {
    assertSchemaName(options.schema);
    const pgModule = await import('pg');
    const client = new pgModule.default.Client({ connectionString: options.connectionString });
    try {
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${options.schema} CASCADE`);
    } catch (error) {
      throw translatePgError(error);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async now(): Promise<number> {
    const result = await this.db.query<{ now_ms: number }>(bind(Q.NOW, []));
    return result.rows[0]?.now_ms ?? 0;
  }

  async ping(): Promise<void> {
    await this.db.query({ text: 'SELECT 1' });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    await this.listener?.stop();
    await this.db.close();
  }

  // --- keys and kinds -------------------------------------------------------

  async apiKeyInsert(params: ApiKeyInsertParams): Promise<ApiKeyRecord> {
    const values = [params.id, params.tenant, params.user, params.role, params.keyHash];
    return toApiKeyRecord(await this.one<ApiKeyRow>(C.API_KEY_INSERT, values));
  }

  async apiKeyFindByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const row = await this.first<ApiKeyRow>(C.API_KEY_BY_HASH, [keyHash]);
    return row === undefined ? null : toApiKeyRecord(row);
  }

  async apiKeyRevoke(params: { readonly id: string }): Promise<boolean> {
    return (await this.first<{ id: string }>(C.API_KEY_REVOKE, [params.id])) !== undefined;
  }

  async kindUpsert(params: KindUpsertParams): Promise<KindRecord> {
    const schema = params.payloadSchema === undefined || params.payloadSchema === null ? null : canonicalJson(params.payloadSchema);
    const values = [
      params.tenant, params.kind, schema, params.maxPayloadBytes, params.maxAttempts, params.leaseMs,
      params.backoff.baseMs, params.backoff.maxMs, params.deadlineMs, params.maxResultBytes,
    ];
    return toKindRecord(await this.one<KindRow>(C.KIND_UPSERT, values));
  }

  async kindGet(params: { readonly tenant: string; readonly kind: string }): Promise<KindRecord | null> {
    const row = await this.first<KindRow>(C.KIND_GET, [params.tenant, params.kind]);
    return row === undefined ? null : toKindRecord(row);
  }

  async kindList(params: { readonly tenant: string }): Promise<readonly KindRecord[]> {
    return (await this.db.query<KindRow>(bind(C.KIND_LIST, [params.tenant]))).rows.map(toKindRecord);
  }

  // --- enqueue and reads ----------------------------------------------------

  async jobEnqueue(params: EnqueueParams): Promise<EnqueueOutcome> {
    const [outcome] = await this.jobEnqueueMany([params]);
    if (outcome === undefined) throw new Error('enqueue returned no outcome');
    return outcome;
  }

  async jobEnqueueMany(params: readonly EnqueueParams[]): Promise<readonly EnqueueOutcome[]> {
    if (params.length === 0) return [];
    const ids = params.map(() => newJobId());
    const inserted = await this.db.query<JobRow>(
      bind(Q.JOB_INSERT_MANY, [
        ids,
        params.map((p) => p.tenant),
        params.map((p) => p.owner),
        params.map((p) => p.idempotencyKey),
        params.map((p) => p.requestHash),
        params.map((p) => p.kind),
        params.map((p) => canonicalJson(p.payload ?? null)),
        params.map((p) => p.payloadBytes),
        params.map((p) => p.maxAttempts),
        params.map((p) => p.priority),
        params.map((p) => p.runAfter),
        params.map((p) => p.deadlineMs),
        this.channel,
      ]),
    );
    const created = new Map(inserted.rows.map((row) => [row.id, row]));
    if (created.size > 0) this.wake();
    const keyOf = (tenant: string, owner: string, key: string): string => JSON.stringify([tenant, owner, key]);
    const missing = params.filter((_, i) => !created.has(ids[i] ?? ''));
    const existing = new Map<string, JobRow>();
    if (missing.length > 0) {
      const rows = await this.db.query<JobRow>(
        bind(Q.JOB_BY_KEYS, [missing.map((p) => p.tenant), missing.map((p) => p.owner), missing.map((p) => p.idempotencyKey)]),
      );
      for (const row of rows.rows) existing.set(keyOf(row.tenant, row.owner, row.idempotency_key), row);
    }
    return params.map((p, i): EnqueueOutcome => {
      const row = created.get(ids[i] ?? '');
      if (row !== undefined) return { kind: 'created', job: toJobRecord(row) };
      const other = existing.get(keyOf(p.tenant, p.owner, p.idempotencyKey));
      if (other === undefined) throw new Error('an idempotency key conflicted but its job cannot be read');
      if (other.request_hash !== p.requestHash) return { kind: 'conflict', existingJobId: other.id };
      return { kind: 'replayed', job: toJobRecord(other) };
    });
  }

  async jobGet(params: JobRef): Promise<JobRecord | null> {
    if (!isJobId(params.id)) return null;
    const row = await this.first<JobRow>(Q.JOB_GET, [params.id, params.scope.tenant, params.scope.owner ?? null]);
    return row === undefined ? null : toJobRecord(row);
  }

  async jobList(params: JobListParams): Promise<JobPage> {
    const cursor = params.cursor === undefined ? null : /^\d{1,15}$/.test(params.cursor) ? params.cursor : undefined;
    if (cursor === undefined) return { jobs: [], nextCursor: null };
    const values = [params.scope.tenant, params.scope.owner ?? null, params.status ?? null, params.kind ?? null, cursor, params.limit + 1];
    const rows = (await this.db.query<JobRow>(bind(C.JOB_LIST, values))).rows;
    const page = rows.slice(0, params.limit);
    const last = page[page.length - 1];
    return { jobs: page.map(toJobRecord), nextCursor: rows.length > params.limit && last !== undefined ? String(last.seq) : null };
  }

  async jobAttempts(params: JobRef): Promise<readonly AttemptRecord[] | null> {
    if ((await this.jobGet(params)) === null) return null;
    return (await this.db.query<AttemptRow>(bind(C.ATTEMPT_LIST, [params.id]))).rows.map(toAttemptRecord);
  }

  // --- the lease protocol ---------------------------------------------------

  async jobLease(params: LeaseParams): Promise<readonly LeasedJob[]> {
    const due = await this.first<{ due: boolean }>(Q.DUE_PROBE, [params.tenant]);
    if (due?.due === true) await this.reap(params.tenant);
    const tokens = Array.from({ length: params.max }, () => newLeaseToken());
    const base = [params.tenant, params.max, tokens, params.workerId, params.leaseMs];
    const kinds = params.kinds !== undefined && params.kinds.length > 0 ? [...params.kinds] : null;
    const query = kinds === null ? bind(Q.JOB_LEASE_ANY_KIND, base) : bind(Q.JOB_LEASE_KINDS, [...base, kinds]);
    return (await this.db.query<JobRow>(query)).rows.map(toLeasedJob);
  }

  async jobRenew(params: RenewParams): Promise<RenewOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    const hasProgress = params.progress !== undefined;
    const values = [params.id, params.tenant, params.token, params.leaseMs, hasProgress, hasProgress ? canonicalJson(params.progress) : null];
    const renewed = await this.first<{ lease_expires_at: number }>(Q.JOB_RENEW, values);
    if (renewed !== undefined) return { kind: 'renewed', leaseExpiresAt: renewed.lease_expires_at };
    const row = await this.peek(params.tenant, params.id);
    if (row === undefined) return { kind: 'rejected', code: 'not_found' };
    const decision = decideRenew(toSnapshot(row), params.token, params.leaseMs, row.now_ms);
    // A lease never becomes live again, so 'renew' here can only be clock rounding: refuse.
    return { kind: 'rejected', code: decision.kind === 'reject' ? decision.code : 'stale_lease' };
  }

  async jobComplete(params: CompleteParams): Promise<CompleteOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    const result = params.result;
    if (result !== undefined && params.maxResultBytes !== undefined && result.body.length > params.maxResultBytes) {
      const [outcome] = await this.jobCompleteMany([params]);
      if (outcome === undefined) throw new Error('complete returned no outcome');
      return outcome;
    }
    const values = [
      params.id, params.tenant, params.token,
      result?.contentType ?? null, result?.body ?? null, result === undefined ? null : sha256(result.body),
    ];
    if ((await this.first<{ id: string }>(Q.JOB_COMPLETE_ONE, values)) !== undefined) return { kind: 'completed', replayed: false };
    const row = await this.peek(params.tenant, params.id);
    if (row === undefined) return { kind: 'rejected', code: 'not_found' };
    const decision = decideCompletion(toSnapshot(row), params.token, row.now_ms);
    if (decision.kind === 'replay') return { kind: 'completed', replayed: true };
    return { kind: 'rejected', code: decision.kind === 'reject' ? decision.code : 'stale_lease' };
  }

  async jobCompleteMany(params: readonly CompleteParams[]): Promise<readonly CompleteOutcome[]> {
    if (params.length === 0) return [];
    return this.db.transaction(async (tx) => {
      const ids = [...new Set(params.map((p) => p.id).filter(isJobId))];
      const rows = (await tx.query<NowRow>(bind(Q.JOB_LOCK_MANY, [ids]))).rows;
      const batch = completeBatch(params, rows);
      await this.endLeases(tx, batch.endings, true);
      return batch.outcomes;
    });
  }

  async jobFail(params: FailParams): Promise<FailOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    let requeued = false;
    const outcome = await this.db.transaction(async (tx): Promise<FailOutcome> => {
      requeued = false;
      const row = await this.lock(tx, params.id, params.tenant, null);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      const input = { retryable: params.retryable, backoff: params.backoff, random: Math.random };
      const decision = decideFailure(toSnapshot(row), params.token, input, row.now_ms);
      if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
      if (decision.kind === 'replay') {
        const status = row.status as 'queued' | 'dead' | 'cancelled' | 'unknown';
        return { kind: 'failed', status, runAfter: status === 'queued' ? row.run_after : null, replayed: true };
      }
      const ending = failDecisionRow(row, params, decision);
      await this.endLeases(tx, [ending], true);
      if (ending.status === 'queued') {
        requeued = true;
        await tx.query(bind(Q.NOTIFY, [this.channel]));
      }
      const status = ending.status as 'queued' | 'dead' | 'cancelled' | 'unknown';
      return { kind: 'failed', status, runAfter: ending.runAfter, replayed: false };
    });
    if (requeued) this.wake();
    return outcome;
  }

  async jobCheckpoint(params: CheckpointParams): Promise<TokenOutcome> {
    const state = canonicalJson(params.checkpoint.state ?? null);
    return this.withLiveLease(params, Q.JOB_CHECKPOINT, [params.checkpoint.step, state]);
  }

  async jobMarkEffectStarted(params: TokenParams): Promise<TokenOutcome> {
    return this.withLiveLease(params, Q.JOB_EFFECT_STARTED, []);
  }

  // --- operator actions -----------------------------------------------------

  async jobRequeue(params: RequeueParams): Promise<RequeueOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    const outcome = await this.db.transaction(async (tx): Promise<RequeueOutcome> => {
      const row = await this.lock(tx, params.id, params.scope.tenant, params.scope.owner ?? null);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      const decision = decideRequeue(toSnapshot(row));
      if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
      await this.expectOne(tx, Q.JOB_REQUEUE, [row.id, params.maxAttempts ?? row.max_attempts, 'dead']);
      await tx.query(bind(Q.NOTIFY, [this.channel]));
      return { kind: 'requeued', job: await this.reload(tx, row) };
    });
    if (outcome.kind === 'requeued') this.wake();
    return outcome;
  }

  async jobCancel(params: JobRef): Promise<CancelOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    return this.db.transaction(async (tx): Promise<CancelOutcome> => {
      const row = await this.lock(tx, params.id, params.scope.tenant, params.scope.owner ?? null);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      if (row.status === 'cancelled') return { kind: 'cancelled', job: await this.reload(tx, row) };
      const decision = decideCancel(toSnapshot(row));
      switch (decision.kind) {
        case 'already_terminal':
          return { kind: 'rejected', code: 'invalid_state' };
        case 'cancel_now':
          await this.expectOne(tx, Q.JOB_CANCEL_NOW, [row.id]);
          return { kind: 'cancelled', job: await this.reload(tx, row) };
        case 'mark_running':
          await this.expectOne(tx, Q.JOB_CANCEL_REQUEST, [row.id]);
          return { kind: 'cancel_requested', job: await this.reload(tx, row) };
      }
    });
  }

  async jobReconcile(params: ReconcileParams): Promise<ReconcileOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    const outcome = await this.db.transaction(async (tx): Promise<ReconcileOutcome> => {
      const row = await this.lock(tx, params.id, params.scope.tenant, params.scope.owner ?? null);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      if (row.status !== 'unknown') return { kind: 'rejected', code: 'not_unknown' };
      if (params.outcome === 'succeeded') await this.expectOne(tx, Q.JOB_RECONCILE_SUCCEEDED, [row.id]);
      else if (params.outcome === 'dead') await this.expectOne(tx, Q.JOB_RECONCILE_DEAD, [row.id]);
      else {
        await this.expectOne(tx, Q.JOB_REQUEUE, [row.id, row.max_attempts, 'unknown']);
        await tx.query(bind(Q.NOTIFY, [this.channel]));
      }
      return { kind: 'reconciled', job: await this.reload(tx, row) };
    });
    if (outcome.kind === 'reconciled' && params.outcome === 'requeue') this.wake();
    return outcome;
  }

  async jobReapExpired(): Promise<ReapOutcome> {
    const total = { requeued: 0, dead: 0, unknown: 0, cancelled: 0, deadlineExpired: 0 };
    // Bounded, so one call cannot run forever while leases keep expiring.
    for (let round = 0; round < 20; round++) {
      const counts = await this.reap(null);
      total.requeued += counts.requeued;
      total.dead += counts.dead;
      total.unknown += counts.unknown;
      total.cancelled += counts.cancelled;
      total.deadlineExpired += counts.deadlineExpired;
      if (counts.leases < REAP_BATCH && counts.deadlineExpired < REAP_BATCH) break;
    }
    return total;
  }

  async stats(params: { readonly tenant: string }): Promise<TenantStats> {
    const row = await this.one<{
      counts: Record<string, number>;
      mean_wait: number | null;
      mean_run: number | null;
      oldest_age: number | null;
      storage_bytes: number;
      lease_expirations: number;
    }>(C.STATS, [params.tenant]);
    const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, Number(row.counts[s] ?? 0)])) as Record<JobStatus, number>;
    return {
      counts,
      meanWaitMs: row.mean_wait,
      meanRunMs: row.mean_run,
      leaseExpirations: row.lease_expirations,
      oldestAvailableAgeMs: row.oldest_age === null ? null : Math.max(0, row.oldest_age),
      storageBytes: row.storage_bytes,
    };
  }

  watchAvailable(listener: () => void): () => void {
    this.listeners.add(listener);
    if (this.listener === null && !this.closed) {
      this.listener = new AvailabilityListener({
        clientConfig: clientConfig(this.options),
        channel: this.channel,
        onAvailable: () => this.wake(),
      });
      void this.listener.start();
    }
    return () => {
      this.listeners.delete(listener);
    };
  }

  // --- helpers --------------------------------------------------------------

  /** Applies lease expiries and passed deadlines (of one tenant, or all), one batch, in one transaction. */
  private async reap(tenant: string | null): Promise<ReapOutcome & { readonly leases: number }> {
    const counts = await this.db.transaction(async (tx) => {
      const rows = (await tx.query<NowRow>(bind(Q.EXPIRED_LEASES_LOCK, [tenant, REAP_BATCH]))).rows;
      const batch = reapBatch(rows);
      const moved = await this.endLeases(tx, batch.endings, false);
      if (moved.length > 0) await tx.query(bind(Q.COUNTER_ADD_EXPIRATIONS, [moved.map((m) => m.tenant)]));
      const deadlines = await tx.query(bind(Q.QUEUED_PAST_DEADLINE, [tenant, 'the job passed its overall deadline', REAP_BATCH]));
      if (batch.counts.requeued > 0) await tx.query(bind(Q.NOTIFY, [this.channel]));
      return { ...batch.counts, deadlineExpired: deadlines.rowCount ?? 0, leases: rows.length };
    });
    if (counts.requeued > 0) this.wake();
    return counts;
  }

  /** Runs JOB_END_LEASES; every decided ending must apply, or the snapshot and the guard disagree. */
  private async endLeases(tx: TxClient, endings: readonly EndLease[], live: boolean): Promise<{ id: string; tenant: string; status: string }[]> {
    if (endings.length === 0) return [];
    const withResult = endings.filter((e) => e.result !== null);
    const moved = await tx.query<{ id: string; tenant: string; status: string }>(
      bind(Q.JOB_END_LEASES, [
        endings.map((e) => e.id),
        endings.map((e) => e.token),
        endings.map((e) => e.status),
        endings.map((e) => e.outcome),
        endings.map((e) => e.code),
        endings.map((e) => e.message),
        endings.map((e) => e.runAfter),
        endings.map((e) => e.attemptCode),
        live,
        withResult.map((e) => e.id),
        withResult.map((e) => e.result?.contentType ?? ''),
        withResult.map((e) => e.result?.body ?? Buffer.alloc(0)),
        withResult.map((e) => (e.result === null ? '' : sha256(e.result.body))),
      ]),
    );
    if (moved.rows.length !== endings.length) {
      throw new Error(`guarded update matched ${moved.rows.length} of ${endings.length} rows; the snapshot and the guard disagree`);
    }
    return moved.rows;
  }

  /** Checkpoint and effect marks: one guarded statement; on a miss, say why. */
  private async withLiveLease(params: TokenParams, query: NamedQuery, extra: readonly unknown[]): Promise<TokenOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    if ((await this.first(query, [params.id, params.tenant, params.token, ...extra])) !== undefined) return { kind: 'ok' };
    const row = await this.peek(params.tenant, params.id);
    if (row === undefined) return { kind: 'rejected', code: 'not_found' };
    const snapshot = toSnapshot(row);
    if (holdsLiveLease(snapshot, params.token, row.now_ms) && isPastDeadline(snapshot, row.now_ms)) {
      return { kind: 'rejected', code: 'deadline_exceeded' };
    }
    return { kind: 'rejected', code: 'stale_lease' };
  }

  private async lock(tx: TxClient, id: string, tenant: string, owner: string | null): Promise<NowRow | undefined> {
    return (await tx.query<NowRow>(bind(Q.JOB_LOCK, [id, tenant, owner]))).rows[0];
  }

  private async peek(tenant: string, id: string): Promise<NowRow | undefined> {
    return this.first<NowRow>(Q.JOB_PEEK, [id, tenant]);
  }

  private async reload(tx: TxClient, row: JobRow): Promise<JobRecord> {
    const fresh = (await tx.query<JobRow>(bind(Q.JOB_GET, [row.id, row.tenant, null]))).rows[0];
    if (fresh === undefined) throw new Error('a locked job vanished');
    return toJobRecord(fresh);
  }

  private async expectOne(tx: TxClient, query: NamedQuery, values: readonly unknown[]): Promise<void> {
    const result = await tx.query(bind(query, values));
    if (result.rowCount !== 1) throw new Error(`guarded update matched ${result.rowCount ?? 0} rows; the snapshot and the guard disagree`);
  }

  private async first<R extends object>(query: NamedQuery, values: readonly unknown[]): Promise<R | undefined> {
    return (await this.db.query<R & Record<string, unknown>>(bind(query, values))).rows[0];
  }

  private async one<R extends object>(query: NamedQuery, values: readonly unknown[]): Promise<R> {
    const row = await this.first<R>(query, values);
    if (row === undefined) throw new Error('a statement that always returns a row returned none');
    return row;
  }

  private wake(): void {
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch {
        // A listener's failure is its own; the others still need waking.
      }
    }
  }
}
