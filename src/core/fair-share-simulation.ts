/**
 * A discrete-event simulation of fair leases on a logical clock: a pool of
 * worker slots leases jobs through planGroupLease exactly as a store would
 * (the kind's V and one state row per group; as candidates, the groups with
 * queued jobs and no hold, fewest first by (finish tag, key), as many as the
 * lease's max), runs each for its service time and finishes it. Nothing
 * reads a wall clock or Math.random: a scenario fixes every arrival and
 * service time up front (seededRandom), so a run is reproducible and the fair
 * and the FIFO policies see the same work. fair-share-scenarios.ts holds the
 * scenarios of docs/FAIRNESS.md; test/unit/fair-share-simulation.test.ts
 * asserts their bounds.
 */

import {
  compareGroupKeys,
  compareLeaseOrder,
  groupAfterFinish,
  groupHold,
  groupJobCost,
  type GroupRules,
  type GroupState,
  newGroupState,
  NO_GROUP_RULES,
  planGroupLease,
  type QueuedGroupJob,
  UNGROUPED,
} from './fair-share.js';
import type { Random } from './random.js';

/**
 * A seeded uniform draw in [0, 1): a 32-bit counter stepped by the golden
 * ratio and run through an integer mixer (xor-shifts and multiplications,
 * the splitmix construction), so every seed gives its own reproducible stream.
 */
export function seededRandom(seed: number): Random {
  let counter = seed >>> 0;
  return () => {
    counter = (counter + 0x9e3779b9) >>> 0;
    let z = counter;
    z = Math.imul(z ^ (z >>> 16), 0x21f0aaad) >>> 0;
    z = Math.imul(z ^ (z >>> 15), 0x735a2d97) >>> 0;
    return ((z ^ (z >>> 15)) >>> 0) / 2 ** 32;
  };
}

/** An integer drawn uniformly from [low, high]. */
export function drawInteger(random: Random, low: number, high: number): number {
  return low + Math.floor(random() * (high - low + 1));
}

export interface SimulatedJob {
  /** The job's group; UNGROUPED for none. */
  readonly group: string;
  /** Who the job is for: several groups may serve one customer (the sybil scenario). */
  readonly customer: string;
  readonly enqueueAt: number;
  readonly serviceMs: number;
  readonly priority: number;
}

export interface FairShareScenario {
  readonly name: string;
  readonly slots: number;
  /** The most jobs one lease takes (a worker's batch). */
  readonly leaseMax: number;
  readonly rules: GroupRules;
  readonly jobs: readonly SimulatedJob[];
  /** The customer whose waits the report shows. */
  readonly watched: string;
  /** Shares are counted from here to the moment the first customer starts its last job. */
  readonly shareFrom: number;
}

/** 'fair': the groups as given; 'fifo': every job in one group, which is the lease order without groups. */
export type SimulationPolicy = 'fair' | 'fifo';

export interface JobStart {
  readonly group: string;
  readonly customer: string;
  readonly at: number;
  readonly waitMs: number;
  readonly priority: number;
}

export interface CustomerReport {
  readonly customer: string;
  readonly jobs: number;
  /** Fraction of the jobs started in the share window. */
  readonly share: number;
  /** The customer's groups' weight over the weight of every customer's groups. */
  readonly weightShare: number;
  readonly firstWaitMs: number;
  readonly meanWaitMs: number;
  /** The longest time the customer had a queued job and started none. */
  readonly longestStallMs: number;
}

export interface SimulationReport {
  readonly scenario: string;
  readonly policy: SimulationPolicy;
  readonly makespanMs: number;
  /** Slot-milliseconds left idle while some group had a job its own limits allowed: 0 when work-conserving. */
  readonly idleWhileWaitingSlotMs: number;
  readonly shareWindow: { readonly from: number; readonly to: number };
  readonly customers: readonly CustomerReport[];
  readonly watched: CustomerReport;
  /** Every start in order: for checking limits and priorities. */
  readonly starts: readonly JobStart[];
  /** The most jobs of each group that ever ran at once. */
  readonly peakRunning: ReadonlyMap<string, number>;
}

