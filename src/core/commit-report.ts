/**
 * Group-commit observations: each backend's batcher reports how many
 * operations one commit carried and how long it took, and whoever listens
 * (the coordinator's metrics) counts them. A process-wide list, because the
 * batchers are built deep inside a store and know nothing of the app that
 * uses it; with no listener a report costs one size check.
 */

export interface CommitReport {
  readonly backend: 'sqlite' | 'postgres';
  /** Operations (SQLite) or batched calls (PostgreSQL) the commit carried. */
  readonly operations: number;
  readonly durationMs: number;
}

const listeners = new Set<(report: CommitReport) => void>();

/** Calls `listener` after every group commit in this process; returns an unsubscribe. */
export function onCommit(listener: (report: CommitReport) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function reportCommit(report: CommitReport): void {
  if (listeners.size === 0) return;
  for (const listener of listeners) listener(report);
}

/** Whether anyone listens, so a batcher can skip reading the clock. */
export function commitsObserved(): boolean {
  return listeners.size > 0;
}
