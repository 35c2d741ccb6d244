/**
 * A warm PostgreSQL store (`serve`'s, warm-up.ts): before connect returns, half its pool is open and each of
 * those connections has the statements of enqueue, lease and completion prepared and planned, so the first
 * requests after a start do not wait for planning, nor the pool for connections opened under them.
 */

import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type OpenedDatabase } from '../../src/store/postgres/database.js';
import { dropSchema } from '../../src/store/postgres/migrate.js';
import { WARMED_STATEMENTS } from '../../src/store/postgres/warm-up.js';

const url = process.env['DATABASE_URL'] ?? '';

describe.skipIf(url === '')('a warm store (postgres)', () => {
  let opened: OpenedDatabase | undefined;
  let schema = '';
  afterEach(async () => {
    await opened?.db.close();
    opened = undefined;
    await dropSchema(url, schema);
  });

  async function open(warm: boolean): Promise<OpenedDatabase> {
    schema = `lh_test_warm_${randomBytes(6).toString('hex')}`;
    opened = await openDatabase({ connectionString: url, schema, poolSize: 5, warm });
    return opened;
  }

  /** What each of the pool's open connections has prepared: statement name to its generic plans. */
  async function preparedOnEach(db: OpenedDatabase['db']): Promise<Map<string, number>[]> {
    const count = db.pool.totalCount;
    const clients = await Promise.all(Array.from({ length: count }, () => db.pool.connect()));
    try {
      // Connections that were open and idle: taking them all opened none.
      expect(db.pool.totalCount).toBe(count);
      return await Promise.all(
        clients.map(async (client: pg.PoolClient) => {
          const rows = (await client.query<{ name: string; generic_plans: string }>('SELECT name, generic_plans FROM pg_prepared_statements')).rows;
          return new Map(rows.map((row) => [row.name, Number(row.generic_plans)]));
        }),
      );
    } finally {
      for (const client of clients) client.release();
    }
  }

  it('opens half its pool at connect, each connection with the hot statements prepared and planned', async () => {
    const { db } = await open(true);
    expect(db.pool.totalCount).toBe(3);
    const each = await preparedOnEach(db);
    expect(each).toHaveLength(3);
    for (const prepared of each) {
      for (const name of WARMED_STATEMENTS) expect(prepared.get(name), name).toBeGreaterThanOrEqual(1);
    }
  });

  it('a store that is not warm opens connections on demand, which plan at their first use', async () => {
    const { db } = await open(false);
    const each = await preparedOnEach(db);
    expect(each.length).toBeLessThan(3);
    for (const prepared of each) expect(WARMED_STATEMENTS.filter((name) => prepared.has(name))).toEqual([]);
  });
});
