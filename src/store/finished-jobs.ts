/**
 * Which jobs a write moved to an end state (succeeded, dead, cancelled,
 * unknown), read from the outcomes the store returns, and the listeners that
 * hear of them (Store.watchFinished). Both backends call these after their
 * transaction has committed, so a listener that reads the job sees the end
 * state. A null notification means "some jobs may have finished": the
 * reaper's batches and other processes' commits do not say which.
 */

import type {
  CancelOutcome,
  CompleteOutcome,
  CompleteParams,
  FailOutcome,
  FinishedJob,
  FinishedListener,
  JobRef,
  ReapOutcome,
  ReconcileOutcome,
} from './store.js';

export function finishedByCompletion(params: readonly CompleteParams[], outcomes: readonly CompleteOutcome[]): FinishedJob[] {
  const finished: FinishedJob[] = [];
  outcomes.forEach((outcome, index) => {
    const p = params[index];
    if (p === undefined) return;
    if ((outcome.kind === 'completed' && !outcome.replayed) || outcome.kind === 'result_too_large') finished.push({ tenant: p.tenant, id: p.id });
  });
  return finished;
}

export function finishedByFailure(params: { readonly tenant: string; readonly id: string }, outcome: FailOutcome): FinishedJob[] {
  return outcome.kind === 'failed' && !outcome.replayed && outcome.status !== 'queued' ? [{ tenant: params.tenant, id: params.id }] : [];
}

export function finishedByOperator(params: JobRef, outcome: CancelOutcome | ReconcileOutcome): FinishedJob[] {
  if (outcome.kind === 'cancelled' || (outcome.kind === 'reconciled' && outcome.job.status !== 'queued' && outcome.job.status !== 'waiting')) {
    return [{ tenant: params.scope.tenant, id: params.id }];
  }
  return [];
}

/** True when a reaper pass ended some jobs (it does not say which). */
export function reapFinishedSome(counts: ReapOutcome): boolean {
  return counts.dead + counts.unknown + counts.cancelled + counts.deadlineExpired > 0;
}

export class FinishedListeners {
  private readonly listeners = new Set<FinishedListener>();

  get size(): number {
    return this.listeners.size;
  }

  add(listener: FinishedListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** A list of jobs, or null for "some jobs may have finished". */
  emit(jobs: readonly FinishedJob[] | null): void {
    if (jobs !== null && jobs.length === 0) return;
    for (const listener of [...this.listeners]) {
      try {
        if (jobs === null) listener(null);
        else for (const job of jobs) listener(job);
      } catch {
        // A listener's failure is its own; the others still hear.
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }
}
