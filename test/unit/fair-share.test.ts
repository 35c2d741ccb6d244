/**
 * The fair lease decision of src/core/fair-share.ts without a database: group
 * keys, rules, the SFQ plan (virtual time, no banked credit, weights, ties),
 * each group's own limits skipping it without blocking the others, priority
 * within a group, and the helpers a store needs to keep its group rows. The
 * properties check SFQ's fairness bound, that a plan equals the merge of each
 * group's tag sequence (what a backend may compute in SQL), and that no plan
 * exceeds a group's limits.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compareGroupKeys,
  decideGroupLease,
  GROUP_MAX_LENGTH,
  groupAfterFinish,
  groupHold,
  groupJobCost,
  groupKeyOf,
  type GroupCandidate,
  type GroupLeasePlan,
  type GroupRules,
  type GroupState,
  isGroupName,
  isGroupStateForgettable,
  newGroupState,
  NO_GROUP_RULES,
  parseGroupRules,
  planGroupLease,
  rebaseFinishTag,
  UNGROUPED,
  VIRTUAL_COST_PER_JOB,
  VIRTUAL_TIME_REBASE_AT,
  virtualTimeRebase,
} from '../../src/core/fair-share.js';

const UNIT = VIRTUAL_COST_PER_JOB;

function rules(config: Parameters<typeof parseGroupRules>[0]): GroupRules {
  const parsed = parseGroupRules(config);
  if (!parsed.ok) throw new Error(parsed.problems.join('; '));
  return parsed.rules;
}

function candidate(group: string, available = 100, state: Partial<GroupState> = {}): GroupCandidate {
  return { state: { ...newGroupState(group), ...state }, available };
}

/** planGroupLease at time 0 without rules unless given. */
function planAt(virtualTime: number, candidates: GroupCandidate[], max: number, groupRules: GroupRules = NO_GROUP_RULES, now = 0): GroupLeasePlan {
  return planGroupLease({ virtualTime, rules: groupRules, candidates, max, now });
}

function groupsOf(picks: readonly { group: string }[]): string[] {
  return picks.map((pick) => pick.group);
}

describe('group keys and rules', () => {
  it('keeps jobs without a group apart from every group name a job may carry', () => {
    expect(UNGROUPED).toBe('');
    expect(isGroupName(UNGROUPED)).toBe(false);
    expect(isGroupName('a')).toBe(true);
    expect(isGroupName('x'.repeat(GROUP_MAX_LENGTH))).toBe(true);
    expect(isGroupName('x'.repeat(GROUP_MAX_LENGTH + 1))).toBe(false);
    expect(isGroupName(7)).toBe(false);
    expect(groupKeyOf(undefined)).toBe(UNGROUPED);
    expect(groupKeyOf(null)).toBe(UNGROUPED);
    expect(groupKeyOf('customer-1')).toBe('customer-1');
  });

  it('validates a kind\u2019s groups, listing every problem, and freezes the rules', () => {
    const parsed = parseGroupRules({ maxConcurrent: 2, rate: { limit: 5, perMs: 1_000 }, weights: { vip: 4, '': 0.5 } });
    expect(parsed.ok).toBe(true);
    if (parsed.ok) {
      expect(parsed.rules).toMatchObject({ maxConcurrent: 2, rate: { limit: 5, perMs: 1_000 } });
      expect(parsed.rules.weights.get('vip')).toBe(4);
      expect(Object.isFrozen(parsed.rules)).toBe(true);
    }
    const bad = parseGroupRules({ maxConcurrent: 0, rate: { limit: 1.5, perMs: 0 }, weights: { a: 0, b: Number.NaN, ['x'.repeat(256)]: 1, c: 1_001 } });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.problems).toHaveLength(7);
    expect(parseGroupRules({})).toEqual({ ok: true, rules: { maxConcurrent: null, rate: null, weights: new Map() } });
  });

  it('charges a job the unit cost over its group\u2019s weight, rounded', () => {
    const weighted = rules({ weights: { double: 2, third: 3, tiny: 0.01, [UNGROUPED]: 0.5 } });
    expect(groupJobCost(weighted, 'other')).toBe(UNIT);
    expect(groupJobCost(weighted, 'double')).toBe(UNIT / 2);
    expect(groupJobCost(weighted, 'third')).toBe(333_333);
    expect(groupJobCost(weighted, 'tiny')).toBe(UNIT * 100);
    expect(groupJobCost(weighted, UNGROUPED)).toBe(UNIT * 2);
  });

  it('orders group keys by code point, as UTF-8 bytes sort in both backends', () => {
    expect(compareGroupKeys('a', 'b')).toBeLessThan(0);
    expect(compareGroupKeys('ab', 'a')).toBeGreaterThan(0);
    expect(compareGroupKeys('same', 'same')).toBe(0);
    // UTF-16 code units put U+10000 (a surrogate pair, 0xD800…) before U+FFFF; code points do not.
    expect(compareGroupKeys('\u{10000}', '\uFFFF')).toBeGreaterThan(0);
    expect(compareGroupKeys(UNGROUPED, 'a')).toBeLessThan(0);
  });
});

