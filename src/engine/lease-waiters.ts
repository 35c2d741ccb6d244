/**
 * Long-poll waiters for POST /lease. A lease request that found nothing parks
 * here until the store says work may be available, the earliest delayed job
 * or retry its group could lease becomes due, the client goes away, or the
 * coordinator closes. Nothing re-runs the lease query on a timer: an idle
 * parked poll costs no query at all (docs/design/lease-protocol.md §4.1, long polls).
 *
 * Waiters are kept per tenant, and within a tenant in groups of the same
 * kinds filter. An announcement of a job of (tenant, kind) wakes one waiter
 * in each of that tenant's groups whose filter admits the kind, and nobody
 * else: another tenant's parked polls cost an announcement nothing, and a
 * single enqueue costs one lease transaction per matching group, not one per
 * idle worker. The groups are indexed by kind, so finding them does not grow
 * with the tenant's other filters either. A woken waiter that leased a full
 * batch wakes the next one in its group, since more work may remain. An
 * announcement without a tenant (the store cannot say, e.g. a commit by
 * another SQLite process) wakes one waiter in every group.
 *
 * Delayed jobs are not announced when they become due, so each group keeps one
 * timer, set to the earliest due time its members found (jobNextDue, read
 * after their empty lease). It wakes one member ('due'), which leases and,
 * whatever it got, hands the duty on: it re-parks with a fresh due time, or
 * wakes the next member, or passes its due time to the group with schedule().
 *
 * A poll held back by a kind's maxConcurrent (jobNextDue's slotHeld) also
 * waits for a job of its tenant to finish: slotFreed, fed by the store's
 * finished-job notifications (this process's and other coordinators'), wakes
 * one slot-held member of each of the tenant's groups. The subscription is
 * made by the first such poll, so a coordinator whose tenants set no limits
 * never listens; finished jobs cost other polls nothing.
 *
 * The generation counters close the gap between "lease found nothing" and
 * "waiter registered": an announcement for the tenant in between is not lost.
 * They are per tenant (plus one for announcements to everyone), so another
 * tenant's announcements do not send a registering waiter back to lease.
 *
 * An enqueue of a job available now may take a parked poll out of its group
 * (claim) and lease the job to it in the enqueue's own statement
 * (Store.jobEnqueueLeased), when the group's last lease left nothing it could
 * take now (knownLeft, below), so no queued job comes before the new one.
 *
 * The generations also make an empty lease worth remembering: when a
 * group's lease left nothing leasable (its next due time still ahead, no slot
 * held) and nothing was announced to the tenant since, another lease of that
 * group would find nothing either, so a poll arriving within `reuseMs` (the
 * coordinator's emptyLeaseReuseMs) parks on what the last lease read
 * (knownLeft) instead of asking the store again. A worker polls again after
 * every job it gets; without this, each job cost a second, empty lease
 * statement. The time bound caps what a missed announcement (a lost NOTIFY,
 * another process's commit that nobody announced) can cost a new poll.
 */

import { performance } from 'node:perf_hooks';
import type { NextDue } from '../store/next-due.js';
import type { Availability, HandoffLease, LeasedJob } from '../store/store.js';

/** Groups whose last lease is remembered; forgotten all at once beyond this. */
const MAX_KNOWN_LEFT = 10_000;

/** What a group's lease found left: at which generation, the next due job's time, until when it stands. */
interface KnownLeft {
  readonly generation: number;
  readonly next: NextDue | null;
  /** performance.now() ms at which `next` is due; null with `next`. */
  readonly dueAt: number | null;
  readonly until: number;
}

/** 'handed': an enqueue leased a job to the poll itself (claim); the job is in the poll's HandoffTarget. */
export type WaitResult = 'woken' | 'due' | 'timeout' | 'aborted' | 'handed';

/** What a parked poll offers an enqueue that hands it a job: its lease, and the place for the job. */
export interface HandoffTarget extends HandoffLease {
  /** Set by the enqueue that claimed the poll, before it ends the wait with 'handed'. */
  job: LeasedJob | null;
  /** performance.now() when the poll was claimed: its lease began after this. */
  claimedAt: number;
}

/** A parked poll taken out of its group by an enqueue; `end` must be called once, whatever the enqueue did. */
export interface Claim {
  readonly target: HandoffTarget;
  /** 'handed' once target.job is set; 'woken' sends the poll to lease as usual. */
  readonly end: (result: 'handed' | 'woken') => void;
}

