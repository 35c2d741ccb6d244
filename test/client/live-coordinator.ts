/**
 * A real coordinator for client, worker and CLI tests: a fresh SQLite file in
 * a temporary directory, an HTTP server on a random port, and keys for each
 * role. `stop()` closes the HTTP server but keeps the store, and `restart()`
 * listens again on the same port, so tests can cut workers off the network.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildCoordinator } from '../../src/coordinator/app.js';
import type { CoordinatorConfigInput } from '../../src/engine/config.js';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import type { Role } from '../../src/core/states.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { LeaseholdClient } from '../../src/client/leasehold-client.js';

export interface LiveKeys {
  readonly admin: string;
  readonly worker: string;
  readonly producer: string;
  /** A producer of the same tenant, another user. */
  readonly producer2: string;
}

export interface LiveCoordinator {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  readonly dbPath: string;
  readonly store: SqliteStore;
  readonly keys: LiveKeys;
  client(key: keyof LiveKeys | string, options?: { timeoutMs?: number }): LeaseholdClient;
  /** Closes the HTTP server; the store stays open. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

let counter = 0;

export async function insertKey(store: SqliteStore, tenant: string, user: string, role: Role): Promise<string> {
  const key = newApiKey();
  counter += 1;
  await store.apiKeyInsert({ id: `test-key-${process.pid}-${counter}`, tenant, user, role, keyHash: hashApiKey(key) });
  return key;
}

export async function startLiveCoordinator(config: CoordinatorConfigInput = {}): Promise<LiveCoordinator> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-live-'));
  const dbPath = join(dir, 'jobs.db');
  const store = SqliteStore.open({ path: dbPath });
  const keys: LiveKeys = {
    admin: await insertKey(store, 't1', 'root', 'admin'),
    worker: await insertKey(store, 't1', 'w', 'worker'),
    producer: await insertKey(store, 't1', 'alice', 'producer'),
    producer2: await insertKey(store, 't1', 'bob', 'producer'),
  };
  const fullConfig: CoordinatorConfigInput = { reaperIntervalMs: 50, ...config };
  let app: FastifyInstance | undefined = await buildCoordinator({ store, logger: false, config: fullConfig });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  const port = address.port;
  const url = `http://127.0.0.1:${port}`;
  const clients: LeaseholdClient[] = [];

  return {
    url,
    port,
    dir,
    dbPath,
    store,
    keys,
    client(key, options = {}) {
      const apiKey = key in keys ? keys[key as keyof LiveKeys] : key;
      const client = new LeaseholdClient({ baseUrl: url, apiKey, connections: 8, ...options });
      clients.push(client);
      return client;
    },
    async stop() {
      await app?.close();
      app = undefined;
    },
    async restart() {
      if (app !== undefined) return;
      app = await buildCoordinator({ store, logger: false, config: fullConfig });
      await app.listen({ port, host: '127.0.0.1' });
    },
    async close() {
      await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
      await app?.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
