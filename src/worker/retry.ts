/**
 * Retrying coordinator calls: lost connections, 503s, and a proxy's 502 or
 * 504 in front of the coordinators (a load balancer whose backend died or
 * timed out; the coordinator itself never answers either). A lost connection
 * or a gateway error may come after the coordinator acted, which is safe:
 * every worker call is idempotent under its token, and a lease whose answer
 * was lost comes back when it expires. Delays grow
 * exponentially with full jitter (so many workers cut off together do not
 * come back together) and respect the coordinator's Retry-After. A call tied to
 * a lease stops once the lease has surely run out: after that the coordinator
 * would refuse it anyway.
 */

import { isRetryableError } from '../client/errors.js';
import { backoffDelayMs, type BackoffPolicy } from '../core/backoff.js';
import type { Clock } from '../core/clock.js';
import { refusalOf } from './refusal.js';

export type RetryPolicy = BackoffPolicy;

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({ baseMs: 100, maxMs: 5_000 });

/** The doublings of a call's retry delay (a job's own retries allow more, core/backoff.ts). */
const RETRY_DOUBLINGS = 20;

export interface RetryOptions {
  readonly policy: RetryPolicy;
  readonly clock: Clock;
  readonly random: () => number;
  /** No attempt starts at or after this time (clock ms); the last error is thrown instead. */
  readonly giveUpAt?: () => number;
  /** Aborts the wait between attempts (and is passed to the call). */
  readonly signal?: AbortSignal;
  readonly onRetry?: (error: unknown, delayMs: number, attempt: number) => void;
  /** The wait between attempts; tests pass one that moves a manual clock instead of a timer. */
  readonly sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

export async function withRetry<T>(call: (signal: AbortSignal | undefined) => Promise<T>, options: RetryOptions): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call(options.signal);
    } catch (error) {
      if (!isWorthRetrying(error) || options.signal?.aborted === true) throw error;
      let delay = backoffDelayMs(attempt, options.policy, options.random, RETRY_DOUBLINGS);
      const retryAfterSeconds = refusalOf(error)?.retryAfterSeconds;
      if (retryAfterSeconds !== undefined) delay = Math.max(delay, retryAfterSeconds * 1000);
      if (options.giveUpAt !== undefined && options.clock.now() + delay >= options.giveUpAt()) throw error;
      options.onRetry?.(error, delay, attempt);
      await (options.sleep ?? sleep)(delay, options.signal);
    }
  }
}

/** Gateway answers carry no coordinator error body, so their code is the client's `http_<status>`. */
const GATEWAY_STATUSES = new Set([502, 504]);

/** Lost connections, 503s (over HTTP or from the store in process: store_unavailable, overloaded) and gateway errors. */
export function isWorthRetrying(error: unknown): boolean {
  if (isRetryableError(error)) return true;
  const status = refusalOf(error)?.status;
  return status !== undefined && (status === 503 || GATEWAY_STATUSES.has(status));
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
