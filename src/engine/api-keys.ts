/** Minting API keys: the key is returned in clear once and only its SHA-256 hash is stored. */

import { randomUUID } from 'node:crypto';
import { hashApiKey, newApiKey } from '../core/ids.js';
import type { Role } from '../core/states.js';
import type { Store } from '../store/store.js';

/** Creates and stores a key; returns it in clear, the one time it exists in clear. */
export async function createApiKey(store: Store, who: { tenant: string; user: string; role: Role }): Promise<{ id: string; key: string }> {
  const key = newApiKey();
  const record = await store.apiKeyInsert({ id: randomUUID(), tenant: who.tenant, user: who.user, role: who.role, keyHash: hashApiKey(key) });
  return { id: record.id, key };
}
