/**
 * Parked `GET /jobs/{id}?waitMs=N` requests. A wait ends when the store says
 * its job finished (Store.watchFinished: a completion here, or on another
 * coordinator through PostgreSQL NOTIFY) and a fresh read shows an end state,
 * when its time passes, when the client goes away, or when the coordinator
 * closes. Nothing reads the store on a timer: a wait costs one read when it
 * parks, one per notification that names its job (or says "look again"), and
 * one when it times out.
 *
 * Each tenant may park at most `maxPerTenant` waits; one more answers
 * 503 overloaded with Retry-After: 1, so one tenant cannot hold the
 * coordinator's sockets and memory.
 */

import { LeaseholdError } from '../core/errors.js';
import type { FinishedJob, Store } from '../store/store.js';

export type FinishWaitResult = 'finished' | 'timeout' | 'aborted';

interface Parked {
  readonly tenant: string;
  readonly check: () => void;
  readonly settle: (result: FinishWaitResult) => void;
}

export class FinishWaiters {
  private readonly byJob = new Map<string, Set<Parked>>();
  private readonly perTenant = new Map<string, number>();
  private unwatch: (() => void) | null = null;
  private closed = false;

  constructor(
    private readonly store: Store,
    readonly maxPerTenant: number,
  ) {}

  get size(): number {
    let total = 0;
    for (const set of this.byJob.values()) total += set.size;
    return total;
  }

  /**
   * Parks until `isFinished` (a fresh read) says yes after a notification, or
   * `timeoutMs` passes. `isFinished` is also called once right after parking,
   * so a job that finished between the caller's first read and the parking
   * is not missed.
   */
  wait(tenant: string, id: string, timeoutMs: number, signal: AbortSignal, isFinished: () => Promise<boolean>): Promise<FinishWaitResult> {
    if (this.closed || signal.aborted) return Promise.resolve('aborted');
    const parkedHere = this.perTenant.get(tenant) ?? 0;
    if (parkedHere >= this.maxPerTenant) {
      throw new LeaseholdError(
        'overloaded',
        `this tenant already has ${this.maxPerTenant} requests waiting for jobs to finish; retry later or wait with a shorter waitMs`,
        {
          retryAfterSeconds: 1,
        },
      );
    }
    this.watch();
    const key = jobKey(tenant, id);
    return new Promise<FinishWaitResult>((resolve) => {
      let members = this.byJob.get(key);
      if (members === undefined) {
        members = new Set();
        this.byJob.set(key, members);
      }
      const set = members;
      let checking = false;
      let again = false;
      const onAbort = (): void => parked.settle('aborted');
      const timer = setTimeout(() => parked.settle('timeout'), Math.max(0, timeoutMs));
      const parked: Parked = {
        tenant,
        // One read at a time per wait; a notification during a read asks for one more.
        check: () => {
          if (checking) {
            again = true;
            return;
          }
          checking = true;
          isFinished().then(
            (done) => {
              checking = false;
              if (done) parked.settle('finished');
              else if (again) {
                again = false;
                parked.check();
              }
            },
            () => {
              checking = false; // A failed read leaves the wait to its timeout or the next notification.
            },
          );
        },
        settle: (result) => {
          if (!set.delete(parked)) return;
          if (set.size === 0 && this.byJob.get(key) === set) this.byJob.delete(key);
          const left = (this.perTenant.get(tenant) ?? 1) - 1;
          if (left <= 0) this.perTenant.delete(tenant);
          else this.perTenant.set(tenant, left);
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve(result);
        },
      };
      set.add(parked);
      this.perTenant.set(tenant, parkedHere + 1);
      signal.addEventListener('abort', onAbort, { once: true });
      parked.check();
    });
  }

  /** Ends every wait (the coordinator is closing); later waits end at once. */
  close(): void {
    this.closed = true;
    for (const set of [...this.byJob.values()]) for (const parked of [...set]) parked.settle('aborted');
    this.unwatch?.();
    this.unwatch = null;
  }

  private watch(): void {
    if (this.unwatch !== null) return;
    this.unwatch = this.store.watchFinished((job) => this.onFinished(job));
  }

  private onFinished(job: FinishedJob | null): void {
    if (job === null) {
      for (const set of this.byJob.values()) for (const parked of set) parked.check();
      return;
    }
    const set = this.byJob.get(jobKey(job.tenant, job.id));
    if (set !== undefined) for (const parked of set) parked.check();
  }
}

function jobKey(tenant: string, id: string): string {
  return `${tenant}\u0000${id}`;
}