describe('the SFQ plan', () => {
  it('alternates between equal groups, ties going to the smaller finish tag and then the smaller key', () => {
    const plan = planGroupLease({ virtualTime: 0, rules: NO_GROUP_RULES, candidates: [candidate('b'), candidate('a')], max: 5, now: 0 });
    expect(groupsOf(plan.picks)).toEqual(['a', 'b', 'a', 'b', 'a']);
    expect(plan.picks.map((pick) => pick.startTag)).toEqual([0, 0, UNIT, UNIT, 2 * UNIT]);
    expect(plan.virtualTime).toBe(2 * UNIT);
    expect(plan.groups).toEqual([
      { group: 'a', finishTag: 3 * UNIT, running: 3, windowStart: null, windowCount: 0 },
      { group: 'b', finishTag: 2 * UNIT, running: 2, windowStart: null, windowCount: 0 },
    ]);
    expect(plan.taken).toEqual(
      new Map([
        ['a', 3],
        ['b', 2],
      ]),
    );
    // Both behind V start at V; the one further behind goes first although its key is larger.
    const behind = planAt(10 * UNIT, [candidate('a', 1, { finishTag: 5 * UNIT }), candidate('z', 1, { finishTag: UNIT })], 2);
    expect(groupsOf(behind.picks)).toEqual(['z', 'a']);
    expect(behind.picks.map((pick) => pick.startTag)).toEqual([10 * UNIT, 10 * UNIT]);
  });

  it('starts a group that was idle at V: it banks no credit for the time it was away', () => {
    // `busy` leased all along and is one job ahead of V; `back` last leased long ago.
    const plan = planGroupLease({
      virtualTime: 1_000 * UNIT,
      rules: NO_GROUP_RULES,
      candidates: [candidate('busy', 100, { finishTag: 1_001 * UNIT }), candidate('back', 100, { finishTag: 3 * UNIT })],
      max: 6,
      now: 0,
    });
    expect(plan.picks[0]).toEqual({ group: 'back', startTag: 1_000 * UNIT, finishTag: 1_001 * UNIT });
    expect(groupsOf(plan.picks)).toEqual(['back', 'back', 'busy', 'back', 'busy', 'back']);
  });

  it('gives a group of weight 2 two jobs for each of a group of weight 1', () => {
    const weighted = planAt(0, [candidate('heavy'), candidate('light')], 30, rules({ weights: { heavy: 2 } }));
    expect(weighted.picks.filter((pick) => pick.group === 'heavy')).toHaveLength(20);
    expect(weighted.taken.get('light')).toBe(10);
  });

  it('takes nothing for max 0 or without candidates, keeping V', () => {
    for (const input of [
      { max: 0, candidates: [candidate('a')] },
      { max: 4, candidates: [] },
      { max: 4, candidates: [candidate('a', 0)] },
    ]) {
      const plan = planGroupLease({ virtualTime: 7, rules: NO_GROUP_RULES, now: 0, ...input });
      expect(plan).toEqual({ picks: [], virtualTime: 7, groups: [], taken: new Map() });
    }
  });

  it('takes no more of a group than it has available, filling the lease from the others', () => {
    const plan = planGroupLease({ virtualTime: 0, rules: NO_GROUP_RULES, candidates: [candidate('a', 1), candidate('b', 10)], max: 5, now: 0 });
    expect(groupsOf(plan.picks)).toEqual(['a', 'b', 'b', 'b', 'b']);
  });

  it('refuses a group given twice', () => {
    expect(() => planGroupLease({ virtualTime: 0, rules: NO_GROUP_RULES, candidates: [candidate('a'), candidate('a')], max: 1, now: 0 })).toThrow(/twice/);
  });
});

