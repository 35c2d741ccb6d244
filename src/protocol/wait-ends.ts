/**
 * The states `GET /jobs/{id}?waitMs` waits for: a job in one of them will not
 * move again without an operator. The coordinator answers a long poll as soon
 * as the job reaches one; the client's `waitForJob` stops polling there.
 * Plain values, so the client reads them without loading the schemas.
 */

import type { JobStatus } from '../core/states.js';

export const WAIT_END_STATUSES: readonly JobStatus[] = Object.freeze(['succeeded', 'dead', 'cancelled', 'unknown'] as const);
