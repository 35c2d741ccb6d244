/**
 * The coordinator crash boundaries (coordinator-boundaries.ts) over a
 * PostgreSQL schema; runs when DATABASE_URL is set, like the other PostgreSQL
 * suites.
 */

import { describe } from 'vitest';
import { describeCoordinatorBoundaries } from './coordinator-boundaries.js';
import { DATABASE_URL } from './crash-deployment.js';

describe.skipIf(DATABASE_URL === '')('PostgreSQL (DATABASE_URL)', () => {
  describeCoordinatorBoundaries('postgres');
});
