/**
 * Connections made ready before the first request. A connection of the
 * store parses each named statement and plans it (a generic plan,
 * PLANNER_SETTINGS) at its first execution; the hot statements take 8-18 ms
 * to plan, and a coordinator that starts cold opens and plans its connections
 * under its first burst of requests, where each slow first execution makes
 * more requests wait for a connection and the pool open more (the HTTP
 * latency scenario's first hundred jobs waited 22-73 ms, the rest about 5,
 * bench/RESULTS.md 2026-12-04). So `serve` opens half its pool at start and
 * runs each hot statement once on each of those connections with arguments
 * that match nothing (no tenant is empty, a lease of 0 takes nothing, empty
 * batches insert and complete nothing), and the pool keeps them open while
 * idle. A connection that fails its warm-up is dropped; the pool opens
 * another on demand, as without warm-up.
 */

import type pg from 'pg';
import * as Q from './queries.js';
import { bind } from './sql-fragments.js';

const NO_JOB = '00000000-0000-0000-0000-000000000000';

/** The statements of enqueue, lease and completion, each with arguments that touch no row. */
const HOT_STATEMENTS: readonly pg.QueryConfig[] = [
  bind(Q.JOB_INSERT_MANY_UNGROUPED, [[], [], [], [], [], [], [], [], [], [], [], []]),
  bind(Q.JOB_INSERT_LEASED, [[], [], [], [], [], [], [], [], [], [], [], [], '', '', 1]),
  bind(Q.JOB_LEASE_KINDS, ['', 0, [], '', 1, []]),
  bind(Q.JOB_LEASE_ANY_KIND, ['', 0, [], '', 1]),
  bind(Q.JOB_COMPLETE_MANY, [[], [], [], [], [], []]),
  bind(Q.JOB_GET, [NO_JOB, '', null]),
];

/** The statements warmUp prepares on each connection, by name (a test reads them). */
export const WARMED_STATEMENTS: readonly string[] = HOT_STATEMENTS.map((statement) => statement.name ?? '');

/** How many connections of a pool of `poolSize` warmUp opens and the pool keeps while idle. */
export function warmConnections(poolSize: number): number {
  return Math.ceil(poolSize / 2);
}

/** Opens `count` connections of the store's pool at once and runs every hot statement on each; best effort (see above). */
export async function warmUp(pool: pg.Pool, count: number): Promise<void> {
  const clients = await Promise.allSettled(Array.from({ length: count }, () => pool.connect()));
  await Promise.all(
    clients.map(async (opened) => {
      if (opened.status === 'rejected') return;
      const client = opened.value;
      try {
        for (const statement of HOT_STATEMENTS) await client.query(statement);
        client.release();
      } catch (error) {
        client.release(error instanceof Error ? error : true);
      }
    }),
  );
}
