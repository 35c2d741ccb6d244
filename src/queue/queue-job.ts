/**
 * What the library's enqueue takes: a job typed by its kind, and its wire form
 * (the item of POST /jobs/batch), so the library and the HTTP front accept the
 * same fields.
 */

import type { EnqueueBatchItem } from '../protocol/schemas.js';

/** Payload types by kind name; `Record<string, unknown>` accepts any kind and payload. */
export type KindPayloads = Record<string, unknown>;

/** The fields of a QueueJob that differ from the wire's item of POST /jobs/batch, or that want a word here. */
interface QueueJobFields<Kinds extends KindPayloads, N extends keyof Kinds & string> {
  readonly kind: N;
  readonly payload: Kinds[N];
  /** Required: the same key with the same job returns the existing job; with another job, idempotency_conflict. */
  readonly idempotencyKey: EnqueueBatchItem['idempotencyKey'];
  /** Not before this time (RFC 3339 text or a Date). */
  readonly runAfter?: EnqueueBatchItem['runAfter'] | Date;
  /** Parent job ids: the job waits until all have succeeded, and is dead with dependency_failed when one ends dead or cancelled. */
  readonly dependsOn?: Readonly<NonNullable<EnqueueBatchItem['dependsOn']>>;
}

/**
 * One job to enqueue: an item of POST /jobs/batch (the fields of POST /jobs with the idempotency key beside
 * them), taken from the protocol's type, with the payload typed by its kind. A field added to the wire is a
 * field here.
 */
export type QueueJob<Kinds extends KindPayloads, Name extends keyof Kinds & string = keyof Kinds & string> = {
  [N in Name]: QueueJobFields<Kinds, N> & Readonly<Omit<EnqueueBatchItem, keyof QueueJobFields<Kinds, N>>>;
}[Name];

/** A job as the wire carries it: `runAfter` as RFC 3339 text, `dependsOn` as a plain array. */
export function wireFields<Kinds extends KindPayloads>(
  job: QueueJob<Kinds>,
): Omit<QueueJob<Kinds>, 'runAfter' | 'dependsOn'> & { readonly runAfter?: string; readonly dependsOn?: string[] } {
  const { runAfter, dependsOn, ...fields } = job;
  return {
    ...fields,
    ...(runAfter === undefined ? {} : { runAfter: runAfter instanceof Date ? runAfter.toISOString() : runAfter }),
    ...(dependsOn === undefined ? {} : { dependsOn: [...dependsOn] }),
  };
}
