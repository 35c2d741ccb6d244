/**
 * A job's last error as both backends read it from their columns: the code,
 * the sanitized message, and the failure class — stored since migration 2,
 * inferred from the code and state for rows written before it.
 */

import { inferFailureClass, isFailureClass } from '../core/failure-classes.js';
import type { JobStatus } from '../core/states.js';
import type { StoredJobError } from './store.js';

export interface LastErrorColumns {
  readonly code: string | null;
  readonly message: string | null;
  readonly storedClass: string | null;
  readonly status: JobStatus;
  readonly attempts: number;
  readonly maxAttempts: number;
}

export function storedJobError(columns: LastErrorColumns): StoredJobError | null {
  if (columns.code === null) return null;
  return {
    code: columns.code,
    message: columns.message ?? '',
    class: isFailureClass(columns.storedClass) ? columns.storedClass : inferFailureClass(columns, columns.code),
  };
}
