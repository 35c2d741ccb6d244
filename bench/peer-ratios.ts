/**
 * The library mode's targets against its peers (issues 15 and 28), as ratios of
 * figures measured in one sitting: bench/compare.ts collects the figures,
 * these functions say what each ratio is and whether its target holds.
 */

import { median } from './processes.js';

/** Medians of one sitting, by the names the scripts print on their `figures` line. */
export interface Sitting {
  /** bench/embedded.ts on SQLite with 2 worker processes: `enqueue-single.perSecond`, `end-to-end.perSecond`, `latency.p50Ms`. */
  readonly sqlite?: Readonly<Record<string, number>>;
  /** bench/embedded.ts on SQLite with 1 worker process: `end-to-end.perSecond`. */
  readonly sqliteOneProcess?: Readonly<Record<string, number>>;
  /** bench/embedded.ts on PostgreSQL: `end-to-end.perSecond`. */
  readonly postgres?: Readonly<Record<string, number>>;
  /** bench/peers/bullmq.mjs: `enqueue single jobs/s`, `end-to-end jobs/s`, `latency p50 ms`. */
  readonly bullmq?: Readonly<Record<string, number>>;
  /** bench/peers/graphile-worker.mjs: `end-to-end jobs/s`. */
  readonly graphile?: Readonly<Record<string, number>>;
}

export interface Target {
  readonly name: string;
  /** 'higher': ours / peer must be at least `bound`; 'lower': ours / peer must be at most `bound`. */
  readonly better: 'higher' | 'lower';
  readonly bound: number;
  readonly ours: (s: Sitting) => number | undefined;
  readonly peer: (s: Sitting) => number | undefined;
}

export const TARGETS: readonly Target[] = [
  {
    name: 'SQLite enqueue single vs BullMQ',
    better: 'higher',
    bound: 2,
    ours: (s) => s.sqlite?.['enqueue-single.perSecond'],
    peer: (s) => s.bullmq?.['enqueue single jobs/s'],
  },
  {
    name: 'SQLite end to end, 2 processes × 16 vs BullMQ',
    better: 'higher',
    bound: 2,
    ours: (s) => s.sqlite?.['end-to-end.perSecond'],
    peer: (s) => s.bullmq?.['end-to-end jobs/s'],
  },
  {
    name: 'SQLite end to end, 1 process × 32 vs BullMQ',
    better: 'higher',
    bound: 2,
    ours: (s) => s.sqliteOneProcess?.['end-to-end.perSecond'],
    peer: (s) => s.bullmq?.['end-to-end jobs/s'],
  },
  {
    name: 'SQLite latency p50 vs BullMQ',
    better: 'lower',
    bound: 1,
    ours: (s) => s.sqlite?.['latency.p50Ms'],
    peer: (s) => s.bullmq?.['latency p50 ms'],
  },
  {
    name: 'PostgreSQL end to end vs graphile-worker',
    better: 'higher',
    bound: 2,
    ours: (s) => s.postgres?.['end-to-end.perSecond'],
    peer: (s) => s.graphile?.['end-to-end jobs/s'],
  },
];

export interface Verdict {
  readonly target: Target;
  /** One ratio per sitting that measured both sides. */
  readonly ratios: readonly number[];
  /** The median of `ratios`; undefined when no sitting measured both. */
  readonly ratio: number | undefined;
  readonly met: boolean | undefined;
}

/** Each target's ratio in every sitting and over them (the median), and whether the median meets it. */
export function verdicts(sittings: readonly Sitting[]): Verdict[] {
  return TARGETS.map((target) => {
    const ratios: number[] = [];
    for (const sitting of sittings) {
      const ours = target.ours(sitting);
      const peer = target.peer(sitting);
      if (ours !== undefined && peer !== undefined && peer > 0) ratios.push(ours / peer);
    }
    const ratio = ratios.length === 0 ? undefined : median(ratios);
    const met = ratio === undefined ? undefined : target.better === 'higher' ? ratio >= target.bound : ratio <= target.bound;
    return { target, ratios, ratio, met };
  });
}

/** The figures of a script's output: the JSON of its last line that begins with `figures `. */
export function figuresOf(output: string): Record<string, number> | undefined {
  const line = output
    .split('\n')
    .reverse()
    .find((text) => text.startsWith('figures '));
  if (line === undefined) return undefined;
  const parsed = JSON.parse(line.slice('figures '.length)) as unknown;
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  return Object.fromEntries(Object.entries(parsed).filter((entry): entry is [string, number] => typeof entry[1] === 'number'));
}
