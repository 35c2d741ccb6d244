/**
 * Conformance, listing and storage accounting under hostile use: list cursors
 * are opaque and bound to the tenant, owner and filters that received them
 * (and work on another store over the same database, i.e. another
 * coordinator); a listing never carries payloads, checkpoints or result bytes;
 * checkpoint state and progress count in the tenant's storage. Every backend.
 */

import { describe, expect, it } from 'vitest';
import type { JobListParams } from '../../src/store/store.js';
import { backends, enqueue, leaseOne, OWNER, TENANT, useBackend } from './harness.js';

describe.each(backends)('store conformance ($label): listing and storage under hostile use', (factory) => {
  const backend = useBackend(factory);

  async function firstCursor(params: Omit<JobListParams, 'limit'>): Promise<string> {
    const page = await backend.store.jobList({ ...params, limit: 1 });
    if (page.nextCursor === null) throw new Error('expected a second page');
    return page.nextCursor;
  }

  it('seals cursors: no sequence number inside, and a tampered, foreign or re-filtered cursor is invalid_request', async () => {
    for (const key of ['a', 'b', 'c']) await enqueue(backend.store, key, { kind: 'sms' });
    await enqueue(backend.store, 'other', { tenant: 'tenant-b' });
    await enqueue(backend.store, 'other-2', { tenant: 'tenant-b' });
    const mine = { scope: { tenant: TENANT } };
    const cursor = await firstCursor(mine);
    // Opaque: not the seq (a small integer), nor anything that decodes to one.
    expect(cursor).not.toMatch(/^\d+$/);
    expect(Buffer.from(cursor, 'base64url').toString('latin1')).not.toMatch(/^\d+$/);
    expect(await firstCursor(mine)).not.toBe(cursor);
    const second = await backend.store.jobList({ ...mine, limit: 10, cursor });
    expect(second.jobs).toHaveLength(2);

    const refused = async (params: JobListParams): Promise<void> => {
      await expect(backend.store.jobList(params)).rejects.toMatchObject({ code: 'invalid_request' });
    };
    const flipped = Buffer.from(cursor, 'base64url');
    flipped[14] = (flipped[14] ?? 0) ^ 1;
    await refused({ ...mine, limit: 10, cursor: flipped.toString('base64url') });
    await refused({ ...mine, limit: 10, cursor: `${cursor}A` });
    await refused({ ...mine, limit: 10, cursor: '1' });
    // Another tenant, another owner, other filters: each the same position, and each refused.
    await refused({ scope: { tenant: 'tenant-b' }, limit: 10, cursor });
    await refused({ scope: { tenant: TENANT, owner: OWNER }, limit: 10, cursor });
    await refused({ ...mine, kind: 'sms', limit: 10, cursor });
    await refused({ ...mine, status: 'queued', limit: 10, cursor });
    // A cursor of tenant B's own listing does not open tenant A's.
    const foreign = await firstCursor({ scope: { tenant: 'tenant-b' } });
    await refused({ ...mine, limit: 10, cursor: foreign });
  });

  it("opens another store's cursor over the same database (a second coordinator)", async () => {
    for (const key of ['a', 'b', 'c']) await enqueue(backend.store, key);
    const cursor = await firstCursor({ scope: { tenant: TENANT } });
    const peer = await backend.instance.openPeer();
    const page = await peer.jobList({ scope: { tenant: TENANT }, limit: 10, cursor });
    expect(page.jobs).toHaveLength(2);
  });

  it('lists result summaries without payload, checkpoint or result bytes', async () => {
    const job = await enqueue(backend.store, 'a', { payload: { big: 'x'.repeat(1000) } });
    const lease = await leaseOne(backend.store);
    await backend.store.jobCheckpoint({ tenant: TENANT, id: job.id, token: lease.token, checkpoint: { step: 1, state: { s: 'y'.repeat(500) } } });
    const body = Buffer.alloc(4096, 7);
    expect(
      await backend.store.jobComplete({ tenant: TENANT, id: job.id, token: lease.token, result: { contentType: 'application/octet-stream', body } }),
    ).toMatchObject({
      kind: 'completed',
    });
    const [item] = (await backend.store.jobList({ scope: { tenant: TENANT }, limit: 10 })).jobs;
    expect(item?.result).toEqual({ contentType: 'application/octet-stream', bytes: 4096 });
    expect(item).not.toHaveProperty('payload');
    expect(item).not.toHaveProperty('checkpoint');
    expect(JSON.stringify(item).length).toBeLessThan(1000);
  });

  it('counts checkpoint state and progress in the tenant storage, by their change', async () => {
    const job = await enqueue(backend.store, 'a');
    const base = (await backend.store.stats({ tenant: TENANT })).storageBytes;
    const lease = await leaseOne(backend.store);
    const state = { s: 'z'.repeat(10_000) };
    const stateBytes = JSON.stringify(state).length;
    await backend.store.jobCheckpoint({ tenant: TENANT, id: job.id, token: lease.token, checkpoint: { step: 1, state } });
    expect((await backend.store.stats({ tenant: TENANT })).storageBytes).toBe(base + stateBytes);
    // Replaced, not added: a smaller checkpoint lowers the count.
    await backend.store.jobCheckpoint({ tenant: TENANT, id: job.id, token: lease.token, checkpoint: { step: 2, state: { s: 'z' } } });
    const small = JSON.stringify({ s: 'z' }).length;
    expect((await backend.store.stats({ tenant: TENANT })).storageBytes).toBe(base + small);
    const progress = { done: 'p'.repeat(2000) };
    await backend.store.jobRenew({ tenant: TENANT, id: job.id, token: lease.token, leaseMs: 30_000, progress });
    expect((await backend.store.stats({ tenant: TENANT })).storageBytes).toBe(base + small + JSON.stringify(progress).length);
  });
});
