/**
 * A fresh PostgreSQL schema for one benchmark run, named in the connection
 * string's `schema` parameter (which `leasehold serve --db` understands), and
 * dropped afterwards.
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';

export async function freshPostgresDb(url: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`CREATE SCHEMA ${schema}`);
  await client.end();
  const withSchema = new URL(url);
  withSchema.searchParams.set('schema', schema);
  return {
    url: withSchema.toString(),
    async drop() {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    },
  };
}
