/**
 * The clock that latency across processes is measured by: milliseconds of the
 * host's monotonic clock (CLOCK_MONOTONIC, through process.hrtime), which
 * every process on one host reads alike. Not performance.timeOrigin +
 * performance.now(): each process's timeOrigin is the wall clock at its start,
 * and on a VM the wall clock moves against the monotonic one by milliseconds
 * (up to 4 ms within seconds on the 2-core VM of 2026-12-04), as much as the
 * latencies measured, so two processes' readings disagreed by a different
 * few milliseconds in every run.
 */
export function hostClockMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
