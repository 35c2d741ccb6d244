/**
 * Response schemas used by several route modules. The protocol's Job schema
 * carries an `$id`; the copies here drop it so that each route can inline the
 * schema (the serializer and the OpenAPI generator compile routes separately).
 */

import { Type, type Static, type TObject, type TProperties } from '@sinclair/typebox';
import { Job, JobListItem } from '../../protocol/schemas.js';

function withoutId<T extends TProperties>(schema: TObject<T>): TObject<T> {
  const { $id: _unused, ...rest } = schema;
  return rest as TObject<T>;
}

export const JobBody = withoutId(Job);

export const JobListItemBody = withoutId(JobListItem);

export const JobListBody = Type.Object({ jobs: Type.Array(JobListItemBody), nextCursor: Type.Union([Type.String(), Type.Null()]) });

export const EnqueueBatchEntrySchema = Type.Object({
  idempotencyKey: Type.String(),
  status: Type.Integer(),
  replayed: Type.Optional(Type.Boolean()),
  job: Type.Optional(JobBody),
  error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() })),
});
export type EnqueueBatchEntry = Static<typeof EnqueueBatchEntrySchema>;

/** The protocol's EnqueueBatchResponse with the inlinable job schema. */
export const EnqueueBatchBody = Type.Object({ results: Type.Array(EnqueueBatchEntrySchema) });
