/**
 * Applies MIGRATIONS at connect. Several coordinators may start at the same
 * moment against one database, so the whole step runs in one transaction that
 * first takes a transaction-scoped advisory lock keyed by the schema name: the
 * first coordinator creates the schema and applies what is missing, the others
 * wait, then find everything applied. A failed migration rolls back entirely.
 */

import pg, { type ClientBase } from 'pg';
import { MIGRATIONS, type Migration } from './migrations.js';

/** Identifiers we splice into SQL and connection options: lowercase, no quoting needed. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export function assertSchemaName(schema: string): void {
  if (!SCHEMA_NAME.test(schema)) {
    throw new Error(`schema name must match ${SCHEMA_NAME.source}`);
  }
}

export interface MigrationReport {
  readonly applied: readonly number[];
  /** The session's synchronous_commit: 'off' would acknowledge commits that a crash can lose. */
  readonly synchronousCommit: string;
}

export async function migrate(client: ClientBase, schema: string, migrations: readonly Migration[] = MIGRATIONS): Promise<MigrationReport> {
  assertSchemaName(schema);
  const applied: number[] = [];
  await client.query('BEGIN');
  try {
    await client.query({ text: "SELECT pg_advisory_xact_lock(hashtextextended('leasehold.migrate.' || $1, 0))", values: [schema] });
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(`SET LOCAL search_path TO ${schema}`);
    // Pooled connections carry a statement timeout meant for requests; a migration may take longer.
    await client.query('SET LOCAL statement_timeout = 0');
    await client.query(`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version    integer     PRIMARY KEY,
        name       text        NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
    const done = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
    const have = new Set(done.rows.map((row) => row.version));
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (have.has(migration.version)) continue;
      await client.query(migration.sql);
      await client.query({ text: 'INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', values: [migration.version, migration.name] });
      applied.push(migration.version);
    }
    const setting = await client.query<{ value: string }>("SELECT current_setting('synchronous_commit') AS value");
    await client.query('COMMIT');
    return { applied, synchronousCommit: setting.rows[0]?.value ?? 'on' };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** Drops a schema and everything in it; for tests, which each get their own. */
export async function dropSchema(connectionString: string, schema: string): Promise<void> {
  assertSchemaName(schema);
  const client = new pg.Client({ connectionString });
  try {
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await client.end().catch(() => undefined);
  }
}
