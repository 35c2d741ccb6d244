/**
 * The SQLite store as `serve` runs it: the connection lives on a thread of its
 * own (store-thread.ts) and this class forwards each Store call to it.
 *
 * Why: better-sqlite3 is synchronous, so on the HTTP thread every group
 * commit held the event loop for its SQL and its fsync (about half of the
 * coordinator's time under load). On its own thread the commit runs beside
 * the parsing and answering of the next requests, which then form the next
 * batch. Durability is unchanged: a call's promise settles only after the
 * thread's commit returned.
 *
 * Calls made in one turn of the event loop travel in one message and come
 * back in one message per commit. Only the system clock is supported (the
 * thread reads the same clock); tests that move time use SqliteStore directly.
 */

import { Worker } from 'node:worker_threads';
import { systemClock } from '../../core/clock.js';
import { StoreUnavailableError } from '../../core/errors.js';
import type { Store } from '../store.js';
import type { SqliteStoreOptions } from './sqlite-store.js';
import { deserializeError, type FromStoreThread, type StoreCall, type ToStoreThread } from './thread-protocol.js';

export type ThreadedSqliteStoreOptions = Omit<SqliteStoreOptions, 'clock'>;

interface PendingCall {
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** Compiled code runs the compiled thread beside it; under a TypeScript test runner the thread comes from dist/. */
function threadUrl(): URL {
  const here = import.meta.url;
  return here.endsWith('.ts') ? new URL('../../../dist/src/store/sqlite/store-thread.js', here) : new URL('./store-thread.js', here);
}

type Forwarded = Exclude<keyof Store, 'backend' | 'now' | 'close' | 'watchAvailable'>;

export class ThreadedSqliteStore implements Store {
  readonly backend = 'sqlite' as const;
  private nextId = 1;
  private readonly pending = new Map<number, PendingCall>();
  private outbox: StoreCall[] = [];
  private flushScheduled = false;
  private readonly listeners = new Set<() => void>();
  /** Set once the thread is gone or closing: every later call fails as unavailable. */
  private failure: Error | null = null;
  private closing: Promise<void> | null = null;
  private readonly exited: Promise<void>;

  private constructor(private readonly thread: Worker) {
    thread.on('message', (message: FromStoreThread) => this.receive(message));
    thread.on('error', (error) => this.fail(new StoreUnavailableError('the store thread failed', error)));
    this.exited = new Promise((resolve) => {
      thread.once('exit', () => {
        this.fail(new StoreUnavailableError('the job store is closed'));
        resolve();
      });
    });
  }

  static async open(options: ThreadedSqliteStoreOptions): Promise<ThreadedSqliteStore> {
    const thread = new Worker(threadUrl(), { workerData: options });
    await new Promise<void>((resolve, reject) => {
      const onMessage = (message: FromStoreThread): void => {
        if (message.type === 'opened') {
          cleanup();
          resolve();
        } else if (message.type === 'open-failed') {
          cleanup();
          reject(deserializeError(message.error));
        }
      };
      const onError = (error: unknown): void => {
        cleanup();
        reject(new StoreUnavailableError('the store thread failed to start', error));
      };
      const onExit = (): void => {
        cleanup();
        reject(new StoreUnavailableError('the store thread exited while opening'));
      };
      const cleanup = (): void => {
        thread.off('message', onMessage);
        thread.off('error', onError);
        thread.off('exit', onExit);
      };
      thread.on('message', onMessage);
      thread.on('error', onError);
      thread.on('exit', onExit);
    }).catch(async (error: unknown) => {
      // The thread ends by itself after a failed open; terminate covers one that hangs.
      await thread.terminate();
      throw error;
    });
    return new ThreadedSqliteStore(thread);
  }

  async now(): Promise<number> {
    return systemClock.now();
  }

  close(): Promise<void> {
    if (this.closing === null) {
      this.flush();
      this.post({ type: 'close' });
      this.closing = this.exited;
    }
    return this.closing;
  }

