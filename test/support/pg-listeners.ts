/**
 * PostgreSQL: resolves when `count` LISTEN connections of this process's test
 * schemas are up, so that the wake-everyone announcement each store makes
 * when its LISTEN takes effect has happened before a test counts wake-ups.
 */

import pg from 'pg';
import { SCHEMA_PREFIX } from './reused-pg-schemas.js';
import { waitFor } from './wait-for.js';

export async function listenersUp(count: number): Promise<void> {
  const client = new pg.Client({ connectionString: process.env['DATABASE_URL'] ?? '' });
  await client.connect();
  try {
    await waitFor(`${count} LISTEN connections`, async () => {
      const { rows } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1 AND query LIKE 'LISTEN %' AND state = 'idle'`,
        [`leasehold:${SCHEMA_PREFIX}%`],
      );
      return (rows[0]?.n ?? 0) >= count;
    });
  } finally {
    await client.end();
  }
}
