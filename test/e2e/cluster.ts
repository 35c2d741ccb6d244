/**
 * A real deployment for end-to-end tests: a `leasehold serve` process on a
 * random port over a fresh SQLite file, keys for each role in two tenants,
 * and clients for them. Everything is torn down by stop().
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKey, startCoordinator, type RunningProcess } from '../../bench/processes.js';
import { LeaseholdClient } from '../../src/client/index.js';

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
  const keys = {
    admin: createKey(db, 't1', 'ops', 'admin'),
    producer: createKey(db, 't1', 'alice', 'producer'),
    producer2: createKey(db, 't1', 'bob', 'producer'),
    worker: createKey(db, 't1', 'w', 'worker'),
    otherAdmin: createKey(db, 't2', 'eve', 'admin'),
  };
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
