/**
 * The sustained run's done-when (bench/sustained.ts): the size at the end
 * within 10% of minute 5, and no upward trend in p99 over minutes 5..N by a
 * Theil–Sen fit, which one outlying minute does not tilt.
 */

import { describe, expect, it } from 'vitest';
import { sustainedVerdict } from '../../bench/sustained.js';

const MB = 1024 * 1024;
const run = (p99: (minute: number) => number, size: (minute: number) => number, minutes = 12) =>
  Array.from({ length: minutes }, (_, i) => ({ minute: i + 1, p99: p99(i + 1), sizeBytes: size(i + 1) }));

describe('sustainedVerdict', () => {
  it('passes a flat size and a noisy but flat p99', () => {
    const v = sustainedVerdict(
      run(
        (m) => 20 + (m % 2 === 0 ? 3 : -3),
        (m) => (m < 4 ? m * 10 * MB : 40 * MB + (m % 3) * MB),
      ),
    );
    expect(v).not.toBeNull();
    expect(v?.sizeOk).toBe(true);
    expect(v?.trendOk).toBe(true);
    expect(Math.abs(v?.p99PerMinute ?? 1)).toBeLessThan(0.5);
  });

  it('fails a database that keeps growing', () => {
    const v = sustainedVerdict(
      run(
        () => 20,
        (m) => m * 10 * MB,
      ),
    );
    expect(v?.growth).toBeCloseTo(1.4, 9);
    expect(v?.sizeOk).toBe(false);
    expect(v?.trendOk).toBe(true);
  });

  it('fails a p99 that climbs, and measures the climb over minutes 5..N', () => {
    const v = sustainedVerdict(
      run(
        (m) => 10 + m,
        () => 40 * MB,
      ),
    );
    expect(v?.p99PerMinute).toBeCloseTo(1, 9);
    expect(v?.p99Rise).toBeCloseTo(7, 9);
    expect(v?.trendOk).toBe(false);
    expect(v?.sizeOk).toBe(true);
  });

  it('passes a falling p99 and ignores the minutes before 5', () => {
    const v = sustainedVerdict(
      run(
        (m) => (m < 5 ? 1000 * m : 30 - m),
        () => 40 * MB,
      ),
    );
    expect(v?.p99PerMinute).toBeCloseTo(-1, 9);
    expect(v?.trendOk).toBe(true);
  });

  it('is not tilted by one slow minute at the end, where least squares is', () => {
    const v = sustainedVerdict(
      run(
        (m) => (m === 12 ? 200 : 20 + (m % 2)),
        () => 40 * MB,
      ),
    );
    expect(v?.trendOk).toBe(true);
    expect(v?.p99LeastSquaresPerMinute ?? 0).toBeGreaterThan(10);
  });

  it('says nothing with fewer than three minutes from minute 5 on', () => {
    expect(
      sustainedVerdict(
        run(
          () => 20,
          () => MB,
          6,
        ),
      ),
    ).toBeNull();
    expect(
      sustainedVerdict(
        run(
          () => 20,
          () => MB,
          7,
        ),
      ),
    ).not.toBeNull();
  });
});
