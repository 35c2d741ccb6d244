/**
 * A real deployment for end-to-end tests: a `leasehold serve` process on a
 * random port over a fresh SQLite file, keys for each role in two tenants,
 * and clients for them. Everything is torn down by stop().
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCoordinator, type RunningProcess } from '../../bench/processes.js';
import { LeaseholdClient } from '../../src/client/index.js';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import type { Role } from '../../src/core/states.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

export interface Cluster {
  readonly dir: string;
  readonly db: string;
  readonly url: string;
  readonly coordinator: RunningProcess;
  readonly keys: { admin: string; producer: string; producer2: string; worker: string; otherAdmin: string };
  client(key: string): LeaseholdClient;
  stop(): Promise<void>;
}

export async function startCluster(serveArgs: readonly string[] = []): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-e2e-'));
  const db = join(dir, 'jobs.db');
  // Keys go straight into the file (what `leasehold keys create` does) to spare five CLI start-ups per test.
  const store = SqliteStore.open({ path: db });
  let n = 0;
  const createKey = async (tenant: string, user: string, role: Role): Promise<string> => {
    const key = newApiKey();
    await store.apiKeyInsert({ id: `k${++n}`, tenant, user, role, keyHash: hashApiKey(key) });
    return key;
  };
  const keys = {
    admin: await createKey('t1', 'ops', 'admin'),
    producer: await createKey('t1', 'alice', 'producer'),
    producer2: await createKey('t1', 'bob', 'producer'),
    worker: await createKey('t1', 'w', 'worker'),
    otherAdmin: await createKey('t2', 'eve', 'admin'),
  };
  await store.close();
  const { url, process: coordinator } = await startCoordinator(db, serveArgs);
  const clients: LeaseholdClient[] = [];
  return {
    dir,
    db,
    url,
    coordinator,
    keys,
    client(key: string) {
      const c = new LeaseholdClient({ baseUrl: url, apiKey: key });
      clients.push(c);
      return c;
    },
    async stop() {
      await Promise.all(clients.map((c) => c.close()));
      await coordinator.stop('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