interface PendingJob extends QueuedGroupJob {
  readonly job: SimulatedJob;
}

interface GroupLane {
  state: GroupState;
  readonly queue: PendingJob[];
  head: number;
}

interface Running {
  readonly endAt: number;
  readonly key: string;
  readonly group: string;
}

interface CustomerTally {
  queued: number;
  waitingSince: number;
  longestStallMs: number;
  readonly waits: number[];
}

/** Inserts in lease order after the queue's head (arrivals mostly go last). */
function insertInLeaseOrder(lane: GroupLane, job: PendingJob): void {
  let low = lane.head;
  let high = lane.queue.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compareLeaseOrder(lane.queue[middle] as PendingJob, job) <= 0) low = middle + 1;
    else high = middle;
  }
  lane.queue.splice(low, 0, job);
}

function queuedIn(lane: GroupLane): number {
  return lane.queue.length - lane.head;
}

/** Runs a scenario to its end. */
export function runFairShareSimulation(scenario: FairShareScenario, policy: SimulationPolicy = 'fair'): SimulationReport {
  const rules = policy === 'fair' ? scenario.rules : NO_GROUP_RULES;
  const arrivals = scenario.jobs.map((job, index) => ({ job, index })).sort((a, b) => a.job.enqueueAt - b.job.enqueueAt || a.index - b.index);
  const lanes = new Map<string, GroupLane>();
  const tallies = new Map<string, CustomerTally>();
  for (const job of scenario.jobs) {
    if (!tallies.has(job.customer)) tallies.set(job.customer, { queued: 0, waitingSince: 0, longestStallMs: 0, waits: [] });
  }
  const running: Running[] = [];
  const runningByGroup = new Map<string, number>();
  const peakRunning = new Map<string, number>();
  const starts: JobStart[] = [];
  let virtualTime = 0;
  let nextArrival = 0;
  let now = 0;
  let makespan = 0;
  let idleWhileWaiting = 0;

  const tallyOf = (customer: string): CustomerTally => tallies.get(customer) as CustomerTally;
  const leasable = (): GroupLane[] => [...lanes.values()].filter((lane) => queuedIn(lane) > 0 && groupHold(lane.state, rules, now).kind === 'none');

  for (;;) {
    for (let i = running.length - 1; i >= 0; i--) {
      const done = running[i] as Running;
      if (done.endAt > now) continue;
      running.splice(i, 1);
      const lane = lanes.get(done.key) as GroupLane;
      lane.state = groupAfterFinish(lane.state);
      runningByGroup.set(done.group, (runningByGroup.get(done.group) ?? 1) - 1);
      makespan = Math.max(makespan, done.endAt);
    }
    for (; nextArrival < arrivals.length && (arrivals[nextArrival]?.job.enqueueAt ?? Infinity) <= now; nextArrival++) {
      const { job, index } = arrivals[nextArrival] as { job: SimulatedJob; index: number };
      const key = policy === 'fair' ? job.group : UNGROUPED;
      let lane = lanes.get(key);
      if (lane === undefined) lanes.set(key, (lane = { state: newGroupState(key), queue: [], head: 0 }));
      insertInLeaseOrder(lane, { job, group: key, priority: job.priority, runAfter: job.enqueueAt, seq: index });
      const tally = tallyOf(job.customer);
      if (tally.queued++ === 0) tally.waitingSince = now;
    }

    while (running.length < scenario.slots) {
      const max = Math.min(scenario.slots - running.length, scenario.leaseMax);
      // The candidate index: groups with queued jobs and no hold, fewest first by (finish tag, key), `max` of them.
      const candidates = leasable()
        .sort((a, b) => a.state.finishTag - b.state.finishTag || compareGroupKeys(a.state.group, b.state.group))
        .slice(0, max)
        .map((lane) => ({ state: lane.state, available: Math.min(queuedIn(lane), max) }));
      const plan = planGroupLease({ virtualTime, rules, candidates, max, now });
      if (plan.picks.length === 0) break;
      virtualTime = plan.virtualTime;
      for (const state of plan.groups) (lanes.get(state.group) as GroupLane).state = state;
      for (const pick of plan.picks) {
        const lane = lanes.get(pick.group) as GroupLane;
        const { job } = lane.queue[lane.head++] as PendingJob;
        running.push({ endAt: now + job.serviceMs, key: pick.group, group: job.group });
        const count = (runningByGroup.get(job.group) ?? 0) + 1;
        runningByGroup.set(job.group, count);
        peakRunning.set(job.group, Math.max(peakRunning.get(job.group) ?? 0, count));
        const tally = tallyOf(job.customer);
        tally.longestStallMs = Math.max(tally.longestStallMs, now - tally.waitingSince);
        tally.waitingSince = now;
        tally.queued -= 1;
        tally.waits.push(now - job.enqueueAt);
        starts.push({ group: job.group, customer: job.customer, at: now, waitMs: now - job.enqueueAt, priority: job.priority });
        trimConsumed(lane);
      }
    }

    let next = arrivals[nextArrival]?.job.enqueueAt ?? Infinity;
    for (const job of running) next = Math.min(next, job.endAt);
    for (const lane of lanes.values()) {
      const hold = queuedIn(lane) > 0 ? groupHold(lane.state, rules, now) : null;
      if (hold?.kind === 'rate') next = Math.min(next, hold.admitsAt);
    }
    if (next === Infinity) break;
    if (leasable().length > 0) idleWhileWaiting += (scenario.slots - running.length) * (next - now);
    now = next;
  }

  return report(scenario, policy, { starts, tallies, peakRunning, makespan, idleWhileWaiting });
}

