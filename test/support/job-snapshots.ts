/**
 * The running job and failure policy the pure transition tests start from
 * (test/unit/transitions.test.ts, test/unit/core-boundaries.test.ts).
 */

import type { JobSnapshot } from '../../src/core/transitions.js';

export const NOW = 1_000_000;

export const running: JobSnapshot = {
  status: 'running',
  attempts: 1,
  maxAttempts: 3,
  leaseToken: 'tok',
  leaseExpiresAt: NOW + 100,
  deadlineAt: null,
  effectStartedAt: null,
  cancelRequested: false,
  lastOutcome: null,
};

export const policy = { retryable: true, backoff: { baseMs: 100, maxMs: 1000 }, random: () => 0.5 };
