/**
 * The pure pieces of the fair lease the stores share: what a lease writes as
 * a group's hold (holdAfterLease), what it does with a candidate it read
 * (candidateVerdict), the merge of a lease's streams across kinds (a kind's
 * own order kept, heads in lease order), the rows of a plan's picks, a kind's
 * rules as stored, and the bounded metrics of a tenant's groups.
 */

import { describe, expect, it } from 'vitest';
import { newGroupState, parseGroupRules, planGroupLease, type GroupRules } from '../../src/core/fair-share.js';
import { candidateVerdict, GROUP_RECHECK_MS, holdAfterLease, NOT_HELD } from '../../src/core/group-transitions.js';
import { decodeGroupRules, encodeGroupRules, groupStatsOf, mergeLeaseStreams, rowsOfPicks, type PickedRow } from '../../src/store/group-lease.js';

function rules(config: Parameters<typeof parseGroupRules>[0]): GroupRules {
  const parsed = parseGroupRules(config);
  if (!parsed.ok) throw new Error(parsed.problems.join('; '));
  return parsed.rules;
}

const NOW = 1_000_000;

describe('holdAfterLease and candidateVerdict', () => {
  it('holds a group at its slot limit, parks one at its rate until the window admits, and leaves the others', () => {
    const limited = rules({ maxConcurrent: 2, rate: { limit: 3, perMs: 1_000 } });
    expect(holdAfterLease({ ...newGroupState('a'), running: 2 }, limited, NOW)).toEqual({ slotHeld: true, wakeAt: null });
    expect(holdAfterLease({ ...newGroupState('a'), running: 1, windowStart: NOW - 10, windowCount: 3 }, limited, NOW)).toEqual({
      slotHeld: false,
      wakeAt: NOW - 10 + 1_000,
    });
    // A window that has ended admits again.
    expect(holdAfterLease({ ...newGroupState('a'), windowStart: NOW - 1_000, windowCount: 3 }, limited, NOW)).toEqual(NOT_HELD);
  });

  it('takes a candidate with leasable jobs, parks a held one, and one with only delayed jobs until the first is due', () => {
    const limited = rules({ maxConcurrent: 1 });
    expect(candidateVerdict(newGroupState('a'), limited, NOW, 3, null)).toEqual({ kind: 'take', available: 3 });
    expect(candidateVerdict({ ...newGroupState('a'), running: 1 }, limited, NOW, 3, null)).toEqual({ kind: 'park', hold: { slotHeld: true, wakeAt: null } });
    expect(candidateVerdict(newGroupState('a'), limited, NOW, 0, NOW + 5_000)).toEqual({ kind: 'park', hold: { slotHeld: false, wakeAt: NOW + 5_000 } });
    // None it could take (past their deadline, for the reaper): a look again shortly.
    expect(candidateVerdict(newGroupState('a'), limited, NOW, 0, null)).toEqual({ kind: 'park', hold: { slotHeld: false, wakeAt: NOW + GROUP_RECHECK_MS } });
  });
});

describe('the merge of a lease’s streams', () => {
  const row = (kind: string, seq: number, priority = 0, group = ''): PickedRow => ({ seq, kind, group_key: group, priority, run_after: 0 });

  it('keeps each stream’s own order and takes the best head in lease order, up to max', () => {
    // A fair plan may give a later job before an earlier one of another group: its order stays.
    const fair = [row('r', 9, 0, 'light'), row('r', 1, 0, 'heavy'), row('r', 10, 0, 'light')];
    const plain = [row('e', 2, 5), row('e', 3, 0), row('e', 4, 0)];
    expect(mergeLeaseStreams([fair, plain], 4).map((r) => r.seq)).toEqual([2, 3, 4, 9]);
    expect(mergeLeaseStreams([fair, plain], 10).map((r) => r.seq)).toEqual([2, 3, 4, 9, 1, 10]);
    expect(mergeLeaseStreams([[], []], 3)).toEqual([]);
  });

  it('gives each pick of a plan the next row of its group, and a plan’s prefix is the plan of a smaller lease', () => {
    const candidates = [
      { state: newGroupState('a'), available: 3 },
      { state: newGroupState('b'), available: 3 },
    ];
    const plan = planGroupLease({ virtualTime: 0, rules: rules({}), candidates, max: 4, now: NOW });
    const rows = new Map([
      ['a', [row('k', 1, 0, 'a'), row('k', 2, 0, 'a')]],
      ['b', [row('k', 3, 0, 'b'), row('k', 4, 0, 'b')]],
    ]);
    expect(rowsOfPicks(plan.picks, rows).map((r) => r.seq)).toEqual([1, 3, 2, 4]);
    const shorter = planGroupLease({ virtualTime: 0, rules: rules({}), candidates, max: 3, now: NOW });
    expect(shorter.picks).toEqual(plan.picks.slice(0, 3));
    expect(() => rowsOfPicks(plan.picks, new Map([['a', [row('k', 1, 0, 'a')]]]))).toThrow(/more jobs of group/);
  });
});

describe('a kind’s rules as stored, and the metrics of its groups', () => {
  it('stores the rules as canonical JSON and reads them back, from text or parsed JSON', () => {
    const stored = encodeGroupRules(rules({ weights: { b: 2, a: 0.5 }, maxConcurrent: 3 }));
    expect(stored).toBe('{"maxConcurrent":3,"weights":{"a":0.5,"b":2}}');
    expect(decodeGroupRules(stored)).toEqual(rules({ maxConcurrent: 3, weights: { a: 0.5, b: 2 } }));
    expect(decodeGroupRules(JSON.parse(stored ?? 'null'))?.maxConcurrent).toBe(3);
    expect(encodeGroupRules(null)).toBeNull();
    expect(decodeGroupRules(null)).toBeNull();
    expect(() => decodeGroupRules('{"maxConcurrent":0}')).toThrow(/invalid/);
  });

  it('sums what the top does not show', () => {
    const top = [
      { kind: 'k', group_key: 'a', queued: 5, running: 1 },
      { kind: 'k', group_key: 'b', queued: '2', running: '0' },
    ];
    expect(groupStatsOf(top, { groups: 5, queued: 10, running: 3 })).toEqual({
      top: [
        { kind: 'k', group: 'a', waiting: 5, running: 1 },
        { kind: 'k', group: 'b', waiting: 2, running: 0 },
      ],
      rest: { groups: 3, waiting: 3, running: 2 },
    });
    expect(groupStatsOf([], undefined)).toEqual({ top: [], rest: { groups: 0, waiting: 0, running: 0 } });
  });
});
