/**
 * A fresh PostgreSQL schema for one benchmark run, named in the connection
 * string's `schema` parameter (which `leasehold serve --db` understands), and
 * dropped afterwards. `sizeBytes` is what its tables take on disk, indexes and
 * TOAST included (pg_total_relation_size); `autovacuumOff` says whether the
 * server runs without autovacuum, so that deleted rows are never reclaimed;
 * `vacuum` runs VACUUM (ANALYZE) on each of the schema's tables, whatever the
 * server's autovacuum setting.
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface FreshPostgresDb {
  readonly url: string;
  drop(): Promise<void>;
  sizeBytes(): Promise<number>;
  autovacuumOff(): Promise<boolean>;
  vacuum(): Promise<void>;
}

export async function freshPostgresDb(url: string): Promise<FreshPostgresDb> {
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`CREATE SCHEMA ${schema}`);
  await client.end();
  const withSchema = new URL(url);
  withSchema.searchParams.set('schema', schema);
  return {
    url: withSchema.toString(),
    async autovacuumOff() {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      try {
        const { rows } = await admin.query<{ autovacuum: string }>('SHOW autovacuum');
        return rows[0]?.autovacuum === 'off';
      } finally {
        await admin.end();
      }
    },
    async sizeBytes() {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      try {
        const { rows } = await admin.query<{ bytes: string }>(
          `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS bytes
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND c.relkind = 'r'`,
          [schema],
        );
        return Number(rows[0]?.bytes ?? 0);
      } finally {
        await admin.end();
      }
    },
    async vacuum() {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      try {
        const { rows } = await admin.query<{ name: string }>(`SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname = $1`, [
          schema,
        ]);
        for (const { name } of rows) await admin.query(`VACUUM (ANALYZE) ${name}`);
      } finally {
        await admin.end();
      }
    },
    async drop() {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    },
  };
}
