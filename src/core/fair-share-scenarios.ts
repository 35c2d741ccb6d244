/**
 * The scenarios of docs/FAIRNESS.md for the logical-clock simulation
 * (fair-share-simulation.ts), and the table that reports them. Each scenario
 * draws its service times from its own seed, uniform in 50–150 ms, on 8
 * worker slots that lease up to 8 jobs at a time; the same jobs run under the
 * fair policy and, for comparison, in plain lease order (FIFO).
 */

import { NO_GROUP_RULES, parseGroupRules, type GroupLimitsConfig, type GroupRules } from './fair-share.js';
import { drawInteger, seededRandom, type FairShareScenario, type SimulatedJob, type SimulationReport } from './fair-share-simulation.js';
import type { Random } from './random.js';

export const SIMULATION_SLOTS = 8;
export const SERVICE_MS_LOW = 50;
export const SERVICE_MS_HIGH = 150;

function jobs(random: Random, group: string, count: number, at: (index: number) => number, customer = group): SimulatedJob[] {
  return Array.from({ length: count }, (_, index) => ({
    group,
    customer,
    enqueueAt: at(index),
    serviceMs: drawInteger(random, SERVICE_MS_LOW, SERVICE_MS_HIGH),
    priority: 0,
  }));
}

/** Rules from a kind's `groups`, throwing on a scenario's own mistake. */
export function rulesOf(config: GroupLimitsConfig): GroupRules {
  const parsed = parseGroupRules(config);
  if (!parsed.ok) throw new Error(parsed.problems.join('; '));
  return parsed.rules;
}

function scenario(name: string, watched: string, jobList: SimulatedJob[], rules: GroupRules = NO_GROUP_RULES, shareFrom = 0): FairShareScenario {
  return { name, slots: SIMULATION_SLOTS, leaseMax: SIMULATION_SLOTS, rules, jobs: jobList, watched, shareFrom };
}

/** One group enqueues 10,000 jobs, another 10, at `lightAt` (after the heavy ones when both are at 0); shares count from `lightAt`. */
export function skewScenario(lightAt = 0): FairShareScenario {
  const random = seededRandom(lightAt === 0 ? 1 : 2);
  const name = lightAt === 0 ? 'skew' : `skew, light at ${lightAt / 1_000} s`;
  return scenario(name, 'light', [...jobs(random, 'heavy', 10_000, () => 0), ...jobs(random, 'light', 10, () => lightAt)], NO_GROUP_RULES, lightAt);
}

/** A backlog of 10,000 while a light group enqueues one job a second, 100 in all. */
export function trickleScenario(): FairShareScenario {
  const random = seededRandom(3);
  return scenario('trickle', 'light', [...jobs(random, 'heavy', 10_000, () => 0), ...jobs(random, 'light', 100, (index) => 500 + index * 1_000)]);
}

/**
 * One customer spread over 100 groups of 50 jobs (enqueued first) against an honest customer's one group of
 * 5,000; `weighted` gives each of the 100 groups weight 0.01, so together they weigh what the honest one does.
 */
export function sybilScenario(weighted: boolean): FairShareScenario {
  const random = seededRandom(4);
  const sybils = Array.from({ length: 100 }, (_, index) => `sybil-${String(index).padStart(2, '0')}`);
  const jobList = [...sybils.flatMap((group) => jobs(random, group, 50, () => 0, 'sybil')), ...jobs(random, 'honest', 5_000, () => 0)];
  const rules = weighted ? rulesOf({ weights: Object.fromEntries(sybils.map((group) => [group, 0.01])) }) : NO_GROUP_RULES;
  return scenario(weighted ? 'sybil, weights 0.01 each' : 'sybil, no weights', 'honest', jobList, rules);
}

/** When the returning group comes back in the heavy-idle scenario. */
export const HEAVY_IDLE_RETURN_MS = 120_000;

/**
 * Two groups share the slots until `returning` drains its 1,000 jobs; `steady` (20,000 jobs) then runs alone
 * for about 95 s, and at 120 s `returning` comes back with 2,000 jobs. Shares count from its return.
 */
export function heavyIdleScenario(): FairShareScenario {
  const random = seededRandom(5);
  const jobList = [
    ...jobs(random, 'steady', 20_000, () => 0),
    ...jobs(random, 'returning', 1_000, () => 0),
    ...jobs(random, 'returning', 2_000, () => HEAVY_IDLE_RETURN_MS),
  ];
  return scenario('heavy-idle', 'steady', jobList, NO_GROUP_RULES, HEAVY_IDLE_RETURN_MS);
}

/** The scenarios of the table, in its order. */
export function fairShareScenarios(): FairShareScenario[] {
  return [skewScenario(), skewScenario(5_000), trickleScenario(), sybilScenario(true), sybilScenario(false), heavyIdleScenario()];
}

function milliseconds(value: number): string {
  if (value >= 10_000) return `${(value / 1_000).toFixed(1)} s`;
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ms`;
}

function percent(value: number): string {
  return `${(value * 100).toFixed(1)}%`;
}

/** A Markdown table of the reports: one row per scenario and policy. */
export function formatSimulationTable(reports: readonly SimulationReport[]): string {
  const header = [
    '| scenario | policy | watched | first wait | mean wait | longest stall | makespan | idle slot-ms while work waited | share in window (weight share) |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  const rows = reports.map((r) => {
    const shares = r.customers.map((c) => `${c.customer} ${percent(c.share)} (${percent(c.weightShare)})`).join(', ');
    const w = r.watched;
    const cells = [r.scenario, r.policy, w.customer, milliseconds(w.firstWaitMs), milliseconds(w.meanWaitMs), milliseconds(w.longestStallMs)];
    return `| ${[...cells, milliseconds(r.makespanMs), String(r.idleWhileWaitingSlotMs), shares].join(' | ')} |`;
  });
  return [...header, ...rows].join('\n');
}
