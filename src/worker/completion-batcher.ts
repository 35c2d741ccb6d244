/**
 * Coalesces completions. Handlers that finish close together (in the same
 * turn of the event loop, or while 100 are waiting) are sent in one
 * `POST /complete`, which the coordinator commits in one transaction: one
 * request and one fsync for many jobs instead of one each. This is the main
 * reason a worker can finish thousands of short jobs a second.
 *
 * Each item keeps its own lease horizon: a retried batch drops the items
 * whose lease has surely run out, and items whose job was aborted before the
 * request left are withdrawn (a worker does not complete a job it lost).
 */

import { LIMITS } from '../protocol/limits.js';
import type { CarriedLease, CompleteManyResult, LeasedJob, ResultBytes } from '../protocol/schemas.js';
import type { WorkerCalls } from '../protocol/worker-calls.js';
import { refusalOf } from './refusal.js';
import { withRetry, type RetryOptions } from './retry.js';
import { errorFields, type WorkerLogger } from './logger.js';

export interface CompletionItem {
  readonly id: string;
  readonly token: string;
  /** JSON result; undefined for none. */
  readonly result: unknown;
  /** A non-JSON result instead of `result`. */
  readonly resultBytes?: ResultBytes;
  /** True once the job's signal was aborted: the completion must not be sent. */
  readonly isLost: () => boolean;
  /** The local estimate of when the lease surely ends (clock ms). */
  readonly giveUpAt: () => number;
}

export type CompletionOutcome =
  | { readonly kind: 'completed' }
  | { readonly kind: 'rejected'; readonly code: string }
  | { readonly kind: 'withdrawn' }
  | { readonly kind: 'error'; readonly error: unknown };

interface Pending extends CompletionItem {
  readonly settle: (outcome: CompletionOutcome) => void;
}

/**
 * The worker's next lease, carried by a batch of completions (`POST /complete` with `lease`): one round trip
 * instead of two whenever handlers finish and free their slots together.
 */
export interface LeaseRider {
  /** The lease to carry with the batch being sent, or null (none wanted now). */
  take(): CarriedLease | null;
  /** Called once for each lease take() gave: the jobs it brought (none when it could not be carried) and when it was sent. */
  answered(jobs: readonly LeasedJob[], sentAt: number): void;
}

export interface CompletionBatcherOptions {
  readonly retry: Omit<RetryOptions, 'giveUpAt' | 'signal'>;
  readonly logger: WorkerLogger;
  /** Send at once when this many are waiting. Default 100. */
  readonly flushAt?: number;
  readonly rider?: LeaseRider;
}

class LeaseGoneError extends Error {
  constructor() {
    super('every lease in the batch ran out while the coordinator was unreachable');
    this.name = 'LeaseGoneError';
  }
}

export class CompletionBatcher {
  private pending: Pending[] = [];
  private scheduled = false;
  private readonly inFlight = new Set<Promise<void>>();
  private inFlightItems = 0;
  private readonly flushAt: number;
  /** False once a coordinator refused a carried lease (one that predates it): completions then go alone. */
  private carryLeases = true;

  constructor(
    private readonly client: WorkerCalls,
    private readonly options: CompletionBatcherOptions,
  ) {
    this.flushAt = options.flushAt ?? 100;
  }

  /** Completions accepted but not yet answered. */
  get size(): number {
    return this.pending.length + this.inFlightItems;
  }

  /** Completions accepted and not yet sent: a flush is due, and it will offer to carry a lease. */
  get unsent(): number {
    return this.pending.length;
  }

