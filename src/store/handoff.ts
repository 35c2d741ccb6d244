/**
 * Which enqueues may lease their job at once to a parked poll
 * (Store.jobEnqueueLeased, docs/design/lease-protocol.md §4.1): a plain job,
 * available now, in no group. A job with parents, a concurrency key or a
 * dedupe or unique key is decided by its own transaction, and a delayed or
 * grouped one is not next in lease order for any poll.
 */

import { hasEnqueueKeys } from '../core/dedupe.js';
import type { EnqueueParams } from './job-records.js';

export function mayHandOff(params: EnqueueParams): boolean {
  return (
    params.runAfter === null &&
    (params.group === undefined || params.group === null) &&
    (params.dependsOn?.length ?? 0) === 0 &&
    (params.concurrencyKey ?? null) === null &&
    !hasEnqueueKeys(params)
  );
}
