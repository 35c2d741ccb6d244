/**
 * Handlers for the long-haul benchmark (bench/haul.ts), loaded by `leasehold
 * worker --handlers`. Kind A returns the moment its handler started on the
 * host's monotonic clock (host-clock.ts), like bench/handlers.ts's `stamp`.
 * When LEASEHOLD_BENCH_STAMPS names a directory and the payload carries `at`
 * (the open-loop generator's scheduled send time on the same clock), it also
 * appends "at started" to a file of its own there: the sustained run reads
 * its per-minute latencies from those files instead of fetching every job
 * back from the coordinator, which would load the coordinator it measures
 * (and retention deletes the jobs anyway).
 * Kind B has no handler: its backlog stays queued.
 */

import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import type { JobContext } from '../src/worker/handler.js';
import { hostClockMs } from './host-clock.js';

const stampsDir = process.env['LEASEHOLD_BENCH_STAMPS'];
const stampsFile = stampsDir === undefined || stampsDir === '' ? null : join(stampsDir, `${process.pid}.txt`);

export const handlers = {
  A: async (context: JobContext<{ readonly at?: unknown }>): Promise<{ handlerStartedAt: number }> => {
    const handlerStartedAt = hostClockMs();
    const at = context.payload.at;
    if (stampsFile !== null && typeof at === 'number') appendFileSync(stampsFile, `${at} ${handlerStartedAt}\n`);
    return { handlerStartedAt };
  },
};

export default handlers;
