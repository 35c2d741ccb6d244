/**
 * PostgreSQL stores for the HTTP contract tests on schemas that are emptied
 * and reused instead of created and dropped per test. Creating a schema runs
 * every migration (and dropping it is as costly again), which on a busy
 * two-core machine took longer than most of the tests themselves; emptying
 * the tables of a migrated schema (empty() below) gives the next test the
 * same empty, fully migrated database for a fraction of that.
 *
 * Each test still gets a new PostgresStore (new pool, new LISTEN connection),
 * and a schema is reused only after every store on it has closed. drain()
 * drops the schemas this process made; call it once a file's tests are done.
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { postgresInstance, type BackendInstance } from './backends.js';

/** Every schema this process makes starts so (connections name their schema in application_name). */
export const SCHEMA_PREFIX = `lh_http_${process.pid}_`;

export interface ReusedSchemas {
  create(): Promise<BackendInstance>;
  drain(): Promise<void>;
}

export function reusedPgSchemas(connectionString: string): ReusedSchemas {
  const spare: string[] = [];
  const made = new Set<string>();

  async function withClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /**
   * DELETE rather than TRUNCATE: a test's tables hold a few rows, and TRUNCATE gives every table and index a new
   * file (about ten times as long here). The replica role keeps the counter triggers and foreign keys from firing
   * while everything goes; the sequences start again as TRUNCATE … RESTART IDENTITY would have them.
   */
  async function empty(schema: string): Promise<void> {
    await withClient(async (client) => {
      const { rows: tables } = await client.query<{ name: string }>(
        `SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 AND tablename <> 'schema_migrations'`,
        [schema],
      );
      const { rows: sequences } = await client.query<{ name: string }>(`SELECT sequencename AS name FROM pg_sequences WHERE schemaname = $1`, [schema]);
      if (tables.length === 0) return;
      await client.query(
        [
          'BEGIN',
          'SET LOCAL session_replication_role = replica',
          ...tables.map((t) => `DELETE FROM ${schema}.${t.name}`),
          ...sequences.map((q) => `ALTER SEQUENCE ${schema}.${q.name} RESTART`),
          'COMMIT',
        ].join(';\n'),
      );
    });
  }

  return {
    async create() {
      const schema = spare.pop() ?? `${SCHEMA_PREFIX}${randomBytes(6).toString('hex')}`;
      made.add(schema);
      return postgresInstance(connectionString, schema, async () => {
        await empty(schema);
        spare.push(schema);
      });
    },
    async drain() {
      const schemas = [...made];
      made.clear();
      spare.length = 0;
      for (const schema of schemas) await PostgresStore.dropSchema({ connectionString, schema });
    },
  };
}
