/**
 * The fair lease on a logical clock (src/core/fair-share-simulation.ts and
 * fair-share-scenarios.ts): the scenarios of docs/FAIRNESS.md with their
 * bounds, the FIFO baseline that shows what the bounds protect against, and
 * each group's limits in a running pool. Nothing here sleeps or reads a
 * clock; every run is reproducible from its seeds.
 *
 * `FAIRNESS_TABLE=1 npx vitest run test/unit/fair-share-simulation.test.ts`
 * prints the table that docs/FAIRNESS.md shows.
 */

import { describe, expect, it } from 'vitest';
import { NO_GROUP_RULES } from '../../src/core/fair-share.js';
import {
  fairShareScenarios,
  formatSimulationTable,
  heavyIdleScenario,
  rulesOf,
  SERVICE_MS_HIGH,
  skewScenario,
  sybilScenario,
  trickleScenario,
} from '../../src/core/fair-share-scenarios.js';
import {
  drawInteger,
  runFairShareSimulation,
  seededRandom,
  type FairShareScenario,
  type SimulatedJob,
  type SimulationReport,
} from '../../src/core/fair-share-simulation.js';

function shareOf(report: SimulationReport, customer: string): number {
  const found = report.customers.find((c) => c.customer === customer);
  if (found === undefined) throw new Error(`no customer ${customer}`);
  return found.share;
}

function pool(name: string, jobs: SimulatedJob[], config: Parameters<typeof rulesOf>[0]): FairShareScenario {
  return { name, slots: 8, leaseMax: 8, rules: rulesOf(config), jobs, watched: jobs[0]?.customer ?? '', shareFrom: 0 };
}

/** `count` jobs of `group` enqueued at `at`, each running `serviceMs`, or a seeded 50–150 ms for 'varied'. */
function backlog(group: string, count: number, serviceMs: number | 'varied' = 100, at = 0): SimulatedJob[] {
  const random = seededRandom(count);
  const service = (): number => (serviceMs === 'varied' ? drawInteger(random, 50, 150) : serviceMs);
  return Array.from({ length: count }, () => ({ group, customer: group, enqueueAt: at, serviceMs: service(), priority: 0 }));
}

describe('the seeded simulation', () => {
  it('draws the same stream from the same seed, another from another', () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const first = Array.from({ length: 5 }, () => a());
    expect(Array.from({ length: 5 }, () => b())).toEqual(first);
    expect(seededRandom(43)()).not.toBe(first[0]);
    for (const value of first) expect(value >= 0 && value < 1).toBe(true);
    const random = seededRandom(7);
    const draws = Array.from({ length: 2_000 }, () => drawInteger(random, 50, 150));
    expect(Math.min(...draws)).toBe(50);
    expect(Math.max(...draws)).toBe(150);
  });

  it('reproduces a run exactly', () => {
    const once = runFairShareSimulation(trickleScenario());
    const again = runFairShareSimulation(trickleScenario());
    expect(again.starts).toEqual(once.starts);
    expect(again.makespanMs).toBe(once.makespanMs);
  });
});

describe('the scenarios', () => {
  const reports = fairShareScenarios().flatMap((scenario) => [runFairShareSimulation(scenario, 'fair'), runFairShareSimulation(scenario, 'fifo')]);
  const fair = (name: string): SimulationReport => {
    const found = reports.find((r) => r.scenario === name && r.policy === 'fair');
    if (found === undefined) throw new Error(`no scenario ${name}`);
    return found;
  };

  if (process.env['FAIRNESS_TABLE'] === '1') console.log(`\n${formatSimulationTable(reports)}\n`);

  it('is work-conserving: no slot idles while a job its group\u2019s limits allow is queued, under either policy', () => {
    for (const report of reports) expect(report.idleWhileWaitingSlotMs, `${report.scenario} ${report.policy}`).toBe(0);
  });

  it('skew: the light group starts within 2% of the makespan of its enqueue, whether it came with the backlog or after', () => {
    for (const scenario of [skewScenario(), skewScenario(5_000)]) {
      const report = fair(scenario.name);
      const light = report.watched;
      expect(light.firstWaitMs).toBeLessThanOrEqual(0.02 * report.makespanMs);
      // Every one of its 10 jobs, not only the first: it takes half the slots until it is done.
      expect(light.meanWaitMs).toBeLessThanOrEqual(3 * SERVICE_MS_HIGH);
      expect(shareOf(report, 'light')).toBeCloseTo(0.5, 1);
    }
    // Without groups the light jobs wait behind the whole backlog.
    const fifo = reports.find((r) => r.scenario === 'skew' && r.policy === 'fifo');
    expect(fifo?.watched.firstWaitMs).toBeGreaterThan(0.9 * (fifo?.makespanMs ?? 0));
  });

  it('trickle: each light job starts by the time the next slot frees, however deep the backlog', () => {
    const report = fair('trickle');
    expect(report.watched.jobs).toBe(100);
    expect(Math.max(...report.starts.filter((s) => s.customer === 'light').map((s) => s.waitMs))).toBeLessThanOrEqual(SERVICE_MS_HIGH);
    expect(report.watched.longestStallMs).toBeLessThanOrEqual(SERVICE_MS_HIGH);
  });

  it('sybil: a customer over 100 groups weighted 0.01 each gets one share; unweighted, 100 shares', () => {
    const weighted = fair(sybilScenario(true).name);
    expect(shareOf(weighted, 'honest')).toBeGreaterThan(0.48);
    expect(shareOf(weighted, 'honest')).toBeLessThan(0.52);
    expect(weighted.watched.weightShare).toBeCloseTo(0.5, 6);
    // Weights do not shrink a group's first job: each of the 100 starts at V, so honest may wait for 100 jobs once.
    expect(weighted.watched.longestStallMs).toBeLessThanOrEqual(Math.ceil(100 / 8) * SERVICE_MS_HIGH);
    const unweighted = fair(sybilScenario(false).name);
    expect(shareOf(unweighted, 'honest')).toBeCloseTo(1 / 101, 2);
    expect(unweighted.watched.weightShare).toBeCloseTo(1 / 101, 6);
  });

  it('shares follow the weights within 2 points wherever both customers stay backlogged', () => {
    for (const report of [fair('skew'), fair(sybilScenario(true).name), fair(sybilScenario(false).name), fair('heavy-idle')]) {
      for (const customer of report.customers) {
        expect(Math.abs(customer.share - customer.weightShare), `${report.scenario} ${customer.customer}`).toBeLessThanOrEqual(0.02);
      }
    }
  });

  it('heavy-idle: the group that comes back after idling gets no more than its share, and the other never stalls', () => {
    const report = fair(heavyIdleScenario().name);
    expect(report.shareWindow.to).toBeGreaterThan(report.shareWindow.from + 20_000);
    expect(shareOf(report, 'returning')).toBeLessThanOrEqual(0.52);
    const steadyAfterReturn = report.starts.filter((s) => s.customer === 'steady' && s.at >= report.shareWindow.from && s.at <= report.shareWindow.to);
    const gaps = steadyAfterReturn.slice(1).map((s, i) => s.at - (steadyAfterReturn[i]?.at ?? s.at));
    expect(Math.max(...gaps)).toBeLessThanOrEqual(SERVICE_MS_HIGH);
    expect(report.watched.longestStallMs).toBeLessThanOrEqual(SERVICE_MS_HIGH);
  });
});

