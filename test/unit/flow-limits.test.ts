/**
 * The decisions of src/store/flow-limits.ts and restrictedNextDue, without a
 * database: what a lease may take of a paused, concurrency-limited or
 * rate-limited kind, how the fixed rate window moves, and what a parked poll
 * waits for. A property: however leases and finishes interleave, following
 * leaseAllowance never exceeds maxConcurrent, and no window admits more than
 * its limit.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  countByKind,
  holdReason,
  inReach,
  kindsFilter,
  leaseAllowance,
  leaseCaps,
  windowAfter,
  windowsMoved,
  type KindFlowState,
} from '../../src/store/flow-limits.js';
import { restrictedNextDue } from '../../src/store/next-due.js';

const base: KindFlowState = { kind: 'k', paused: false, maxConcurrent: null, rate: null, running: 0, windowStart: null, windowCount: 0 };

describe('flow limits', () => {
  it('gives a paused kind nothing, a limited kind what is left of its slots and its window, others max', () => {
    expect(leaseAllowance({ ...base, paused: true, maxConcurrent: 5 }, 10, 0)).toBe(0);
    expect(leaseAllowance({ ...base, maxConcurrent: 3, running: 1 }, 10, 0)).toBe(2);
    expect(leaseAllowance({ ...base, maxConcurrent: 3, running: 5 }, 10, 0)).toBe(0);
    expect(leaseAllowance({ ...base, rate: { limit: 4, perMs: 1_000 }, windowStart: 0, windowCount: 3 }, 10, 999)).toBe(1);
    // The window has ended: a fresh one.
    expect(leaseAllowance({ ...base, rate: { limit: 4, perMs: 1_000 }, windowStart: 0, windowCount: 4 }, 10, 1_000)).toBe(4);
    expect(leaseAllowance({ ...base, maxConcurrent: 2, rate: { limit: 4, perMs: 1_000 } }, 1, 0)).toBe(1);
  });

  it('moves the window: counts within it, opens the next window of its grid after it ended', () => {
    const rated: KindFlowState = { ...base, rate: { limit: 4, perMs: 1_000 }, windowStart: 100, windowCount: 2 };
    expect(windowAfter(rated, 1, 500)).toEqual({ start: 100, count: 3 });
    expect(windowAfter(rated, 3, 1_100)).toEqual({ start: 1_100, count: 3 });
    // A late lease opens the grid's window that holds it, so the window after it is due on time.
    const late = windowAfter(rated, 4, 1_180);
    expect(late).toEqual({ start: 1_100, count: 4 });
    expect(holdReason({ ...rated, windowStart: late.start, windowCount: late.count }, 1_200)).toEqual({ kind: 'rate', admitsAt: 2_100 });
    expect(windowAfter(rated, 1, 5_350)).toEqual({ start: 5_100, count: 1 });
    expect(windowAfter({ ...rated, windowStart: null, windowCount: 0 }, 2, 50)).toEqual({ start: 50, count: 2 });
  });

  it('caps each candidate kind of a restricted lease in order, leaving out the kinds allowed nothing, and moves only rate windows', () => {
    const restricted = new Map<string, KindFlowState>([
      ['paused', { ...base, kind: 'paused', paused: true }],
      ['slots', { ...base, kind: 'slots', maxConcurrent: 3, running: 1 }],
      ['rated', { ...base, kind: 'rated', rate: { limit: 4, perMs: 1_000 }, windowStart: 0, windowCount: 1 }],
    ]);
    expect(leaseCaps(['free', 'paused', 'slots', 'rated'], restricted, 10, 500)).toEqual([
      { kind: 'free', cap: 10 },
      { kind: 'slots', cap: 2 },
      { kind: 'rated', cap: 3 },
    ]);
    const leased = [{ kind: 'free' }, { kind: 'slots' }, { kind: 'rated' }, { kind: 'rated' }];
    expect(windowsMoved(leased, restricted, 500)).toEqual([{ kind: 'rated', start: 0, count: 3 }]);
    expect(windowsMoved([], restricted, 500)).toEqual([]);
  });

  it('reads a kinds filter without duplicates (none or empty: every kind), and the restricted kinds within its reach', () => {
    expect(kindsFilter(undefined)).toBeNull();
    expect(kindsFilter([])).toBeNull();
    expect(kindsFilter(['a', 'b', 'a'])).toEqual(['a', 'b']);
    const states = [
      { ...base, kind: 'a' },
      { ...base, kind: 'c' },
    ];
    expect(inReach(states, null).map((s) => s.kind)).toEqual(['a', 'c']);
    expect(inReach(states, ['b', 'c']).map((s) => s.kind)).toEqual(['c']);
  });

  it('says what a held poll waits for', () => {
    expect(holdReason({ ...base, paused: true }, 0)).toEqual({ kind: 'paused' });
    expect(holdReason({ ...base, maxConcurrent: 1, running: 1 }, 0)).toEqual({ kind: 'slot' });
    expect(holdReason({ ...base, rate: { limit: 2, perMs: 500 }, windowStart: 100, windowCount: 2 }, 300)).toEqual({ kind: 'rate', admitsAt: 600 });
    expect(holdReason({ ...base, rate: { limit: 2, perMs: 500 }, windowStart: 100, windowCount: 2 }, 600)).toBeNull();
    expect(holdReason({ ...base, maxConcurrent: 2, running: 1 }, 0)).toBeNull();
  });

  it('answers next due from the restricted kinds: paused ones ignored, slots held, rates from their window', () => {
    const paused = { ...base, kind: 'p', paused: true };
    const full = { ...base, kind: 'f', maxConcurrent: 1, running: 1 };
    const rated = { ...base, kind: 'r', rate: { limit: 1, perMs: 1_000 }, windowStart: 0, windowCount: 1 };
    const firsts = new Map<string, number | null>([
      ['p', 0],
      ['f', 0],
      ['r', 10],
    ]);
    expect(restrictedNextDue(null, [paused], firsts, 100)).toBeNull();
    expect(restrictedNextDue(null, [paused, full], firsts, 100)).toEqual({ runAfter: null, inMs: null, slotHeld: true });
    expect(restrictedNextDue(null, [rated], firsts, 100)).toEqual({ runAfter: 1_000, inMs: 900 });
    expect(restrictedNextDue(500, [rated, full], firsts, 100)).toEqual({ runAfter: 500, inMs: 400, slotHeld: true });
    // A held kind with nothing queued does not hold anything.
    expect(restrictedNextDue(null, [full], new Map([['f', null]]), 100)).toBeNull();
  });

  it('never exceeds maxConcurrent or a window\u2019s limit, whatever the interleaving of leases and finishes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.record({ op: fc.constantFrom('lease', 'finish'), max: fc.integer({ min: 1, max: 8 }), dt: fc.integer({ min: 0, max: 400 }) }), {
          maxLength: 60,
        }),
        (maxConcurrent, limit, steps) => {
          let state: KindFlowState = { ...base, maxConcurrent, rate: { limit, perMs: 1_000 } };
          let now = 0;
          const starts: number[] = [];
          for (const step of steps) {
            now += step.dt;
            if (step.op === 'finish') {
              state = { ...state, running: Math.max(0, state.running - 1) };
              continue;
            }
            const n = leaseAllowance(state, step.max, now);
            expect(n).toBeLessThanOrEqual(step.max);
            if (n === 0) continue;
            const window = windowAfter(state, n, now);
            state = { ...state, running: state.running + n, windowStart: window.start, windowCount: window.count };
            for (let i = 0; i < n; i++) starts.push(window.start);
            expect(state.running).toBeLessThanOrEqual(maxConcurrent);
          }
          for (const count of countByKind(starts.map((start) => ({ kind: String(start) }))).values()) expect(count).toBeLessThanOrEqual(limit);
        },
      ),
    );
  });
});