  submit(item: CompletionItem): Promise<CompletionOutcome> {
    return new Promise((settle) => {
      this.pending.push({ ...item, settle });
      if (this.pending.length >= this.flushAt) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Sends everything waiting and resolves when every request was answered (or given up). */
  async drain(): Promise<void> {
    this.flush();
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  private flush(): void {
    this.scheduled = false;
    let offered = false;
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, LIMITS.maxCompleteBatch);
      const lease = !offered && this.carryLeases ? (this.options.rider?.take() ?? null) : null;
      offered = true;
      this.inFlightItems += batch.length;
      const sending = this.send(batch, lease).finally(() => {
        this.inFlightItems -= batch.length;
        this.inFlight.delete(sending);
      });
      this.inFlight.add(sending);
    }
  }

  private async send(batch: Pending[], lease: CarriedLease | null): Promise<void> {
    let live = batch;
    const prune = (): void => {
      const now = this.options.retry.clock.now();
      live = live.filter((item) => {
        if (item.isLost()) item.settle({ kind: 'withdrawn' });
        else if (now >= item.giveUpAt()) item.settle({ kind: 'error', error: new LeaseGoneError() });
        else return true;
        return false;
      });
    };
    try {
      const carried = lease === null ? undefined : await this.sendCarrying(live, lease);
      const results =
        carried ??
        (await withRetry<CompleteManyResult[]>(
          () => {
            prune();
            if (live.length === 0) return Promise.reject(new LeaseGoneError());
            return this.client.completeMany(live.map(wireCompletion));
          },
          { ...this.options.retry, giveUpAt: () => Math.max(...live.map((item) => item.giveUpAt())) },
        ));
      const byId = new Map(results.map((result) => [result.id, result]));
      for (const item of live) {
        const result = byId.get(item.id);
        if (result === undefined) item.settle({ kind: 'error', error: new Error('the coordinator answered without this job') });
        else if (result.code === undefined && result.status === 'succeeded') item.settle({ kind: 'completed' });
        else item.settle({ kind: 'rejected', code: result.code ?? result.status });
      }
    } catch (error) {
      if (error instanceof LeaseGoneError) return;
      const status = refusalOf(error)?.status;
      if (status !== undefined && status < 500 && live.length > 1) {
        // One bad item (an oversized result, say) must not sink the others: send each alone.
        this.options.logger.warn({ ...errorFields(error), jobs: live.length }, 'batch completion refused; completing one by one');
        await Promise.all(live.map((item) => this.sendOne(item)));
        return;
      }
      for (const item of live) item.settle({ kind: 'error', error });
    }
  }

  /**
   * One try of the batch with the lease: its results, or undefined when it failed (the batch then goes
   * through the retried path alone; its completions may have committed, and completing again answers the
   * same). The rider hears what the lease brought either way; leases of a try that failed in transit
   * return to the queue when they expire, as after any lost lease answer.
   */
  private async sendCarrying(live: Pending[], lease: CarriedLease): Promise<CompleteManyResult[] | undefined> {
    const sentAt = this.options.retry.clock.now();
    const rider = this.options.rider;
    try {
      const answer = await this.client.completeAndLease({ completions: live.map(wireCompletion), lease });
      rider?.answered(answer.jobs ?? [], sentAt);
      return answer.results;
    } catch (error) {
      rider?.answered([], sentAt);
      if (refusalOf(error)?.status === 400) {
        this.carryLeases = false;
        this.options.logger.warn({ ...errorFields(error) }, 'the coordinator does not take a lease with completions; sending them alone');
      }
      return undefined;
    }
  }

  private async sendOne(item: Pending): Promise<void> {
    try {
      const answer = await withRetry(() => this.client.complete(item.id, wireCompletion(item)), { ...this.options.retry, giveUpAt: item.giveUpAt });
      item.settle(answer.status === 'succeeded' ? { kind: 'completed' } : { kind: 'rejected', code: answer.status });
    } catch (error) {
      const refusal = refusalOf(error);
      if (refusal?.status === 409) item.settle({ kind: 'rejected', code: refusal.code });
      else item.settle({ kind: 'error', error });
    }
  }
}

function wireCompletion(item: CompletionItem): { id: string; token: string; result?: unknown; resultBytes?: ResultBytes } {
  if (item.resultBytes !== undefined) return { id: item.id, token: item.token, resultBytes: item.resultBytes };
  return item.result === undefined ? { id: item.id, token: item.token } : { id: item.id, token: item.token, result: item.result };
}
