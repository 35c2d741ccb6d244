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
 */

import type { Database } from 'better-sqlite3';

export type WriteOperation<T> = (now: number) => T;

interface Pending {
  readonly run: WriteOperation<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  result: unknown;
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
  /** Upper bound on operations per transaction, to keep one batch's latency bounded. */
  readonly maxBatch?: number;
}

export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;
  private closed = false;
  private readonly maxBatch: number;

  constructor(private readonly options: GroupCommitOptions) {
    this.maxBatch = options.maxBatch ?? 2000;
  }

  run<T>(operation: WriteOperation<T>): Promise<T> {
    if (this.closed) return Promise.reject(this.options.translateError(new Error('store is closed')));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run: operation, resolve: resolve as (value: unknown) => void, reject, result: undefined });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Runs everything queued so far; used by close(). */
  drain(): void {
    while (this.queue.length > 0) this.flushOnce();
  }

  close(): void {
    this.drain();
    this.closed = true;
  }

  private flush(): void {
    this.scheduled = false;
    this.flushOnce();
    if (this.queue.length > 0 && !this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flushOnce(): void {
    const batch = this.queue.length <= this.maxBatch ? this.queue : this.queue.slice(0, this.maxBatch);
    this.queue = this.queue.length <= this.maxBatch ? [] : this.queue.slice(this.maxBatch);
    if (batch.length === 0) return;
    // Operations throw only on a bug or a store failure, so the common case runs without savepoints;
    // a batch in which one operation throws is rolled back and run again with each operation isolated.
    if (this.runBatch(batch, false) === 'isolate') this.runBatch(batch, true);
  }

  private runBatch(batch: readonly Pending[], isolate: boolean): 'done' | 'isolate' {
    const { db } = this.options;
    const succeeded: Pending[] = [];
    try {
      db.exec('BEGIN IMMEDIATE');
    } catch (error) {
      const translated = this.options.translateError(error);
      for (const item of batch) item.reject(translated);
      return 'done';
    }
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
          db.exec('RELEASE op');
          succeeded.push(item);
        } catch (error) {
          if (this.options.isFatal(error)) throw error;
          db.exec('ROLLBACK TO op');
          db.exec('RELEASE op');
          item.reject(this.options.translateError(error));
        }
      }
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
