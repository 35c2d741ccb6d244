/**
 * The calls a Worker makes, as one interface with two implementations: the
 * HTTP client (src/client/leasehold-client.ts, one request each) and a
 * library Queue's direct transport (src/queue/direct-worker.ts, on the store
 * without HTTP). Both take and answer the wire bodies of leases.ts, and both
 * refuse with the HTTP API's code and status (a LeaseholdApiError from the
 * client, a LeaseholdError from the direct transport).
 */

import type {
  CheckpointRequest,
  CompleteManyRequest,
  CompleteManyResponse,
  CompleteManyResult,
  CompleteRequest,
  CompleteResponse,
  FailRequest,
  FailResponse,
  LeaseRequest,
  LeaseResponse,
  RenewRequest,
  RenewResponse,
} from './leases.js';

export interface WorkerCallOptions {
  /** Ends the call early: a parked lease wait answers, anything else stops waiting for its answer. */
  readonly signal?: AbortSignal;
}

export interface WorkerCalls {
  /** Up to `max` jobs; a long poll of `waitMs` when none is available (then no jobs). */
  leaseResponse(request: LeaseRequest, options?: WorkerCallOptions): Promise<LeaseResponse>;
  renew(id: string, request: RenewRequest, options?: WorkerCallOptions): Promise<RenewResponse>;
  complete(id: string, request: CompleteRequest, options?: WorkerCallOptions): Promise<CompleteResponse>;
  /** Many completions in one transaction; per-item results in order. */
  completeMany(completions: CompleteManyRequest['completions'], options?: WorkerCallOptions): Promise<CompleteManyResult[]>;
  /** completeMany carrying the next lease (`request.lease`): the completions' results and the jobs leased after them. */
  completeAndLease(request: CompleteManyRequest, options?: WorkerCallOptions): Promise<CompleteManyResponse>;
  fail(id: string, request: FailRequest, options?: WorkerCallOptions): Promise<FailResponse>;
  effectStarted(id: string, token: string, options?: WorkerCallOptions): Promise<void>;
  checkpoint(id: string, request: CheckpointRequest, options?: WorkerCallOptions): Promise<void>;
}