  watchAvailable(listener: () => void): () => void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) this.post({ type: 'watch', on: true });
    return () => {
      if (!this.listeners.delete(listener)) return;
      if (this.listeners.size === 0) this.post({ type: 'watch', on: false });
    };
  }

  ping = this.forward('ping');
  apiKeyInsert = this.forward('apiKeyInsert');
  apiKeyFindByHash = this.forward('apiKeyFindByHash');
  apiKeyRevoke = this.forward('apiKeyRevoke');
  kindUpsert = this.forward('kindUpsert');
  kindGet = this.forward('kindGet');
  kindList = this.forward('kindList');
  jobEnqueue = this.forward('jobEnqueue');
  jobEnqueueMany = this.forward('jobEnqueueMany');
  jobGet = this.forward('jobGet');
  jobList = this.forward('jobList');
  jobLease = this.forward('jobLease');
  jobRenew = this.forward('jobRenew');
  jobComplete = this.forward('jobComplete');
  jobCompleteMany = this.forward('jobCompleteMany');
  jobFail = this.forward('jobFail');
  jobCheckpoint = this.forward('jobCheckpoint');
  jobMarkEffectStarted = this.forward('jobMarkEffectStarted');
  jobRequeue = this.forward('jobRequeue');
  jobCancel = this.forward('jobCancel');
  jobReconcile = this.forward('jobReconcile');
  jobAttempts = this.forward('jobAttempts');
  jobReapExpired = this.forward('jobReapExpired');
  stats = this.forward('stats');

  private forward<M extends Forwarded>(method: M): Store[M] {
    const call = (...args: unknown[]): Promise<unknown> => this.call(method, args);
    return call as unknown as Store[M];
  }

  private call(method: string, args: readonly unknown[]): Promise<unknown> {
    if (this.failure !== null) return Promise.reject(this.failure);
    if (this.closing !== null) return Promise.reject(new StoreUnavailableError('the job store is closed'));
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      this.outbox.push({ id, method, args });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // After the I/O phase: every request parsed in this turn joins the same message and commit.
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.outbox.length === 0) return;
    const calls = this.outbox;
    this.outbox = [];
    this.post({ type: 'calls', calls });
  }

  private post(message: ToStoreThread): void {
    if (this.failure !== null) return;
    try {
      this.thread.postMessage(message);
    } catch (error) {
      this.fail(new StoreUnavailableError('the store thread cannot be reached', error));
    }
  }

  private receive(message: FromStoreThread): void {
    switch (message.type) {
      case 'replies':
        for (const reply of message.replies) {
          const waiting = this.pending.get(reply.id);
          if (waiting === undefined) continue;
          this.pending.delete(reply.id);
          if (reply.ok) waiting.resolve(restoreResultBuffers(reply.value));
          else waiting.reject(deserializeError(reply.error));
        }
        break;
      case 'available':
        for (const listener of this.listeners) listener();
        break;
      default:
        break;
    }
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const waiting of this.pending.values()) waiting.reject(this.failure);
    this.pending.clear();
    this.outbox = [];
  }
}

/**
 * A Buffer crosses a thread as a plain Uint8Array; the only Buffers in store
 * answers are job results (`job.result.body`), in a JobRecord, a page of them
 * or an outcome that carries one. Payloads are JSON and are not walked.
 */
function restoreResultBuffers(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (const item of value) restoreResultBuffers(item);
    return value;
  }
  const record = value as { result?: unknown; job?: unknown; jobs?: unknown };
  const result = record.result as { body?: unknown } | null | undefined;
  if (result !== null && typeof result === 'object' && result.body instanceof Uint8Array && !Buffer.isBuffer(result.body)) {
    result.body = Buffer.from(result.body.buffer, result.body.byteOffset, result.body.byteLength);
  }
  if (record.job !== undefined) restoreResultBuffers(record.job);
  if (Array.isArray(record.jobs)) restoreResultBuffers(record.jobs);
  return value;
}
