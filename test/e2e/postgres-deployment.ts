/**
 * PostgreSQL deployments for end-to-end tests: a fresh schema named in the
 * connection string (`?schema=`, which every `--db` understands), `leasehold
 * serve` processes over it, and probes of pg_stat_activity for what another
 * process's connections are doing. stop() kills every process it started and
 * drops the schema.
 */

import pg from 'pg';
import { freshPostgresDb } from '../../bench/postgres-db.js';
import { startCoordinator, type RunningProcess } from '../../bench/processes.js';
import { LeaseholdClient } from '../../src/client/index.js';
import { waitFor } from '../support/wait-for.js';
import { LISTENERS_UP_SQL, listenerPattern } from '../support/pg-listeners.js';

export const DATABASE_URL = process.env['DATABASE_URL'] ?? '';

export interface PgDeployment {
  /** The connection string with `schema=`, as given to --db. */
  readonly db: string;
  readonly schema: string;
  /** Starts `leasehold serve --db <db>` with extra flags; stopped by stop(). */
  serve(extraArgs?: readonly string[]): Promise<{ url: string; process: RunningProcess }>;
  /** Tracks a process started elsewhere, so stop() kills it too. */
  track(process: RunningProcess): void;
  client(url: string, key: string, options?: { connections?: number }): LeaseholdClient;
  /** Resolves when `count` connections of this schema's coordinators are LISTENing. */
  listenersUp(count: number): Promise<void>;
  /** Connections of this schema whose last statement was a lease, now idle. */
  leaseConnections(): Promise<number>;
  /** Resolves when more than `before` connections have run a lease statement and are idle again. */
  leaseStatementRan(before: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startPgDeployment(): Promise<PgDeployment> {
  const fresh = await freshPostgresDb(DATABASE_URL);
  const schema = new URL(fresh.url).searchParams.get('schema') ?? '';
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  const processes: RunningProcess[] = [];
  const clients: LeaseholdClient[] = [];

  // pg_stat_activity keeps the first track_activity_query_size bytes (1 KiB by default) of a statement, so the
  // lease statements are told by how they begin (lease-queries.ts: `WITH flow AS (` or, capped, `WITH picked AS (`).
  const LEASE_ATTEMPT = ['WITH flow AS (%', 'WITH picked AS (%', '%FOR UPDATE SKIP LOCKED%', '%unnest($2::text[]) AS kind%', 'WITH RECURSIVE k(kind)%'];

  /** Connections of this schema's stores, whose last statement matches `pattern`, now idle. */
  const idleWith = async (...patterns: string[]): Promise<number> => {
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle' AND query LIKE ANY ($2::text[])`,
      [`leasehold:${schema}`.slice(0, 63), patterns],
    );
    return rows[0]?.n ?? 0;
  };

  return {
    db: fresh.url,
    schema,
    async serve(extraArgs = []) {
      const started = await startCoordinator(fresh.url, extraArgs);
      processes.push(started.process);
      return started;
    },
    track(process) {
      processes.push(process);
    },
    client(url, key, options = {}) {
      const client = new LeaseholdClient({ baseUrl: url, apiKey: key, ...(options.connections === undefined ? {} : { connections: options.connections }) });
      clients.push(client);
      return client;
    },
    async listenersUp(count) {
      const up = async (): Promise<number> => (await admin.query<{ n: number }>(LISTENERS_UP_SQL, [listenerPattern(schema)])).rows[0]?.n ?? 0;
      await waitFor(`${count} LISTEN connections on ${schema}`, async () => (await up()) >= count, { timeoutMs: 15_000 });
    },
    // An empty lease is followed on its connection by the read of the next due job (jobNextDue), so a
    // connection whose last statement is either has run a lease attempt.
    async leaseConnections() {
      return idleWith(...LEASE_ATTEMPT);
    },
    async leaseStatementRan(before) {
      await waitFor('a lease statement to run', async () => (await idleWith(...LEASE_ATTEMPT)) > before, { timeoutMs: 15_000 });
    },
    async stop() {
      await Promise.all(clients.map((c) => c.close()));
      await Promise.all(processes.map((p) => p.stop('SIGKILL')));
      await admin.end();
      await fresh.drop();
    },
  };
}