interface Waiter {
  readonly settle: (result: WaitResult) => void;
  readonly target: HandoffTarget | null;
  /** Leaves the group without ending the wait; the resolver of the wait, or null when it had already ended. */
  readonly detach: () => ((result: WaitResult) => void) | null;
}

interface Group {
  /** waiterGroup of the filter: the key of the group and of what its last lease left. */
  readonly key: string;
  /** The kinds filter; null admits every kind. */
  readonly kinds: ReadonlySet<string> | null;
  readonly members: Set<Waiter>;
  /** Members whose lease a kind's maxConcurrent held back: a finished job of the tenant wakes one. */
  readonly slotMembers: Set<Waiter>;
  /** The group's due timer and when it fires (performance.now() ms); null when none is set. */
  due: { readonly at: number; readonly timer: NodeJS.Timeout } | null;
}

interface TenantWaiters {
  readonly groups: Map<string, Group>;
  /** Groups whose filter names the kind. */
  readonly byKind: Map<string, Set<Group>>;
  /** Groups without a filter. */
  readonly anyKind: Set<Group>;
}

/** Subscribes to finished jobs (Store.watchFinished): the tenant, or null for "any tenant's may have". */
export type WatchSlots = (onFreed: (tenant: string | null) => void) => () => void;

export class LeaseWaiters {
  private readonly tenants = new Map<string, TenantWaiters>();
  /** Finished-job notifications so far, any tenant: a slot-held poll that saw it change since its lease leases again. */
  private finishedCount = 0;
  private unwatchSlots: (() => void) | null = null;
  /** Announcements per tenant; an entry lives while the tenant has waiters or was announced since. */
  private readonly tenantGenerations = new Map<string, number>();
  private everyoneGeneration = 0;
  /** By tenant and group key: what the group's last lease left (noteLeft). */
  private readonly known = new Map<string, KnownLeft>();
  private closed = false;
  /** Waiters woken so far (a test counts them). */
  wakeUps = 0;

  constructor(
    private readonly watchSlots: WatchSlots | null = null,
    /** How long what a group's lease left stands for its next polls while nothing is announced; 0: not at all. */
    private readonly reuseMs = 0,
  ) {}

  /** Changes whenever a job may have finished (once slot-held polls listen); read it before a lease attempt. */
  finishedGeneration(): number {
    return this.finishedCount;
  }

  /** A job of `tenant` (null: of any tenant) finished: a maxConcurrent slot may be free. */
  slotFreed(tenant: string | null): void {
    this.finishedCount++;
    const tenants = tenant === null ? [...this.tenants.values()] : [this.tenants.get(tenant)].filter((t) => t !== undefined);
    for (const waiters of tenants) {
      for (const group of [...waiters.groups.values()]) {
        const first = group.slotMembers.values().next();
        if (!first.done) first.value.settle('woken');
      }
    }
  }

  /** Changes on every announcement that concerns `tenant`; read it before a lease attempt and pass it to wait(). */
  generation(tenant: string): number {
    return this.everyoneGeneration + (this.tenantGenerations.get(tenant) ?? 0);
  }

  /**
   * A lease of the group of (tenant, kinds), begun at `generation`, left this: `next` as the store answered it
   * (null: nothing queued that it could take). Remembered unless it leaves a job due now or waits for a slot.
   */
  noteLeft(tenant: string, kinds: readonly string[] | undefined, generation: number, next: NextDue | null): void {
    if (this.reuseMs === 0) return;
    const key = `${tenant}\u0000${waiterGroup(kinds)}`;
    if (next?.slotHeld === true || next?.inMs === 0) {
      this.known.delete(key);
      return;
    }
    if (this.known.size >= MAX_KNOWN_LEFT) this.known.clear();
    const now = performance.now();
    this.known.set(key, { generation, next, dueAt: next?.inMs == null ? null : now + next.inMs, until: now + this.reuseMs });
  }

  /**
   * What a lease of the group would find now, if known: nothing, with the next due job's time (null: none),
   * while nothing was announced to the tenant since the last lease left that. undefined: lease to know.
   */
  knownLeft(tenant: string, kinds: readonly string[] | undefined): NextDue | null | undefined {
    return this.knownLeftOf(tenant, waiterGroup(kinds));
  }

