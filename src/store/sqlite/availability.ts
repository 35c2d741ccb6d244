/**
 * Who hears that jobs became available or finished (Store.watchAvailable,
 * Store.watchFinished). Writes of this process announce themselves; commits
 * by other processes on the same file are noticed through PRAGMA
 * data_version, polled while anyone watches. data_version changes only when
 * another connection committed and says nothing of what, so every waiter is
 * told to look (null).
 */

import type { Availability, AvailabilityListener, FinishedJob, FinishedListener } from '../store.js';
import { FinishedListeners } from '../finished-jobs.js';

export class Watchers {
  private readonly available = new Set<AvailabilityListener>();
  private readonly finished = new FinishedListeners();
  private dataVersion = 0;
  private pollTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly readDataVersion: () => number,
    private readonly pollMs: number,
  ) {}

  watchAvailable(listener: AvailabilityListener): () => void {
    this.available.add(listener);
    this.startPolling();
    return () => {
      this.available.delete(listener);
      this.stopPollingIfIdle();
    };
  }

  watchFinished(listener: FinishedListener): () => void {
    const remove = this.finished.add(listener);
    // Another process's commit is seen through data_version, which says nothing about which jobs changed.
    this.startPolling();
    return () => {
      remove();
      this.stopPollingIfIdle();
    };
  }

  announceAvailable(job: Availability | null): void {
    for (const listener of this.available) listener(job);
  }

  announceFinished(jobs: readonly FinishedJob[] | null): void {
    this.finished.emit(jobs);
  }

  close(): void {
    this.closed = true;
    this.stopPolling();
    this.available.clear();
    this.finished.clear();
  }

  private startPolling(): void {
    if (this.pollTimer !== null || this.closed) return;
    this.dataVersion = this.version();
    this.pollTimer = setInterval(() => this.noticeOtherCommits(), this.pollMs);
    this.pollTimer.unref();
  }

  /**
   * Wakes the watchers if another connection committed since the last look: called by the poll timer,
   * and right after an application's own transaction that enqueued (so its job wakes a worker at once).
   */
  noticeOtherCommits(): void {
    if (this.pollTimer === null) return;
    const version = this.version();
    if (version !== this.dataVersion) {
      this.dataVersion = version;
      this.announceAvailable(null);
      this.finished.emit(null);
    }
  }

  private stopPollingIfIdle(): void {
    if (this.available.size === 0 && this.finished.size === 0) this.stopPolling();
  }

  private stopPolling(): void {
    if (this.pollTimer !== null) clearInterval(this.pollTimer);
    this.pollTimer = null;
  }

  private version(): number {
    try {
      return this.readDataVersion();
    } catch {
      return this.dataVersion;
    }
  }
}
