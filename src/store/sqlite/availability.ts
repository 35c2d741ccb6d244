/**
 * Who hears that jobs became available or finished (Store.watchAvailable,
 * Store.watchFinished). Writes of this process announce themselves; commits
 * by other processes on the same file are noticed through PRAGMA
 * data_version, which changes only when another connection committed and
 * says nothing of what, so every waiter is told to look (null).
 *
 * When to read data_version: every store that shares its file with other
 * processes writes one byte to the commit signal file (`<db>-signal`) right
 * after each commit, and a file watch (inotify on Linux) on it reads
 * data_version at once: the commit is visible by then, so one read suffices.
 * Commits by connections that are not stores (an application's own handle)
 * do not signal; they append frames to the `-wal` file, which is watched too.
 * Those writes come just before their commit is visible (its fsync and the
 * WAL index update follow), so a write starts reads 1 ms apart for 20 ms,
 * then 10 ms apart until half a second after the last write: a loaded disk
 * can hold an fsync longer than the short burst, and the commit would then
 * be heard only at the slow timer. An idle file costs nothing; a slow timer
 * (pollMs) remains as the safety net for file systems where no watch hears.
 */

import { closeSync, openSync, watch, writeSync, type FSWatcher } from 'node:fs';
import type { Availability, AvailabilityListener, FinishedJob, FinishedListener } from '../store.js';
import { FinishedListeners } from '../finished-jobs.js';

/** How long after a write to the -wal file data_version is read every millisecond: longer than most commits' fsync. */
const WRITE_BURST_MS = 20;
/** How long after a write data_version is still read, WRITE_TAIL_TICK_MS apart: longer than a slow disk's fsync. */
const WRITE_TAIL_MS = 500;
const WRITE_TAIL_TICK_MS = 10;

/** The files beside a database that other processes' commits are heard through. */
export interface SharedFiles {
  /** The `-wal` file: written by every connection's commit, just before the commit is visible. */
  readonly wal: string;
  /** The commit signal file: written by stores right after their commits (CommitSignal). */
  readonly signal: string;
}

export function sharedFilesOf(databasePath: string): SharedFiles {
  return { wal: `${databasePath}-wal`, signal: `${databasePath}-signal` };
}

const SIGNAL_BYTE = Buffer.from([1]);

/** A watch on one file, or null where there is none (no such file yet, or no watch on this file system): the poll alone then. */
function watchFile(path: string, onChange: () => void): FSWatcher | null {
  try {
    const fileWatch = watch(path, { persistent: false }, onChange);
    // The file went away (journal mode changed, the database deleted): the safety poll carries on.
    fileWatch.on('error', () => fileWatch.close());
    return fileWatch;
  } catch {
    return null;
  }
}

/**
 * The writing side of the commit signal: one byte written at offset 0 of `<db>-signal` after each commit,
 * which every watching process's inotify hears. About one system call per commit; the file stays one byte.
 */
export class CommitSignal {
  private fd: number | null;

  constructor(private readonly path: string) {
    try {
      this.fd = openSync(path, 'w');
    } catch {
      // A directory this process may not write in: the others hear the -wal file instead.
      this.fd = null;
    }
  }

  send(): void {
    if (this.fd === null) return;
    try {
      writeSync(this.fd, SIGNAL_BYTE, 0, 1, 0);
    } catch {
      // A full or failing disk shows in the next commit; the signal only saves the watchers a millisecond.
    }
  }

  /**
   * Calls `listener` at each signal of any store on the file, this one's included (the group commit's
   * wait for the write lock: the lock is free right after a commit). Returns the function that stops it.
   */
  hear(listener: () => void): () => void {
    const fileWatch = watchFile(this.path, listener);
    return () => fileWatch?.close();
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

export class Watchers {
  private readonly available = new Set<AvailabilityListener>();
  private readonly finished = new FinishedListeners();
  private dataVersion = 0;
  private pollTimer: NodeJS.Timeout | null = null;
  private fileWatch: FSWatcher | null = null;
  private signalWatch: FSWatcher | null = null;
  private burstTimer: NodeJS.Timeout | null = null;
  /** performance.now() of the last write to the -wal file heard, and the delay of the read the burst has scheduled. */
  private lastWriteAt = Number.NEGATIVE_INFINITY;
  private burstTickMs = 0;
  private closed = false;

  constructor(
    private readonly readDataVersion: () => number,
    private readonly pollMs: number,
    /** The database's `-wal` and signal files, watched for other processes' commits; null for none (an in-memory database). */
    private readonly files: SharedFiles | null = null,
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
    this.startFileWatch();
  }

  private startFileWatch(): void {
    if (this.files === null) return;
    this.fileWatch = watchFile(this.files.wal, () => this.startBurst());
    this.signalWatch = watchFile(this.files.signal, () => this.noticeOtherCommits());
  }

  private stopFileWatch(): void {
    this.fileWatch?.close();
    this.fileWatch = null;
    this.signalWatch?.close();
    this.signalWatch = null;
    if (this.burstTimer !== null) clearTimeout(this.burstTimer);
    this.burstTimer = null;
  }

  private startBurst(): void {
    this.lastWriteAt = performance.now();
    if (this.burstTimer === null) this.burstTick();
    else if (this.burstTickMs !== 1) {
      // A new write during the tail: back to reads 1 ms apart.
      clearTimeout(this.burstTimer);
      this.burstTick();
    }
  }

  private burstTick(): void {
    this.burstTimer = null;
    this.noticeOtherCommits();
    const sinceWrite = performance.now() - this.lastWriteAt;
    if (this.pollTimer !== null && sinceWrite < WRITE_TAIL_MS) {
      this.burstTickMs = sinceWrite < WRITE_BURST_MS ? 1 : WRITE_TAIL_TICK_MS;
      this.burstTimer = setTimeout(() => this.burstTick(), this.burstTickMs);
      this.burstTimer.unref();
    }
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
    this.stopFileWatch();
  }

  private version(): number {
    try {
      return this.readDataVersion();
    } catch {
      return this.dataVersion;
    }
  }
}
