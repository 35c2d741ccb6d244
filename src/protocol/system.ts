/** The bodies of the operational routes: a tenant's statistics and the health check. */

import { Type, type Static } from '@sinclair/typebox';

export const Stats = Type.Object({
  counts: Type.Record(Type.String(), Type.Integer()),
  meanWaitMs: Type.Union([Type.Number(), Type.Null()]),
  meanRunMs: Type.Union([Type.Number(), Type.Null()], {
    description: 'Succeeded jobs: first start to final finish, retries and time between attempts included',
  }),
  meanAttemptRunMs: Type.Union([Type.Number(), Type.Null()], { description: 'Ended attempts: lease to the end of that attempt' }),
  meanTimeToCompletionMs: Type.Union([Type.Number(), Type.Null()], { description: 'Succeeded jobs: acceptance to success' }),
  leaseExpirations: Type.Integer(),
  oldestAvailableAgeMs: Type.Union([Type.Integer(), Type.Null()]),
  storageBytes: Type.Integer(),
});
export type Stats = Static<typeof Stats>;

export const HealthResponse = Type.Object({ status: Type.Literal('ok'), backend: Type.String() });
export type HealthResponse = Static<typeof HealthResponse>;
