/**
 * The messages between ThreadedSqliteStore and its store thread. Errors cross
 * the boundary as plain data: a LeaseholdError keeps its code (so a store
 * that is unavailable still answers 503 store_unavailable), anything else
 * becomes a plain Error with its message, which the coordinator treats as a
 * bug (logged, generic 500).
 */

import { isErrorCode, LeaseholdError, StoreUnavailableError, type ErrorCode } from '../../core/errors.js';

export interface StoreCall {
  readonly id: number;
  readonly method: string;
  readonly args: readonly unknown[];
}

export type SerializedError =
  | { readonly kind: 'leasehold'; readonly code: ErrorCode; readonly message: string; readonly retryAfterSeconds?: number }
  | { readonly kind: 'error'; readonly name: string; readonly message: string; readonly stack?: string };

export type StoreReply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: SerializedError };

export type ToStoreThread =
  | { readonly type: 'calls'; readonly calls: readonly StoreCall[] }
  | { readonly type: 'watch'; readonly on: boolean }
  | { readonly type: 'close' };

export type FromStoreThread =
  | { readonly type: 'opened' }
  | { readonly type: 'open-failed'; readonly error: SerializedError }
  | { readonly type: 'replies'; readonly replies: readonly StoreReply[] }
  | { readonly type: 'available' }
  | { readonly type: 'closed'; readonly error?: SerializedError };

export function serializeError(error: unknown): SerializedError {
  if (error instanceof LeaseholdError) {
    return {
      kind: 'leasehold',
      code: error.code,
      message: error.message,
      ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
    };
  }
  if (error instanceof Error) return { kind: 'error', name: error.name, message: error.message, ...(error.stack === undefined ? {} : { stack: error.stack }) };
  return { kind: 'error', name: 'Error', message: String(error) };
}

export function deserializeError(error: SerializedError): Error {
  if (error.kind === 'leasehold') {
    if (error.code === 'store_unavailable') return new StoreUnavailableError(error.message);
    const code = isErrorCode(error.code) ? error.code : 'internal_error';
    return new LeaseholdError(code, error.message, error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds });
  }
  const rebuilt = new Error(error.message);
  rebuilt.name = error.name;
  // The thread's stack says where the bug is; it is logged by the coordinator, never sent to a client.
  if (error.stack !== undefined) rebuilt.stack = error.stack;
  return rebuilt;
}
