/**
 * The library mode's crash boundaries (embedded-boundaries.ts) on a
 * PostgreSQL schema; runs when DATABASE_URL is set, like the other PostgreSQL
 * suites.
 */

import { describe } from 'vitest';
import { DATABASE_URL, describeEmbeddedBoundaries } from './embedded-boundaries.js';

describe.skipIf(DATABASE_URL === '')('PostgreSQL (DATABASE_URL)', () => {
  describeEmbeddedBoundaries('postgres');
});
