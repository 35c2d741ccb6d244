/**
 * The PostgreSQL Store (skeleton: the implementation lands in the following
 * commits). Exists now so the CLI can import the constructor signature.
 */

import { StoreUnavailableError } from '../../core/errors.js';
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

export interface PostgresStoreOptions {
  readonly connectionString: string;
  /** Connections in the pool (the LISTEN connection is extra). */
  readonly poolSize?: number;
  /** A schema to create (if missing) and use for every table; `public` when absent. */
  readonly schema?: string;
  /** PostgreSQL's own now() is the only clock; a Clock cannot be injected. */
  readonly clock?: never;
}

function notYet(): never {
  throw new StoreUnavailableError('the PostgreSQL store is not implemented yet');
}

export class PostgresStore implements Store {
  readonly backend = 'postgres' as const;

  private constructor(readonly options: PostgresStoreOptions) {}

  static async connect(options: PostgresStoreOptions): Promise<PostgresStore> {
    return new PostgresStore(options);
  }

  now(): Promise<number> { return notYet(); }
  ping(): Promise<void> { return notYet(); }
  async close(): Promise<void> {}
  apiKeyInsert(_params: ApiKeyInsertParams): Promise<ApiKeyRecord> { return notYet(); }
  apiKeyFindByHash(_keyHash: string): Promise<ApiKeyRecord | null> { return notYet(); }
  apiKeyRevoke(_params: { readonly id: string }): Promise<boolean> { return notYet(); }
  kindUpsert(_params: KindUpsertParams): Promise<KindRecord> { return notYet(); }
  kindGet(_params: { readonly tenant: string; readonly kind: string }): Promise<KindRecord | null> { return notYet(); }
  kindList(_params: { readonly tenant: string }): Promise<readonly KindRecord[]> { return notYet(); }
  jobEnqueue(_params: EnqueueParams): Promise<EnqueueOutcome> { return notYet(); }
  jobEnqueueMany(_params: readonly EnqueueParams[]): Promise<readonly EnqueueOutcome[]> { return notYet(); }
  jobGet(_params: JobRef): Promise<JobRecord | null> { return notYet(); }
  jobList(_params: JobListParams): Promise<JobPage> { return notYet(); }
  jobLease(_params: LeaseParams): Promise<readonly LeasedJob[]> { return notYet(); }
  jobRenew(_params: RenewParams): Promise<RenewOutcome> { return notYet(); }
  jobComplete(_params: CompleteParams): Promise<CompleteOutcome> { return notYet(); }
  jobCompleteMany(_params: readonly CompleteParams[]): Promise<readonly CompleteOutcome[]> { return notYet(); }
  jobFail(_params: FailParams): Promise<FailOutcome> { return notYet(); }
  jobCheckpoint(_params: CheckpointParams): Promise<TokenOutcome> { return notYet(); }
  jobMarkEffectStarted(_params: TokenParams): Promise<TokenOutcome> { return notYet(); }
  jobRequeue(_params: RequeueParams): Promise<RequeueOutcome> { return notYet(); }
  jobCancel(_params: JobRef): Promise<CancelOutcome> { return notYet(); }
  jobReconcile(_params: ReconcileParams): Promise<ReconcileOutcome> { return notYet(); }
  jobAttempts(_params: JobRef): Promise<readonly AttemptRecord[] | null> { return notYet(); }
  jobReapExpired(): Promise<ReapOutcome> { return notYet(); }
  stats(_params: { readonly tenant: string }): Promise<TenantStats> { return notYet(); }
  watchAvailable(_listener: () => void): () => void { return () => {}; }
}
