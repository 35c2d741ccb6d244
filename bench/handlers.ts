/**
 * Handlers for benchmarks, loaded by `leasehold worker --handlers`. `noop`
 * does nothing; `stamp` returns the wall-clock moment the handler started, in
 * fractional milliseconds, so enqueue-to-start latency can be measured across
 * processes on one host.
 */

export const handlers = {
  noop: async (): Promise<null> => null,
  /** The end-to-end scenario's untimed warm-up jobs: the same as noop, told apart by kind. */
  warm: async (): Promise<null> => null,
  stamp: async (): Promise<{ handlerStartedAt: number }> => ({ handlerStartedAt: performance.timeOrigin + performance.now() }),
};

export default handlers;
