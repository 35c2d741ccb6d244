/**
 * The pieces several wire bodies share: timestamps, the status and failure
 * class enumerations, kind names, lease tokens, the `{id}` path parameter,
 * the error body every route answers with (and its details), and the bare
 * acknowledgement.
 *
 * No schema in src/protocol carries an `$id`: the routes use these schemas
 * as they are, and /openapi.json spells each body out in place. With an
 * `$id`, the OpenAPI generator lifts the schema into `components` under a
 * generated `def-N` name and the document changes.
 */

import { Type, type Static } from '@sinclair/typebox';
import { FAILURE_CLASS_NAMES } from '../core/failure-classes.js';
import { JOB_STATUSES } from '../core/states.js';
import { LIMITS } from './limits.js';

export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339, UTC' });
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const JobStatusSchema = Type.Union(JOB_STATUSES.map((s) => Type.Literal(s)));

export const FailureClassSchema = Type.Union(
  FAILURE_CLASS_NAMES.map((c) => Type.Literal(c)),
  { description: 'Which rule of the queue applied to the last error (docs/ERRORS.md, "Failure classes")' },
);

export const KindName = Type.String({ minLength: 1, maxLength: LIMITS.kindLength, pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$' });

/** The lease token a worker presents with every call about its lease. */
export const Token = Type.String({ minLength: 1, maxLength: 200 });

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export type IdParams = Static<typeof IdParams>;

/** Facts an error names beside its message, for a client to act on (docs/ERRORS.md says which code carries which). */
export const ErrorDetails = Type.Object({
  jobId: Type.Optional(Type.String({ description: 'duplicate_job: the existing job that holds the unique key' })),
});
export type ErrorDetails = Static<typeof ErrorDetails>;

/** An error's stable code (docs/ERRORS.md), its message, and for some codes its details. */
export const ErrorDetail = Type.Object({ code: Type.String(), message: Type.String(), details: Type.Optional(ErrorDetails) });

/** The body of every error answer. */
export const ErrorBody = Type.Object({ error: ErrorDetail }, { description: 'An error with a stable code (docs/ERRORS.md)' });
export type ErrorBody = Static<typeof ErrorBody>;

/** The answer of calls that only acknowledge (effect, checkpoint). */
export const OkResponse = Type.Object({ ok: Type.Literal(true) });
export type OkResponse = Static<typeof OkResponse>;
