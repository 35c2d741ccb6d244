/**
 * The peer comparison's ratios (bench/peer-ratios.ts): leasehold over the
 * peer within each sitting, the median over sittings, the direction of each
 * target (throughput at least, latency at most), and the figures line each
 * bench script prints last.
 */

import { describe, expect, it } from 'vitest';
import { figuresOf, verdicts, type Sitting } from '../../bench/peer-ratios.js';

const sitting = (sqliteE2e: number, bullmqE2e: number, p50: number, bullmqP50: number): Sitting => ({
  sqlite: { 'enqueue-single.perSecond': 20_000, 'end-to-end.perSecond': sqliteE2e, 'latency.p50Ms': p50 },
  sqliteOneProcess: { 'end-to-end.perSecond': sqliteE2e * 1.5 },
  bullmq: { 'enqueue single jobs/s': 10_000, 'end-to-end jobs/s': bullmqE2e, 'latency p50 ms': bullmqP50 },
  postgres: { 'end-to-end.perSecond': 3_000 },
  graphile: { 'end-to-end jobs/s': 2_500 },
});

const byName = (sittings: readonly Sitting[]) => new Map(verdicts(sittings).map((v) => [v.target.name, v]));

describe('peer ratios', () => {
  it('divides ours by the peer of the same sitting and takes the median over sittings', () => {
    const v = byName([sitting(8_000, 10_000, 1, 1), sitting(30_000, 10_000, 1, 1), sitting(21_000, 10_000, 1, 1)]);
    const e2e = v.get('SQLite end to end, 2 processes × 16 vs BullMQ');
    expect(e2e?.ratios).toEqual([0.8, 3, 2.1]);
    expect(e2e?.ratio).toBeCloseTo(2.1);
    expect(e2e?.met).toBe(true);
    expect(v.get('SQLite enqueue single vs BullMQ')?.ratio).toBe(2);
    expect(v.get('SQLite enqueue single vs BullMQ')?.met).toBe(true);
    expect(v.get('PostgreSQL end to end vs graphile-worker')?.ratio).toBe(1.2);
    expect(v.get('PostgreSQL end to end vs graphile-worker')?.met).toBe(false);
  });

  it('holds latency to at most the peer, throughput to at least the bound', () => {
    const slower = byName([sitting(10_000, 10_000, 1.5, 1.2)]);
    expect(slower.get('SQLite latency p50 vs BullMQ')?.ratio).toBeCloseTo(1.25);
    expect(slower.get('SQLite latency p50 vs BullMQ')?.met).toBe(false);
    expect(slower.get('SQLite end to end, 1 process × 32 vs BullMQ')?.met).toBe(false);
    const faster = byName([sitting(10_000, 10_000, 1.1, 1.2)]);
    expect(faster.get('SQLite latency p50 vs BullMQ')?.met).toBe(true);
  });

  it('leaves a target unmeasured when a sitting lacks either side', () => {
    const { postgres: _p, graphile: _g, ...withoutPostgres } = sitting(1, 1, 1, 1);
    const v = byName([withoutPostgres]);
    expect(v.get('PostgreSQL end to end vs graphile-worker')?.ratio).toBeUndefined();
    expect(v.get('PostgreSQL end to end vs graphile-worker')?.met).toBeUndefined();
  });

  it("reads the last figures line of a script's output", () => {
    const output = 'bench\nfigures {"a":1}\nmore\nfigures {"end-to-end.perSecond":4502.5,"note":"x"}\n';
    expect(figuresOf(output)).toEqual({ 'end-to-end.perSecond': 4502.5 });
    expect(figuresOf('no figures here')).toBeUndefined();
  });
});