  /** A poll that offered a HandoffTarget, out of its group, for an enqueue of (tenant, kind); null when none (see above). */
  claim(tenant: string, kind: string): Claim | null {
    const waiters = this.tenants.get(tenant);
    if (waiters === undefined) return null;
    for (const group of [...waiters.anyKind, ...(waiters.byKind.get(kind) ?? [])]) {
      if (this.knownLeftOf(tenant, group.key) === undefined) continue;
      for (const waiter of group.members) {
        if (waiter.target === null || group.slotMembers.has(waiter)) continue;
        const resolve = waiter.detach();
        if (resolve === null) continue;
        const target = waiter.target;
        target.claimedAt = performance.now();
        return { target, end: (result) => resolve(result === 'handed' && target.job !== null ? 'handed' : 'woken') };
      }
    }
    return null;
  }

  private knownLeftOf(tenant: string, group: string): NextDue | null | undefined {
    const key = `${tenant}\u0000${group}`;
    const known = this.known.get(key);
    if (known === undefined) return undefined;
    const now = performance.now();
    if (known.generation !== this.generation(tenant) || now >= known.until || (known.dueAt !== null && now >= known.dueAt)) {
      this.known.delete(key);
      return undefined;
    }
    if (known.next === null || known.dueAt === null) return known.next;
    return { ...known.next, inMs: Math.max(1, Math.ceil(known.dueAt - now)) };
  }

  get size(): number {
    let total = 0;
    for (const tenant of this.tenants.values()) for (const group of tenant.groups.values()) total += group.members.size;
    return total;
  }

  /** A job of (tenant, kind) may be available; `null` when nobody can say whose: wake one waiter of every group. */
  notify(available: Availability | null): void {
    if (available === null) {
      this.everyoneGeneration++;
      for (const tenant of this.tenants.values()) for (const group of tenant.groups.values()) this.wakeFirst(group);
      return;
    }
    this.tenantGenerations.set(available.tenant, (this.tenantGenerations.get(available.tenant) ?? 0) + 1);
    const tenant = this.tenants.get(available.tenant);
    if (tenant === undefined) {
      // Nobody of this tenant waits: its counter is needed only by a waiter now between lease and wait().
      if (this.tenantGenerations.size > 10_000) this.forgetIdleGenerations();
      return;
    }
    for (const group of tenant.anyKind) this.wakeFirst(group);
    const named = tenant.byKind.get(available.kind);
    if (named !== undefined) for (const group of [...named]) this.wakeFirst(group);
  }

  wakeNext(tenant: string, group: string): void {
    const found = this.tenants.get(tenant)?.groups.get(group);
    if (found !== undefined) this.wakeFirst(found);
  }

  /** A job the group of (tenant, kinds) could lease becomes due in `inMs` (null: none known); a group without members ignores it. */
  schedule(tenant: string, kinds: readonly string[] | undefined, inMs: number | null): void {
    const group = this.tenants.get(tenant)?.groups.get(waiterGroup(kinds));
    if (group !== undefined && inMs !== null) this.setDue(group, inMs);
  }

