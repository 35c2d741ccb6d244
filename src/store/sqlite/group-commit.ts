/**
 * Group commit for SQLite. Write operations that arrive while the event loop
 * is busy are collected and run in one BEGIN IMMEDIATE … COMMIT, so they share
 * one fsync (synchronous=FULL). An operation that throws is rejected alone:
 * its batch is rolled back and run again with every operation in its own
 * SAVEPOINT. Promises settle only after COMMIT returns, that is, after the
 * batch is on disk.
 *
 * better-sqlite3 is synchronous, so a batch holds the event loop for its
 * duration (dominated by the fsync, ~0.5 ms here); requests that arrive
 * meanwhile wait in the socket buffers and form the next batch.
 *
 * Another process may hold the write lock. Waiting for it inside BEGIN (the
 * connection's busy timeout) would hold the event loop too, for as long as
 * the other writer takes. With `beginWithoutWaiting`, a batch that finds the
 * lock taken goes back to the head of the queue and is tried again from a
 * timer, with new operations joining it, until `lockWaitMs` has passed; only
 * then is it refused. Reads and everything else go on meanwhile.
 */

import type { Database } from 'better-sqlite3';
import { commitsObserved, reportCommit } from '../../core/commit-report.js';

export type WriteOperation<T> = (now: number) => T;

interface Pending {
  readonly run: WriteOperation<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  result: unknown;
  /** performance.now() when it was queued. */
  readonly queuedAt: number;
}

export interface GroupCommitOptions {
  readonly db: Database;
  readonly now: () => number;
  /** Turns a driver error into the error callers see (store_unavailable for I/O and lock errors). */
  readonly translateError: (error: unknown) => unknown;
  /** Decides whether an error thrown inside one operation dooms the whole transaction (disk full, I/O). */
  readonly isFatal: (error: unknown) => boolean;
  /** Called after each successful commit. */
  readonly afterCommit?: () => void;
  /**
   * What operations leave for the end of their transaction (counter-moves.ts): applied just before COMMIT, or
   * before RELEASE of each operation's savepoint when the batch runs one operation at a time; discarded as each
   * transaction begins and when a savepoint rolls back, so what a rolled-back transaction left is never applied
   * and it is written exactly when the operations' rows are.
   */
  readonly deferred?: { readonly apply: () => void; readonly discard: () => void };
  /** Upper bound on operations per transaction, to keep one batch's latency bounded. */
  readonly maxBatch?: number;
  /** Starts the write transaction, throwing at once (a busy error) when another connection holds the write lock. */
  readonly beginWithoutWaiting?: () => void;
  /** Whether an error from beginWithoutWaiting means the lock is taken. */
  readonly isBusy?: (error: unknown) => boolean;
  /** How long a batch may wait for another connection's write lock before it is refused. */
  readonly lockWaitMs?: number;
  /** The pause before the `retry`th try for the lock (from 0); by default 1, 2, 4, 8, then 16 ms. */
  readonly lockRetryDelayMs?: (retry: number) => number;
}

/** Longest pause between two tries for the write lock. */
const MAX_LOCK_RETRY_DELAY_MS = 16;

