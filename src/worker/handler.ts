/**
 * What a job handler sees. A handler is an async function of one context; it
 * returns the job's result (any JSON value; a BinaryResult or Buffer for bytes;
 * undefined for none) or throws to fail the attempt. The context carries the fencing epoch so that an external
 * system can refuse a writer whose lease was taken over, and an AbortSignal
 * that fires when this worker may no longer finish the job.
 */

import type { Checkpoint } from '../store/store.js';

export interface JobContext<Payload = unknown> {
  readonly id: string;
  readonly kind: string;
  /** The group it was enqueued with (docs/FAIRNESS.md), null without one. */
  readonly group: string | null;
  readonly payload: Payload;
  /** 1-based number of this attempt. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /**
   * The fencing epoch of this lease. It grows with every lease of the job, so a
   * downstream system that remembers the highest epoch it accepted can reject
   * a write from a worker that lost its lease (`WHERE fence < $epoch`).
   */
  readonly fence: number;
  readonly workerId: string;
  /**
   * Aborted when the lease is lost (renewal answered 409 or could not reach
   * the coordinator before the lease ran out), the job was cancelled or
   * passed its deadline, or a shutdown's grace period ended. After an abort
   * the worker does not complete the job: the lease decides. After a cancel
   * (`signal.reason.code === 'cancelled'`) it fails the job with its still
   * live token, so the job is `cancelled` at once.
   */
  readonly signal: AbortSignal;
  /** The job's overall deadline, or null. */
  readonly deadlineAt: Date | null;
  /** The last checkpoint stored by an earlier attempt (or this one), or null. */
  readonly checkpoint: Checkpoint | null;
  /** Durably stores `{step, state}` under this lease; the next attempt starts from it. */
  saveCheckpoint(step: number, state: unknown): Promise<void>;
  /**
   * Declares that an external side effect the queue cannot fence is about to
   * happen. If this lease is then lost, the job becomes `unknown` instead of
   * being retried. Resolves once the coordinator recorded it.
   */
  effectStarted(): Promise<void>;
  /** A small JSON progress value (e.g. `{done, total}`), sent with the next lease renewal. */
  progress(value: unknown): void;
}

export type Handler<Payload = unknown> = (context: JobContext<Payload>) => unknown;

/** Handlers by job kind. The worker leases only these kinds. */
export type HandlerMap = Readonly<Record<string, Handler<never>>>;
