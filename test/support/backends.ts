/**
 * Every Store backend the conformance suite runs against. SQLite always runs,
 * on a fresh file in a fresh temporary directory. PostgreSQL runs when
 * DATABASE_URL is set, each store in its own new schema that cleanup drops; if
 * DATABASE_URL is set and the server cannot be reached, create() throws and
 * the tests fail rather than skip.
 *
 * `openPeer` opens a second store over the same database, standing in for a
 * second coordinator process. Every store of an instance draws its backoff
 * jitter from the instance's `random`, which a test can pin.
 */

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Random } from '../../src/core/random.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store, StoreBackend } from '../../src/store/store.js';

/** A random source a test pins with set(); it draws from Math.random until then. */
export class PinnedRandom {
  private value: number | null = null;
  readonly draw: Random = () => this.value ?? Math.random();
  set(value: number | null): void {
    this.value = value;
  }
}

export interface BackendInstance {
  readonly store: Store;
  /** The jitter source of `store` and its peers. */
  readonly random: PinnedRandom;
  /** Another store over the same database (closed by cleanup). */
  openPeer(): Promise<Store>;
  cleanup(): Promise<void>;
}

export interface BackendFactory {
  readonly name: StoreBackend;
  /** How test titles name it (a backend may run in more than one way). */
  readonly label: string;
  create(): Promise<BackendInstance>;
  /** Resolves when every cleanup started so far has finished (call once per file, after its tests). */
  drain(): Promise<void>;
}

export function sqliteFactory(label: string, open: (path: string, random: Random) => Promise<Store>): BackendFactory {
  return {
    name: 'sqlite',
    label,
    async create() {
      const dir = mkdtempSync(join(tmpdir(), 'leasehold-conformance-'));
      const path = join(dir, 'jobs.db');
      const random = new PinnedRandom();
      const store = await open(path, random.draw);
      const peers: Store[] = [];
      return {
        store,
        random,
        async openPeer() {
          const peer = await open(path, random.draw);
          peers.push(peer);
          return peer;
        },
        async cleanup() {
          for (const peer of peers) await peer.close();
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    async drain() {},
  };
}

/** A store on a PostgreSQL schema, with peers on the same schema; `afterClose` runs once all are closed. */
export async function postgresInstance(connectionString: string, schema: string, afterClose: () => Promise<void>): Promise<BackendInstance> {
  const random = new PinnedRandom();
  const store = await PostgresStore.connect({ connectionString, schema, poolSize: 4, random: random.draw });
  const peers: Store[] = [];
  return {
    store,
    random,
    async openPeer() {
      const peer = await PostgresStore.connect({ connectionString, schema, poolSize: 2, random: random.draw });
      peers.push(peer);
      return peer;
    },
    async cleanup() {
      for (const peer of peers) await peer.close();
      await store.close();
      await afterClose();
    },
  };
}

function postgres(connectionString: string): BackendFactory {
  // Dropping a schema takes as long as creating one; the next test need not wait for it.
  const drops = new Set<Promise<void>>();
  return {
    name: 'postgres',
    label: 'postgres',
    async create() {
      const schema = `lh_test_${process.pid}_${randomBytes(6).toString('hex')}`;
      return postgresInstance(connectionString, schema, async () => {
        const drop = PostgresStore.dropSchema({ connectionString, schema });
        drops.add(drop);
        void drop.finally(() => drops.delete(drop)).catch(() => undefined);
      });
    },
    async drain() {
      await Promise.all([...drops]);
    },
  };
}

const sqlite = sqliteFactory('sqlite', async (path, random) => SqliteStore.open({ path, random }));

const databaseUrl = process.env['DATABASE_URL'];

export const backends: readonly BackendFactory[] = databaseUrl !== undefined && databaseUrl !== '' ? [sqlite, postgres(databaseUrl)] : [sqlite];
