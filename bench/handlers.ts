/**
 * Handlers for benchmarks, loaded by `leasehold worker --handlers`. `noop`
 * does nothing; `stamp` returns the moment the handler started on the host's
 * monotonic clock (host-clock.ts), in fractional milliseconds, so
 * enqueue-to-start latency can be measured across processes on one host.
 */

import { hostClockMs } from './host-clock.js';

export const handlers = {
  noop: async (): Promise<null> => null,
  /** The end-to-end scenario's untimed warm-up jobs: the same as noop, told apart by kind. */
  warm: async (): Promise<null> => null,
  stamp: async (): Promise<{ handlerStartedAt: number }> => ({ handlerStartedAt: hostClockMs() }),
};

export default handlers;