describe('each group\u2019s own limits', () => {
  it('skips a group at its maxConcurrent without blocking the others, and fills only its free slots', () => {
    const capped = rules({ maxConcurrent: 2 });
    const plan = planGroupLease({
      virtualTime: 0,
      rules: capped,
      // `full` is first in SFQ order (smallest finish tag) but at its limit.
      candidates: [
        candidate('full', 100, { running: 2, finishTag: 0 }),
        candidate('one-free', 100, { running: 1, finishTag: 1 }),
        candidate('free', 100, { finishTag: 2 }),
      ],
      max: 8,
      now: 0,
    });
    expect(groupsOf(plan.picks)).toEqual(['one-free', 'free', 'free']);
    expect(plan.groups.map((group) => [group.group, group.running])).toEqual([
      ['one-free', 2],
      ['free', 2],
    ]);
    expect(groupHold(candidate('full', 1, { running: 2 }).state, capped, 0)).toEqual({ kind: 'slot' });
    expect(groupHold(groupAfterFinish(candidate('full', 1, { running: 2 }).state), capped, 0)).toEqual({ kind: 'none' });
    expect(groupAfterFinish(newGroupState('a')).running).toBe(0);
  });

  it('admits rate.limit leases per fixed window of each group, the windows on a grid from the first lease', () => {
    const rated = rules({ rate: { limit: 3, perMs: 1_000 } });
    const first = planGroupLease({ virtualTime: 0, rules: rated, candidates: [candidate('a'), candidate('b')], max: 8, now: 100 });
    expect(groupsOf(first.picks)).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
    const a = first.groups[0] as GroupState;
    expect(a).toMatchObject({ windowStart: 100, windowCount: 3 });
    expect(groupHold(a, rated, 1_099)).toEqual({ kind: 'rate', admitsAt: 1_100 });
    expect(planGroupLease({ virtualTime: first.virtualTime, rules: rated, candidates: [{ state: a, available: 5 }], max: 8, now: 1_099 }).picks).toEqual([]);
    const next = planGroupLease({ virtualTime: first.virtualTime, rules: rated, candidates: [{ state: a, available: 5 }], max: 2, now: 1_100 });
    expect(next.groups[0]).toMatchObject({ windowStart: 1_100, windowCount: 2 });
    expect(groupHold(next.groups[0] as GroupState, rated, 1_100)).toEqual({ kind: 'none' });
    // A late lease falls in the grid's window: the one after it is still due at 3_100.
    const late = planGroupLease({ virtualTime: next.virtualTime, rules: rated, candidates: [{ state: a, available: 5 }], max: 3, now: 2_170 });
    expect(late.groups[0]).toMatchObject({ windowStart: 2_100, windowCount: 3 });
    expect(groupHold(late.groups[0] as GroupState, rated, 2_200)).toEqual({ kind: 'rate', admitsAt: 3_100 });
    // Without a rate the window columns are left as they were.
    expect(planGroupLease({ virtualTime: 0, rules: NO_GROUP_RULES, candidates: [{ state: a, available: 1 }], max: 1, now: 5_000 }).groups[0]).toMatchObject({
      windowStart: 100,
      windowCount: 3,
    });
  });
});

describe('jobs within a group', () => {
  it('takes each group\u2019s jobs by priority, then runAfter, then enqueue order, whatever order they come in', () => {
    const job = (group: string, seq: number, priority = 0, runAfter = 0) => ({ group, seq, priority, runAfter, id: `${group}-${seq}` });
    const lease = decideGroupLease({
      virtualTime: 0,
      rules: NO_GROUP_RULES,
      max: 5,
      now: 0,
      candidates: [
        { state: newGroupState('a'), jobs: [job('a', 1), job('a', 2, 0, -5), job('a', 3, 9)] },
        { state: newGroupState('b'), jobs: [job('b', 4), job('b', 5, 1)] },
      ],
    });
    expect(lease.jobs.map((j) => j.id)).toEqual(['a-3', 'b-5', 'a-2', 'b-4', 'a-1']);
    expect(lease.plan.virtualTime).toBe(2 * UNIT);
    expect(() =>
      decideGroupLease({ virtualTime: 0, rules: NO_GROUP_RULES, max: 1, now: 0, candidates: [{ state: newGroupState('a'), jobs: [job('b', 1)] }] }),
    ).toThrow(/another group/);
  });
});

describe('what a store keeps', () => {
  it('forgets a row that says nothing a fresh one would not', () => {
    const rated = rules({ rate: { limit: 1, perMs: 100 } });
    const idle: GroupState = { group: 'a', finishTag: 5, running: 0, windowStart: 0, windowCount: 1 };
    expect(isGroupStateForgettable(idle, 5, rated, 100)).toBe(true);
    expect(isGroupStateForgettable(idle, 5, rated, 99)).toBe(false);
    expect(isGroupStateForgettable(idle, 4, rated, 100)).toBe(false);
    expect(isGroupStateForgettable({ ...idle, running: 1 }, 5, rated, 100)).toBe(false);
    expect(isGroupStateForgettable(idle, 5, NO_GROUP_RULES, 0)).toBe(true);
  });

  it('rebases V and the finish tags once V reaches the threshold, keeping their order', () => {
    expect(virtualTimeRebase(VIRTUAL_TIME_REBASE_AT - 1)).toBe(0);
    const v = VIRTUAL_TIME_REBASE_AT + 3;
    const by = virtualTimeRebase(v);
    expect(by).toBe(v);
    expect(rebaseFinishTag(v + 2 * UNIT, by)).toBe(2 * UNIT);
    expect(rebaseFinishTag(v - 9, by)).toBe(0);
    const before = planAt(v, [candidate('a', 3, { finishTag: v + UNIT }), candidate('b', 3, { finishTag: 1 })], 4);
    const rebased = [candidate('a', 3, { finishTag: rebaseFinishTag(v + UNIT, by) }), candidate('b', 3, { finishTag: rebaseFinishTag(1, by) })];
    const after = planAt(v - by, rebased, 4);
    expect(groupsOf(after.picks)).toEqual(groupsOf(before.picks));
  });
});

