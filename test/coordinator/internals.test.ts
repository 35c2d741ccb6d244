/**
 * Unit tests of the coordinator's timing machinery: the reaper never
 * overlaps runs and survives a failing run; the lease waiters wake one waiter
 * per matching group of the announced tenant and lose no notification that
 * arrives before a waiter parks; the PostgreSQL notifier coalesces per
 * (tenant, kind).
 */
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { CoalescedNotifier, MAX_PENDING_PAIRS, parseAvailabilityPayload } from '../../src/store/postgres/coalesced-notifier.js';
import { LeaseWaiters, waiterGroup } from '../../src/engine/lease-waiters.js';
import { startReaper } from '../../src/engine/reaper.js';
import type { ReapOutcome, Store } from '../../src/store/store.js';
import { waitFor } from '../support/http-fixtures.js';

const EMPTY: ReapOutcome = { requeued: 0, dead: 0, unknown: 0, cancelled: 0, deadlineExpired: 0 };

describe('reaper', () => {
  it('never runs twice at once, keeps going after a failure, and stops cleanly', async () => {
    let running = 0;
    let maxRunning = 0;
    let calls = 0;
    let release: (() => void) | undefined;
    const store = {
      jobReapExpired: async (): Promise<ReapOutcome> => {
        calls += 1;
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        try {
          if (calls === 1) await new Promise<void>((resolve) => (release = resolve));
          if (calls === 2) throw new Error('disk I/O error');
          return { ...EMPTY, requeued: 1 };
        } finally {
          running -= 1;
        }
      },
    } as unknown as Store;
    const reaper = startReaper({ store, intervalMs: 5, log: pino({ level: 'silent' }) });
    await waitFor(() => release !== undefined);
    // Several ticks pass while the first run hangs: none of them starts another run.
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(calls).toBe(1);
    release?.();
    await waitFor(() => calls >= 4);
    await reaper.stop();
    const after = calls;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(calls).toBe(after);
    expect(maxRunning).toBe(1);
  });
});