describe('each group\u2019s limits in a running pool', () => {
  it('caps each group at maxConcurrent while the others take the free slots', () => {
    const jobs = [...backlog('capped', 200, 'varied'), ...backlog('other', 201, 'varied'), ...backlog('third', 5, 'varied', 1_000)];
    const report = runFairShareSimulation(pool('capped', jobs, { maxConcurrent: 2 }));
    for (const group of ['capped', 'other', 'third']) expect(report.peakRunning.get(group)).toBe(2);
    // Six slots at most are busy; the two left idle wait for no leasable job.
    expect(report.idleWhileWaitingSlotMs).toBe(0);
    const third = report.starts.filter((s) => s.group === 'third');
    expect(third[0]?.waitMs).toBe(0);
    // `slow` is first in SFQ order (fewer jobs taken) but at its limit for a second: `fast` runs all its jobs meanwhile.
    const held = runFairShareSimulation(pool('held first', [...backlog('slow', 20, 1_000), ...backlog('fast', 100, 10)], { maxConcurrent: 4 }));
    expect(held.starts.filter((s) => s.group === 'fast').every((s) => s.at < 1_000)).toBe(true);
    expect(held.starts.filter((s) => s.group === 'slow' && s.at < 1_000)).toHaveLength(4);
    expect(held.idleWhileWaitingSlotMs).toBe(0);
  });

  it('holds each group to rate.limit starts per window of its own, without throttling the others', () => {
    const jobs = [...backlog('rated-a', 60, 10), ...backlog('rated-b', 60, 10)];
    const limit = 5;
    const perMs = 1_000;
    const report = runFairShareSimulation(pool('rated', jobs, { rate: { limit, perMs } }));
    expect(report.idleWhileWaitingSlotMs).toBe(0);
    for (const group of ['rated-a', 'rated-b']) {
      const times = report.starts.filter((s) => s.group === group).map((s) => s.at);
      expect(times).toHaveLength(60);
      // Fixed windows on a grid from the group's first start.
      const perWindow = new Map<number, number>();
      for (const at of times) {
        const window = Math.floor((at - (times[0] ?? 0)) / perMs);
        perWindow.set(window, (perWindow.get(window) ?? 0) + 1);
      }
      for (const count of perWindow.values()) expect(count).toBeLessThanOrEqual(limit);
      // Any span of perMs holds at most two windows' worth; 60 jobs need 12 windows.
      for (const [i, at] of times.entries()) expect(times.filter((t) => t >= at && t < at + perMs).length, `from start ${i}`).toBeLessThanOrEqual(2 * limit);
      expect(times[times.length - 1]).toBeGreaterThanOrEqual(11 * perMs);
    }
    // A group the rate does not reach is not slowed by another's limit.
    const mixed = runFairShareSimulation(pool('mixed', [...backlog('rated', 20, 10), ...backlog('free', 20, 10)], { rate: { limit: 100, perMs: 1_000 } }));
    expect(mixed.starts.filter((s) => s.group === 'free').every((s) => s.at < 1_000)).toBe(true);
  });

  it('runs a group\u2019s jobs in priority order, FIFO within a priority', () => {
    const jobs: SimulatedJob[] = [0, 5, 0, 9, 5].map((priority) => ({ group: 'g', customer: 'g', enqueueAt: 0, serviceMs: 10, priority }));
    const oneSlot: FairShareScenario = { name: 'priority', slots: 1, leaseMax: 1, rules: NO_GROUP_RULES, jobs, watched: 'g', shareFrom: 0 };
    expect(runFairShareSimulation(oneSlot).starts.map((s) => s.priority)).toEqual([9, 5, 5, 0, 0]);
  });
});
