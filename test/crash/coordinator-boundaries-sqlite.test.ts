/** The coordinator crash boundaries (coordinator-boundaries.ts) over a SQLite file. */

import { describeCoordinatorBoundaries } from './coordinator-boundaries.js';

describeCoordinatorBoundaries('sqlite');