describe('LeaseWaiters', () => {
  const never = new AbortController().signal;

  it('wakes the first waiter of each group per notification, in arrival order', async () => {
    const waiters = new LeaseWaiters();
    const order: string[] = [];
    const a1 = waiters.wait('t1', undefined, 10_000, waiters.generation('t1'), never).then((r) => order.push(`a1:${r}`));
    const a2 = waiters.wait('t1', undefined, 10_000, waiters.generation('t1'), never).then((r) => order.push(`a2:${r}`));
    const b1 = waiters.wait('t1', ['sms'], 10_000, waiters.generation('t1'), never).then((r) => order.push(`b1:${r}`));
    waiters.notify({ tenant: 't1', kind: 'sms' });
    await Promise.all([a1, b1]);
    expect(order.sort()).toEqual(['a1:woken', 'b1:woken']);
    expect(waiters.size).toBe(1);
    waiters.wakeNext('t1', '*');
    await a2;
    expect(order).toContain('a2:woken');
    expect(waiters.size).toBe(0);
  });

  it("wakes only the announced tenant's waiters whose filter admits the kind; null wakes every group", async () => {
    const waiters = new LeaseWaiters();
    const woken: string[] = [];
    const park = (name: string, tenant: string, kinds: readonly string[] | undefined): Promise<unknown> =>
      waiters.wait(tenant, kinds, 10_000, waiters.generation(tenant), never).then((r) => woken.push(`${name}:${r}`));
    const parked = [
      park('a-any', 'a', undefined),
      park('a-email', 'a', ['email', 'fax']),
      park('a-sms', 'a', ['sms']),
      park('b-any', 'b', undefined),
      park('b-email', 'b', ['email']),
    ];
    waiters.notify({ tenant: 'a', kind: 'email' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(woken.sort()).toEqual(['a-any:woken', 'a-email:woken']);
    expect(waiters.wakeUps).toBe(2);
    // Another tenant's announcement does not move this tenant's generation: a registering waiter is not sent back.
    const seen = waiters.generation('b');
    waiters.notify({ tenant: 'a', kind: 'sms' });
    expect(waiters.generation('b')).toBe(seen);
    waiters.notify(null);
    await Promise.all(parked);
    expect(woken.sort()).toEqual(['a-any:woken', 'a-email:woken', 'a-sms:woken', 'b-any:woken', 'b-email:woken']);
    expect(waiters.size).toBe(0);
  });

  it('returns at once when a notification for its tenant arrived after the generation was read', async () => {
    const waiters = new LeaseWaiters();
    const seen = waiters.generation('t1');
    waiters.notify({ tenant: 't1', kind: 'k' });
    expect(await waiters.wait('t1', undefined, 10_000, seen, never)).toBe('woken');
    const seenEveryone = waiters.generation('t2');
    waiters.notify(null);
    expect(await waiters.wait('t2', ['k'], 10_000, seenEveryone, never)).toBe('woken');
  });

  it('keeps a changed generation when it forgets the counters of idle tenants', () => {
    const waiters = new LeaseWaiters();
    const seen = waiters.generation('t0');
    waiters.notify({ tenant: 't0', kind: 'k' });
    const after = waiters.generation('t0');
    expect(after).not.toBe(seen);
    for (let i = 1; i <= 10_001; i++) waiters.notify({ tenant: `t${i}`, kind: 'k' });
    expect(waiters.generation('t0')).not.toBe(seen);
    expect(waiters.generation('t0')).not.toBe(after);
  });

  it('times out, aborts, and ends every wait on close', async () => {
    const waiters = new LeaseWaiters();
    expect(await waiters.wait('t1', undefined, 10, waiters.generation('t1'), never)).toBe('timeout');
    const controller = new AbortController();
    const aborted = waiters.wait('t1', undefined, 10_000, waiters.generation('t1'), controller.signal);
    controller.abort();
    expect(await aborted).toBe('aborted');
    const parked = waiters.wait('t1', undefined, 10_000, waiters.generation('t1'), never);
    waiters.close();
    expect(await parked).toBe('aborted');
    expect(await waiters.wait('t1', undefined, 10_000, waiters.generation('t1'), never)).toBe('aborted');
    expect(waiters.size).toBe(0);
  });

  it('groups kinds filters regardless of order and duplicates', () => {
    expect(waiterGroup(['b', 'a', 'b'])).toBe(waiterGroup(['a', 'b']));
    expect(waiterGroup([])).toBe(waiterGroup(undefined));
    expect(waiterGroup(['a'])).not.toBe(waiterGroup(undefined));
  });
});

describe('LeaseWaiters: what an empty lease left', () => {
  const nextDueIn = (inMs: number) => ({ runAfter: 1_000_000 + inMs, inMs });

  it("stands for the group's next polls while nothing is announced to the tenant", () => {
    const waiters = new LeaseWaiters(null, 60_000);
    expect(waiters.knownLeft('t', ['a'])).toBeUndefined();
    waiters.noteLeft('t', ['a'], waiters.generation('t'), null);
    expect(waiters.knownLeft('t', ['a'])).toBeNull();
    // Another group of the tenant, and the same group's filter in another order, are told apart and alike.
    expect(waiters.knownLeft('t', ['a', 'b'])).toBeUndefined();
    waiters.noteLeft('t', ['b', 'a'], waiters.generation('t'), nextDueIn(5_000));
    expect(waiters.knownLeft('t', ['a', 'b'])?.inMs).toBeGreaterThan(4_000);
    // Another tenant's announcement changes nothing for this one.
    waiters.notify({ tenant: 'other', kind: 'a' });
    expect(waiters.knownLeft('t', ['a'])).toBeNull();
    // Any announcement to the tenant (any kind: the generation is the tenant's) ends it, and so does one to everyone.
    waiters.notify({ tenant: 't', kind: 'z' });
    expect(waiters.knownLeft('t', ['a'])).toBeUndefined();
    waiters.noteLeft('t', ['a'], waiters.generation('t'), null);
    waiters.notify(null);
    expect(waiters.knownLeft('t', ['a'])).toBeUndefined();
  });

  it('is not kept when a job is due now, when jobs wait for a slot, when the lease began before an announcement, or when reuse is off', () => {
    const waiters = new LeaseWaiters(null, 60_000);
    waiters.noteLeft('t', ['a'], waiters.generation('t'), nextDueIn(0));
    expect(waiters.knownLeft('t', ['a'])).toBeUndefined();
    waiters.noteLeft('t', ['a'], waiters.generation('t'), { runAfter: null, inMs: null, slotHeld: true });
    expect(waiters.knownLeft('t', ['a'])).toBeUndefined();
    const before = waiters.generation('t');
    waiters.notify({ tenant: 't', kind: 'a' });
    waiters.noteLeft('t', ['a'], before, null);
    expect(waiters.knownLeft('t', ['a'])).toBeUndefined();
    const off = new LeaseWaiters(null, 0);
    off.noteLeft('t', ['a'], off.generation('t'), null);
    expect(off.knownLeft('t', ['a'])).toBeUndefined();
  });

  it('ends at its time bound, and when the next due job comes due', async () => {
    const waiters = new LeaseWaiters(null, 30);
    waiters.noteLeft('t', ['a'], waiters.generation('t'), null);
    waiters.noteLeft('t', ['b'], waiters.generation('t'), nextDueIn(10));
    expect(waiters.knownLeft('t', ['a'])).toBeNull();
    expect(waiters.knownLeft('t', ['b'])?.inMs).toBeGreaterThan(0);
    // The bound is time itself: a missed announcement costs a new poll at most this long.
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(waiters.knownLeft('t', ['a'])).toBeUndefined();
    expect(waiters.knownLeft('t', ['b'])).toBeUndefined();
  });
});

describe('CoalescedNotifier', () => {
  it('sends at once, folds pokes that arrive meanwhile per (tenant, kind) into one follow-up, and folds too many into one for everyone', async () => {
    const sent: string[][] = [];
    let release: (() => void) | undefined;
    const notifier = new CoalescedNotifier(async (payloads) => {
      sent.push([...payloads]);
      await new Promise<void>((resolve) => (release = resolve));
    });
    notifier.poke({ tenant: 'a', kind: 'k' });
    notifier.poke({ tenant: 'a', kind: 'k' });
    notifier.poke({ tenant: 'b', kind: 'k' });
    notifier.poke({ tenant: 'a', kind: 'k' });
    expect(sent).toEqual([['["a","k"]']]);
    release?.();
    await waitFor(() => sent.length === 2);
    expect(sent[1]).toEqual(['["a","k"]', '["b","k"]']);
    for (let i = 0; i <= MAX_PENDING_PAIRS; i++) notifier.poke({ tenant: 't', kind: `k${i}` });
    release?.();
    await waitFor(() => sent.length === 3);
    expect(sent[2]).toEqual(['']);
    expect(parseAvailabilityPayload('["a","k"]')).toEqual({ tenant: 'a', kind: 'k' });
    for (const foreign of ['', 'x', '[1,2]', '{"t":"a"}', undefined]) expect(parseAvailabilityPayload(foreign)).toBeNull();
    notifier.close();
    release?.();
  });
});