export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;
  private closed = false;
  /** A batch found the write lock taken: the queue waits for the retry timer. */
  private waitingForLock = false;
  private lockBusySince: number | undefined;
  private lockRetries = 0;
  private lockRetryTimer: NodeJS.Timeout | undefined;
  private readonly maxBatch: number;

  constructor(private readonly options: GroupCommitOptions) {
    this.maxBatch = options.maxBatch ?? 2000;
  }

  run<T>(operation: WriteOperation<T>): Promise<T> {
    if (this.closed) return Promise.reject(this.options.translateError(new Error('store is closed')));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run: operation, resolve: resolve as (value: unknown) => void, reject, result: undefined, queuedAt: performance.now() });
      if (!this.scheduled && !this.waitingForLock) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** How long the oldest operation not yet in a transaction has waited, in ms (0 with none): admission's queueing delay. */
  oldestWaitMs(): number {
    const head = this.queue[0];
    return head === undefined ? 0 : performance.now() - head.queuedAt;
  }

  /** Runs everything queued so far, waiting for the write lock in BEGIN if need be; used by close(). */
  drain(): void {
    while (this.queue.length > 0) this.flushOnce(true);
  }

  close(): void {
    clearTimeout(this.lockRetryTimer);
    this.waitingForLock = false;
    this.drain();
    this.closed = true;
  }

  private flush(): void {
    this.scheduled = false;
    if (this.closed) return;
    this.flushOnce(false);
    if (this.queue.length > 0 && !this.scheduled && !this.waitingForLock) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flushOnce(mayBlock: boolean): void {
    const batch = this.queue.length <= this.maxBatch ? this.queue : this.queue.slice(0, this.maxBatch);
    this.queue = this.queue.length <= this.maxBatch ? [] : this.queue.slice(this.maxBatch);
    if (batch.length === 0) return;
    const startedAt = commitsObserved() ? performance.now() : 0;
    // Operations throw only on a bug or a store failure, so the common case runs without savepoints;
    // a batch in which one operation throws is rolled back and run again with each operation isolated.
    let ran = this.runBatch(batch, false, mayBlock);
    if (ran === 'isolate') ran = this.runBatch(batch, true, mayBlock);
    if (startedAt > 0 && ran === 'done') reportCommit({ backend: 'sqlite', operations: batch.length, durationMs: performance.now() - startedAt });
  }

  private begin(mayBlock: boolean): void {
    const { db, beginWithoutWaiting } = this.options;
    if (mayBlock || beginWithoutWaiting === undefined) db.exec('BEGIN IMMEDIATE');
    else beginWithoutWaiting();
  }

  /** Puts the batch back at the head of the queue and tries again from a timer, while the wait is within lockWaitMs. */
  private retryForLock(batch: readonly Pending[]): boolean {
    const now = performance.now();
    this.lockBusySince ??= now;
    if (now - this.lockBusySince >= (this.options.lockWaitMs ?? 0)) {
      this.lockBusySince = undefined;
      this.lockRetries = 0;
      return false;
    }
    this.queue = [...batch, ...this.queue];
    this.waitingForLock = true;
    const retry = this.lockRetries++;
    const delay = this.options.lockRetryDelayMs?.(retry) ?? Math.min(MAX_LOCK_RETRY_DELAY_MS, 2 ** retry);
    this.lockRetryTimer = setTimeout(() => this.retryNow(), delay);
    return true;
  }

  /**
   * Another connection has just committed (its commit signal was heard), so the write lock it held is free:
   * a batch waiting for the lock tries again now rather than at its timer.
   */
  lockMayBeFree(): void {
    if (this.waitingForLock) this.retryNow();
  }

  private retryNow(): void {
    clearTimeout(this.lockRetryTimer);
    this.lockRetryTimer = undefined;
    this.waitingForLock = false;
    this.flush();
  }

  private runBatch(batch: readonly Pending[], isolate: boolean, mayBlock: boolean): 'done' | 'isolate' | 'waiting' {
    const { db } = this.options;
    const succeeded: Pending[] = [];
    try {
      this.begin(mayBlock);
    } catch (error) {
      if (!mayBlock && this.options.isBusy?.(error) === true && this.retryForLock(batch)) return 'waiting';
      const translated = this.options.translateError(error);
      for (const item of batch) item.reject(translated);
      return 'done';
    }
    this.lockBusySince = undefined;
    this.lockRetries = 0;
    const { deferred } = this.options;
    deferred?.discard();
    try {
      const now = this.options.now();
      for (const item of batch) {
        if (!isolate) {
          try {
            item.result = item.run(now);
          } catch (error) {
            if (this.options.isFatal(error)) throw error;
            db.exec('ROLLBACK');
            return 'isolate';
          }
          succeeded.push(item);
          continue;
        }
        db.exec('SAVEPOINT op');
        try {
          item.result = item.run(now);
          deferred?.apply();
          db.exec('RELEASE op');
          succeeded.push(item);
        } catch (error) {
          if (this.options.isFatal(error)) throw error;
          deferred?.discard();
          db.exec('ROLLBACK TO op');
          db.exec('RELEASE op');
          item.reject(this.options.translateError(error));
        }
      }
      if (!isolate) deferred?.apply();
      db.exec('COMMIT');
    } catch (error) {
      if (db.inTransaction) {
        try {
          db.exec('ROLLBACK');
        } catch {
          // The connection is unusable; the next BEGIN reports it.
        }
      }
      // Nothing of this batch is on disk. Rejecting an already rejected item is a no-op.
      const translated = this.options.translateError(error);
      for (const item of batch) item.reject(translated);
      return 'done';
    }
    for (const item of succeeded) item.resolve(item.result);
    this.options.afterCommit?.();
    return 'done';
  }
}