/** Drops a queue's consumed head now and then, so inserts into a long backlog do not shift it again and again. */
function trimConsumed(lane: GroupLane): void {
  if (lane.head < 4_096) return;
  lane.queue.splice(0, lane.head);
  lane.head = 0;
}

function report(
  scenario: FairShareScenario,
  policy: SimulationPolicy,
  run: { starts: JobStart[]; tallies: Map<string, CustomerTally>; peakRunning: Map<string, number>; makespan: number; idleWhileWaiting: number },
): SimulationReport {
  const lastStart = new Map<string, number>();
  for (const start of run.starts) lastStart.set(start.customer, start.at);
  const to = Math.min(...[...lastStart.values()].filter((at) => at >= scenario.shareFrom));
  const inWindow = run.starts.filter((start) => start.at >= scenario.shareFrom && start.at <= to);
  const weightOf = new Map<string, number>();
  const seenGroups = new Set<string>();
  for (const job of scenario.jobs) {
    if (seenGroups.has(job.group)) continue;
    seenGroups.add(job.group);
    weightOf.set(job.customer, (weightOf.get(job.customer) ?? 0) + 1 / groupJobCost(scenario.rules, job.group));
  }
  const totalWeight = [...weightOf.values()].reduce((sum, weight) => sum + weight, 0);
  const customers = [...run.tallies.entries()]
    .sort(([a], [b]) => compareGroupKeys(a, b))
    .map(
      ([customer, tally]): CustomerReport => ({
        customer,
        jobs: tally.waits.length,
        share: inWindow.length === 0 ? 0 : inWindow.filter((start) => start.customer === customer).length / inWindow.length,
        weightShare: (weightOf.get(customer) ?? 0) / totalWeight,
        firstWaitMs: tally.waits[0] ?? 0,
        meanWaitMs: tally.waits.reduce((sum, wait) => sum + wait, 0) / Math.max(1, tally.waits.length),
        longestStallMs: tally.longestStallMs,
      }),
    );
  const watched = customers.find((customer) => customer.customer === scenario.watched);
  if (watched === undefined) throw new Error(`scenario ${scenario.name} watches ${scenario.watched}, who has no jobs`);
  return {
    scenario: scenario.name,
    policy,
    makespanMs: run.makespan,
    idleWhileWaitingSlotMs: run.idleWhileWaiting,
    shareWindow: { from: scenario.shareFrom, to },
    customers,
    watched,
    starts: run.starts,
    peakRunning: run.peakRunning,
  };
}
