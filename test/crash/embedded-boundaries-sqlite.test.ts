/** The library mode's crash boundaries (embedded-boundaries.ts) on a SQLite file. */

import { describeEmbeddedBoundaries } from './embedded-boundaries.js';

describeEmbeddedBoundaries('sqlite');
