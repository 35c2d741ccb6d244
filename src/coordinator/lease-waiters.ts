/**
 * Long-poll waiters for POST /lease. A lease request that found nothing parks
 * here until the store says work may be available, its re-check interval
 * passes (delayed jobs becoming due are not announced), the client goes away,
 * or the coordinator closes.
 *
 * A notification wakes one waiter per group (waiters with the same kinds
 * filter form a group), not all of them: a single enqueue should cost one
 * lease transaction, not one per idle worker. A woken waiter that leased a
 * full batch wakes the next one in its group, since more work may remain.
 * The generation counter closes the gap between "lease found nothing" and
 * "waiter registered": a notification in between is not lost.
 */

export type WaitResult = 'woken' | 'timeout' | 'aborted';

interface Waiter {
  readonly group: string;
  readonly settle: (result: WaitResult) => void;
}

export class LeaseWaiters {
  private readonly groups = new Map<string, Set<Waiter>>();
  private closed = false;
  private notifications = 0;

  /** Changes on every notification; read it before a lease attempt and pass it to wait(). */
  get generation(): number {
    return this.notifications;
  }

  get size(): number {
    let total = 0;
    for (const group of this.groups.values()) total += group.size;
    return total;
  }

  notify(): void {
    this.notifications++;
    for (const group of this.groups.values()) {
      const first = group.values().next();
      if (!first.done) first.value.settle('woken');
    }
  }

  wakeNext(group: string): void {
    const first = this.groups.get(group)?.values().next();
    if (first !== undefined && !first.done) first.value.settle('woken');
  }

  wait(group: string, timeoutMs: number, seenGeneration: number, signal: AbortSignal): Promise<WaitResult> {
    if (this.closed || signal.aborted) return Promise.resolve('aborted');
    if (seenGeneration !== this.notifications) return Promise.resolve('woken');
    return new Promise<WaitResult>((resolve) => {
      let members = this.groups.get(group);
      if (members === undefined) {
        members = new Set();
        this.groups.set(group, members);
      }
      const set = members;
      const onAbort = (): void => waiter.settle('aborted');
      const timer = setTimeout(() => waiter.settle('timeout'), Math.max(0, timeoutMs));
      const waiter: Waiter = {
        group,
        settle: (result) => {
          if (!set.delete(waiter)) return;
          if (set.size === 0 && this.groups.get(group) === set) this.groups.delete(group);
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve(result);
        },
      };
      set.add(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends every wait (the coordinator is closing); later waits end at once. */
  close(): void {
    this.closed = true;
    for (const group of [...this.groups.values()]) for (const waiter of [...group]) waiter.settle('aborted');
  }
}

/** The group key of a kinds filter: order and duplicates do not matter. */
export function waiterGroup(kinds: readonly string[] | undefined): string {
  if (kinds === undefined || kinds.length === 0) return '*';
  return [...new Set(kinds)].sort().join('\n');
}
