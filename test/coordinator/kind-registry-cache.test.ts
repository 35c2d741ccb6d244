/**
 * The kind registry's compiled validators are bounded: one per tenant and
 * kind (replacing a kind's schema replaces its validator instead of adding
 * one), and at most `maxCompiled` in all, least recently used out first.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KindRegistry } from '../../src/engine/kind-registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { kindParams as kind } from '../support/kind-records.js';

describe('kind registry validator cache', () => {
  let dir: string;
  let store: SqliteStore;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'leasehold-registry-'));
    store = SqliteStore.open({ path: join(dir, 'jobs.db') });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps one validator per kind however often the kind is replaced', async () => {
    const registry = new KindRegistry(store, 0, { maxSchemaBytes: 64 * 1024 });
    for (let i = 0; i < 50; i++) {
      const schema = { type: 'object', properties: { [`f${i}`]: { type: 'string', pattern: `^v${i}$` } } };
      const validate = await registry.compile(schema);
      registry.remember(await store.kindUpsert(kind('t1', 'k', schema)), validate);
      const resolved = (await registry.forTenant('t1')).byName.get('k');
      expect(resolved?.validate?.({ [`f${i}`]: `v${i}` })).toBe(true);
      expect(resolved?.validate?.({ [`f${i}`]: 'other' })).toBe(false);
    }
    expect(registry.compiledCount()).toBe(1);
  });

  it('evicts beyond maxCompiled and recompiles an evicted kind when it is used again', async () => {
    const registry = new KindRegistry(store, 0, { maxSchemaBytes: 64 * 1024, maxCompiled: 8 });
    for (let t = 0; t < 20; t++) await store.kindUpsert(kind(`t${t}`, 'k', { type: 'object', required: [`r${t}`] }));
    for (let t = 0; t < 20; t++) {
      const resolved = (await registry.forTenant(`t${t}`)).byName.get('k');
      expect(resolved?.validate?.({ [`r${t}`]: 1 })).toBe(true);
      expect(registry.compiledCount()).toBeLessThanOrEqual(8);
    }
    expect((await registry.forTenant('t0')).byName.get('k')?.validate?.({})).toBe(false);
    expect(registry.compiledCount()).toBe(8);
  });
});
