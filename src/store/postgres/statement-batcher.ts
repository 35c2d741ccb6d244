/**
 * Group commit for PostgreSQL, done in the client: calls that arrive while
 * `maxInFlight` statements are already running wait, and then go together as
 * one statement (one transaction, one WAL flush) when a slot frees up. An idle
 * store sends a lone call at once, so batching adds no latency when there is
 * nothing to batch with.
 *
 * Each item's outcome is its own; a failed statement (the database being
 * unavailable) fails every call in it, and none of them changed anything.
 */

import { commitsObserved, reportCommit } from '../../core/commit-report.js';

interface Waiting<I, O> {
  readonly item: I;
  readonly resolve: (value: O) => void;
  readonly reject: (error: unknown) => void;
  /** performance.now() when it was submitted. */
  readonly submittedAt: number;
}

export class StatementBatcher<I, O> {
  private readonly queue: Waiting<I, O>[] = [];
  private inFlight = 0;

  constructor(
    /** Runs one batch; must return one outcome per item, in order. */
    private readonly run: (items: readonly I[]) => Promise<readonly O[]>,
    private readonly maxInFlight: number,
    private readonly maxBatch: number,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject, submittedAt: performance.now() });
      this.pump();
    });
  }

  /** How long the oldest call not yet sent has waited, in ms (0 with none). */
  oldestWaitMs(): number {
    const head = this.queue[0];
    return head === undefined ? 0 : performance.now() - head.submittedAt;
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      const startedAt = commitsObserved() ? performance.now() : 0;
      this.run(batch.map((w) => w.item))
        .then(
          (outcomes) => {
            if (startedAt > 0) reportCommit({ backend: 'postgres', operations: batch.length, durationMs: performance.now() - startedAt });
            batch.forEach((waiting, i) => {
              const outcome = outcomes[i];
              if (outcome === undefined) waiting.reject(new Error('a batched statement returned too few outcomes'));
              else waiting.resolve(outcome);
            });
          },
          (error: unknown) => {
            for (const waiting of batch) waiting.reject(error);
          },
        )
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }
}
