/**
 * PostgreSQL: resolves when `count` LISTEN connections of this process's test
 * schemas are up, so that the wake-everyone announcement each store makes
 * when its LISTEN takes effect has happened before a test counts wake-ups.
 * A store's listening connection names its schema in application_name
 * (listener-peers.ts listenerName) and, once LISTEN took effect, says hello on
 * the channel in its first census (LISTENER_HELLO_AND_CENSUS) before it calls
 * its listeners; its later censuses and its answers to others' hellos
 * (LISTENER_CENSUS, LISTENER_ACK) run only after that. So an idle one whose
 * last statement is any of the three is up.
 */

import pg from 'pg';
import { LISTENER_ACK, LISTENER_CENSUS, LISTENER_HELLO_AND_CENSUS, listenerName } from '../../src/store/postgres/listener-peers.js';
import { SCHEMA_PREFIX } from './reused-pg-schemas.js';
import { waitFor } from './wait-for.js';

/** Counts the listening connections that are up among those whose application name is LIKE $1. */
export const LISTENERS_UP_SQL = `SELECT count(*)::int AS n FROM pg_stat_activity
   WHERE application_name LIKE $1 AND state = 'idle' AND query IN (${[LISTENER_HELLO_AND_CENSUS, LISTENER_CENSUS, LISTENER_ACK].map((sql) => pg.escapeLiteral(sql)).join(', ')})`;

/** The LIKE pattern of the listening connections of `schema`, or of every schema starting with it. */
export function listenerPattern(schema: string, prefix = false): string {
  return prefix ? `${listenerName(schema)}%` : listenerName(schema);
}

export async function listenersUp(count: number, pattern = listenerPattern(SCHEMA_PREFIX, true)): Promise<void> {
  const client = new pg.Client({ connectionString: process.env['DATABASE_URL'] ?? '' });
  await client.connect();
  try {
    await waitFor(`${count} LISTEN connections`, async () => {
      const { rows } = await client.query<{ n: number }>(LISTENERS_UP_SQL, [pattern]);
      return (rows[0]?.n ?? 0) >= count;
    });
  } finally {
    await client.end();
  }
}
