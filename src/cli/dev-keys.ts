/**
 * `leasehold dev`'s keys, kept across restarts: the admin and worker keys are
 * written once beside the development database (`<db>.keys.json`, mode 0600,
 * readable only by the user who runs it) and reused while the store still
 * accepts them, so a restart neither invalidates the keys a developer pasted
 * nor leaves a trail of live keys nobody holds.
 */

import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { hashApiKey } from '../core/ids.js';
import type { Role } from '../core/states.js';
import type { Store } from '../store/store.js';
import { createApiKey } from './commands/keys.js';

export interface DevKeys {
  readonly admin: string;
  readonly worker: string;
}

export function devKeysPath(dbPath: string): string {
  return `${dbPath}.keys.json`;
}

async function stillValid(store: Store, key: string, tenant: string, role: Role): Promise<boolean> {
  const record = await store.apiKeyFindByHash(hashApiKey(key));
  return record !== null && record.revokedAt === null && record.tenant === tenant && record.role === role;
}

function readKeys(path: string): Record<string, unknown> | null {
  if (!existsSync(path)) return null;
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as unknown;
    return parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The saved keys when the store still accepts both; otherwise fresh ones, saved (and the unusable old ones revoked). */
export async function loadOrCreateDevKeys(store: Store, dbPath: string, tenant: string): Promise<{ keys: DevKeys; reused: boolean }> {
  const path = devKeysPath(dbPath);
  const saved = readKeys(path);
  const savedAdmin = saved?.['admin'];
  const savedWorker = saved?.['worker'];
  if (
    typeof savedAdmin === 'string' &&
    typeof savedWorker === 'string' &&
    (await stillValid(store, savedAdmin, tenant, 'admin')) &&
    (await stillValid(store, savedWorker, tenant, 'worker'))
  ) {
    chmodSync(path, 0o600);
    return { keys: { admin: savedAdmin, worker: savedWorker }, reused: true };
  }
  for (const old of [savedAdmin, savedWorker]) {
    const record = typeof old === 'string' ? await store.apiKeyFindByHash(hashApiKey(old)) : null;
    if (record !== null && record.revokedAt === null) await store.apiKeyRevoke({ id: record.id });
  }
  const admin = await createApiKey(store, { tenant, user: 'developer', role: 'admin' });
  const worker = await createApiKey(store, { tenant, user: 'demo-worker', role: 'worker' });
  const keys: DevKeys = { admin: admin.key, worker: worker.key };
  writeFileSync(path, `${JSON.stringify(keys, null, 2)}\n`, { mode: 0o600 });
  chmodSync(path, 0o600); // writeFileSync's mode applies only when it creates the file
  return { keys, reused: false };
}