  /**
   * Parks until woken, until `dueInMs` passes ('due', shared with the group), or until `timeoutMs` passes.
   * `slotSeen`: the lease was held back by a kind's maxConcurrent, and this is finishedGeneration() as read
   * before it; a finished job since (or the first such wait, which starts listening) answers 'woken' at once.
   */
  wait(
    tenant: string,
    kinds: readonly string[] | undefined,
    timeoutMs: number,
    seenGeneration: number,
    signal: AbortSignal,
    dueInMs: number | null = null,
    slotSeen: number | null = null,
    target: HandoffTarget | null = null,
  ): Promise<WaitResult> {
    if (this.closed || signal.aborted) return Promise.resolve('aborted');
    if (seenGeneration !== this.generation(tenant)) return Promise.resolve('woken');
    if (slotSeen !== null) {
      if (this.unwatchSlots === null && this.watchSlots !== null) {
        // A job that finished before the subscription was heard by nobody: look once more now that it listens.
        this.unwatchSlots = this.watchSlots((freed) => this.slotFreed(freed));
        return Promise.resolve('woken');
      }
      if (slotSeen !== this.finishedCount) return Promise.resolve('woken');
    }
    const key = waiterGroup(kinds);
    return new Promise<WaitResult>((resolve) => {
      const group = this.join(tenant, key, kinds);
      if (dueInMs !== null) this.setDue(group, dueInMs);
      const onAbort = (): void => waiter.settle('aborted');
      const timer = setTimeout(() => waiter.settle('timeout'), Math.max(0, timeoutMs));
      const end = (result: WaitResult): void => {
        if (result === 'woken') this.wakeUps++;
        resolve(result);
      };
      const waiter: Waiter = {
        target,
        detach: () => {
          if (!group.members.delete(waiter)) return null;
          group.slotMembers.delete(waiter);
          if (group.members.size === 0) this.leave(tenant, key, group);
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          return end;
        },
        settle: (result) => waiter.detach()?.(result),
      };
      group.members.add(waiter);
      if (slotSeen !== null) group.slotMembers.add(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends every wait (the coordinator is closing); later waits end at once. */
  close(): void {
    this.closed = true;
    this.unwatchSlots?.();
    this.unwatchSlots = null;
    for (const tenant of [...this.tenants.values()]) {
      for (const group of [...tenant.groups.values()]) for (const waiter of [...group.members]) waiter.settle('aborted');
    }
  }

  private wakeFirst(group: Group, result: 'woken' | 'due' = 'woken'): void {
    const first = group.members.values().next();
    if (!first.done) first.value.settle(result);
  }

  /**
   * Keeps the earlier of the group's due time and now + inMs. One ms more: the store's clock reads whole
   * milliseconds, so without it the timer can fire just before the job is due by that clock; and never 0, so a
   * due job that another transaction holds is not spun on.
   */
  private setDue(group: Group, inMs: number): void {
    const at = performance.now() + Math.max(0, inMs) + 1;
    if (group.due !== null && group.due.at <= at) return;
    if (group.due !== null) clearTimeout(group.due.timer);
    const timer = setTimeout(
      () => {
        group.due = null;
        this.wakeFirst(group, 'due');
      },
      Math.max(1, Math.ceil(at - performance.now())),
    );
    group.due = { at, timer };
  }

  private join(tenantName: string, key: string, kinds: readonly string[] | undefined): Group {
    let tenant = this.tenants.get(tenantName);
    if (tenant === undefined) {
      tenant = { groups: new Map(), byKind: new Map(), anyKind: new Set() };
      this.tenants.set(tenantName, tenant);
    }
    const existing = tenant.groups.get(key);
    if (existing !== undefined) return existing;
    const filter = kinds === undefined || kinds.length === 0 ? null : new Set(kinds);
    const group: Group = { key, kinds: filter, members: new Set(), slotMembers: new Set(), due: null };
    tenant.groups.set(key, group);
    if (filter === null) tenant.anyKind.add(group);
    else {
      for (const kind of filter) {
        let groups = tenant.byKind.get(kind);
        if (groups === undefined) {
          groups = new Set();
          tenant.byKind.set(kind, groups);
        }
        groups.add(group);
      }
    }
    return group;
  }

  private leave(tenantName: string, key: string, group: Group): void {
    const tenant = this.tenants.get(tenantName);
    if (tenant === undefined || tenant.groups.get(key) !== group) return;
    tenant.groups.delete(key);
    if (group.due !== null) clearTimeout(group.due.timer);
    group.due = null;
    if (group.kinds === null) tenant.anyKind.delete(group);
    else {
      for (const kind of group.kinds) {
        const groups = tenant.byKind.get(kind);
        groups?.delete(group);
        if (groups?.size === 0) tenant.byKind.delete(kind);
      }
    }
    if (tenant.groups.size === 0) this.tenants.delete(tenantName);
  }

  /**
   * Keeps the per-tenant counters bounded: a counter of a tenant without waiters is dropped,
   * and to keep a lease in progress from missing an announcement the shared counter moves on.
   */
  private forgetIdleGenerations(): void {
    let largest = 0;
    for (const [tenant, count] of [...this.tenantGenerations]) {
      if (this.tenants.has(tenant)) continue;
      this.tenantGenerations.delete(tenant);
      largest = Math.max(largest, count);
    }
    // Every dropped tenant's generation still changes (e + n becomes e + largest + 1).
    this.everyoneGeneration += largest + 1;
  }
}

/** The group key of a kinds filter: order and duplicates do not matter. */
export function waiterGroup(kinds: readonly string[] | undefined): string {
  if (kinds === undefined || kinds.length === 0) return '*';
  return [...new Set(kinds)].sort().join('\n');
}