/** The plan as a backend could compute it in SQL: each group's tags s, s + c, … merged, the `max` smallest kept. */
function mergedTags(input: Parameters<typeof planGroupLease>[0]): string[] {
  const tags: { group: string; tag: number; finishTag: number }[] = [];
  for (const { state, available } of input.candidates) {
    const cost = groupJobCost(input.rules, state.group);
    let room = Math.min(available, input.max);
    if (input.rules.maxConcurrent !== null) room = Math.min(room, input.rules.maxConcurrent - state.running);
    const start = Math.max(state.finishTag, input.virtualTime);
    for (let i = 0; i < room; i++) tags.push({ group: state.group, tag: start + i * cost, finishTag: state.finishTag });
  }
  tags.sort((a, b) => a.tag - b.tag || a.finishTag - b.finishTag || compareGroupKeys(a.group, b.group));
  return tags.slice(0, input.max).map((entry) => entry.group);
}

const weightArb = fc.constantFrom(0.01, 0.25, 0.5, 1, 2, 3, 7, 100);

describe('properties', () => {
  it('equals the merge of each group\u2019s tag sequence (the SQL form)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(
          fc.record({
            group: fc.string({ minLength: 1, maxLength: 3 }),
            finishTag: fc.nat(20 * UNIT),
            running: fc.nat(4),
            available: fc.nat(6),
            weight: weightArb,
          }),
          { selector: (entry) => entry.group, maxLength: 8 },
        ),
        fc.nat(20 * UNIT),
        fc.integer({ min: 0, max: 12 }),
        fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }),
        (groups, virtualTime, max, maxConcurrent) => {
          const weights = Object.fromEntries(groups.map((g) => [g.group, g.weight]));
          const groupRules = rules({ ...(maxConcurrent === undefined ? {} : { maxConcurrent }), weights });
          const input = {
            virtualTime,
            rules: groupRules,
            max,
            now: 0,
            candidates: groups.map((g) => candidate(g.group, g.available, { finishTag: g.finishTag, running: g.running })),
          };
          const plan = planGroupLease(input);
          expect(groupsOf(plan.picks)).toEqual(mergedTags(input));
          // V never goes back, and start tags never decrease along the lease.
          expect(plan.virtualTime).toBeGreaterThanOrEqual(virtualTime);
          plan.picks.forEach((pick, i) => expect(pick.startTag).toBeGreaterThanOrEqual(plan.picks[i - 1]?.startTag ?? virtualTime));
          for (const state of plan.groups) if (maxConcurrent !== undefined) expect(state.running).toBeLessThanOrEqual(Math.max(maxConcurrent, 0));
        },
      ),
    );
  });

  it('keeps two backlogged groups within one job\u2019s cost of each other over every run of leases (SFQ\u2019s bound)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 40 }), weightArb, weightArb, (leaseSizes, wa, wb) => {
        const groupRules = rules({ weights: { a: wa, b: wb } });
        const costs = { a: groupJobCost(groupRules, 'a'), b: groupJobCost(groupRules, 'b') };
        let states = new Map<string, GroupState>([
          ['a', newGroupState('a')],
          ['b', newGroupState('b')],
        ]);
        let virtualTime = 0;
        const order: ('a' | 'b')[] = [];
        for (const max of leaseSizes) {
          const lease = planAt(
            virtualTime,
            [...states.values()].map((state) => ({ state, available: max })),
            max,
            groupRules,
          );
          virtualTime = lease.virtualTime;
          states = new Map([...states, ...lease.groups.map((state): [string, GroupState] => [state.group, state])]);
          order.push(...lease.picks.map((pick) => pick.group as 'a' | 'b'));
        }
        // Every interval [i, j) of the lease order: the virtual work each group received differs by at most one job of each.
        for (let i = 0; i < order.length; i++) {
          let work = 0;
          for (let j = i; j < order.length; j++) {
            work += order[j] === 'a' ? costs.a : -costs.b;
            expect(Math.abs(work)).toBeLessThanOrEqual(costs.a + costs.b);
          }
        }
      }),
    );
  });
});
