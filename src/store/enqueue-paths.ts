/**
 * Which path an enqueue takes in either store. A job with flow (parents, a
 * concurrency key, a dedupe or a unique key) is decided inside a transaction
 * of its own; the others are plain inserts. A plain job available now and in
 * no group may also be leased at once to a parked poll
 * (Store.jobEnqueueLeased, docs/design/lease-protocol.md §4.1): a delayed or
 * grouped one is not next in lease order for any poll.
 */

import { hasEnqueueKeys } from '../core/dedupe.js';
import type { EnqueueParams } from './job-records.js';

export function hasFlow(params: EnqueueParams): boolean {
  return (params.dependsOn?.length ?? 0) > 0 || (params.concurrencyKey ?? null) !== null || hasEnqueueKeys(params);
}

export function mayHandOff(params: EnqueueParams): boolean {
  return params.runAfter === null && (params.group === undefined || params.group === null) && !hasFlow(params);
}
