/**
 * dependsOn and concurrencyKey over HTTP, on every backend: the bounds
 * (at most 100 parents, no duplicates, a bounded key) and the scope (an
 * unknown parent, another tenant's or — for a producer — another user's is
 * 400 invalid_request with one message for all) of POST /jobs and
 * POST /jobs/batch; GET /jobs/{id} and the detail show parents and children;
 * the listing filters by `waiting`; a parked long poll is woken by the
 * completion that releases a child; a cancel of a waiting job works; the
 * stats count waiting jobs.
 */

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backends, drainAfterAll, enqueue, errorCode, get, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';

interface WireJob {
  id: string;
  status: string;
  dependsOn: string[];
  children: string[];
  concurrencyKey: string | null;
  lastError: { code: string; class: string } | null;
}

describe.each(backends)('dependencies and per-key ordering over HTTP ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({}, { backend });
  });
  afterEach(async () => {
    await h.close();
  });

  async function job(key: string, body: Record<string, unknown>): Promise<WireJob> {
    const response = await enqueue(h.app, key, { kind: 'email', payload: {}, ...body });
    expect(response.statusCode, response.body).toBe(202);
    return response.json() as WireJob;
  }

  it('refuses more than 100 parents, a parent twice, and a bad concurrencyKey, naming the field', async () => {
    const parent = await job(h.keys.producer, {});
    const ids = (n: number): string[] => Array.from({ length: n }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
    for (const body of [
      { dependsOn: ids(101) },
      { dependsOn: [parent.id, parent.id] },
      { dependsOn: [''] },
      { dependsOn: ['x'.repeat(65)] },
      { dependsOn: 'not-a-list' },
      { concurrencyKey: '' },
      { concurrencyKey: 'k'.repeat(256) },
      { concurrencyKey: 'nul\u0000' },
    ]) {
      const response = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {}, ...body });
      expect(response.statusCode, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(errorCode(response)).toBe('invalid_request');
      expect(response.json().error.message).toMatch(/body\/(dependsOn|concurrencyKey)/);
    }
    // 100 distinct parents are allowed (here: unknown, so refused as unknown, not as too many).
    const hundred = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {}, dependsOn: ids(100) });
    expect(hundred.json().error.message).toBe('body/dependsOn names a job that does not exist');
  });

  it('answers an unknown parent, another tenant\u2019s and another user\u2019s alike, and lets an admin name any of its tenant', async () => {
    const mine = await job(h.keys.producer, {});
    const colleague = await job(h.keys.producer2, {});
    const foreign = await job(h.keys.otherProducer, {});
    const answers = [];
    for (const dependsOn of [['00000000-0000-4000-8000-000000000000'], [foreign.id], [colleague.id], ['nonsense']]) {
      const response = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {}, dependsOn });
      expect(response.statusCode).toBe(400);
      answers.push(response.body);
    }
    expect(new Set(answers).size).toBe(1);
    const batch = await post(h.app, h.keys.producer, '/jobs/batch', {
      jobs: [
        { idempotencyKey: 'b1', kind: 'email', payload: {} },
        { idempotencyKey: 'b2', kind: 'email', payload: {}, dependsOn: [foreign.id] },
      ],
    });
    expect(batch.statusCode).toBe(400);
    expect(errorCode(batch)).toBe('invalid_request');
    const adminChild = await job(h.keys.admin, { dependsOn: [mine.id, colleague.id] });
    expect(adminChild).toMatchObject({ status: 'waiting', dependsOn: [mine.id, colleague.id], children: [] });
    expect((await get(h.app, h.keys.producer, `/jobs/${mine.id}`)).json()).toMatchObject({ children: [adminChild.id] });
  });

  it('shows parents and children, lists waiting jobs, counts them, and wakes a parked poll when the last parent succeeds', async () => {
    const parent = await job(h.keys.producer, { kind: 'setup' });
    const child = await job(h.keys.producer, { kind: 'report', dependsOn: [parent.id], concurrencyKey: 'customer-7' });
    expect(child).toMatchObject({ status: 'waiting', dependsOn: [parent.id], concurrencyKey: 'customer-7' });
    const detail = (await get(h.app, h.keys.admin, `/jobs/${parent.id}/detail`)).json() as { job: WireJob };
    expect(detail.job).toMatchObject({ children: [child.id], dependsOn: [] });
    const listed = (await get(h.app, h.keys.producer, '/jobs?status=waiting')).json() as { jobs: WireJob[] };
    expect(listed.jobs.map((j) => j.id)).toEqual([child.id]);
    expect(listed.jobs[0]).toMatchObject({ concurrencyKey: 'customer-7' });
    expect(listed.jobs[0]).not.toHaveProperty('dependsOn');
    expect((await get(h.app, h.keys.admin, '/stats')).json()).toMatchObject({ counts: { waiting: 1, queued: 1 } });

    const [parentLease] = await lease(h.app, h.keys.worker, { kinds: ['setup'] });
    if (parentLease === undefined) throw new Error('parent not leased');
    const poll = lease(h.app, h.keys.worker, { kinds: ['report'], waitMs: 10_000 });
    const completed = await post(h.app, h.keys.worker, `/jobs/${parentLease.id}/complete`, { token: parentLease.token });
    expect(completed.statusCode).toBe(200);
    const [childLease] = await poll;
    expect(childLease?.id).toBe(child.id);
  });

  it('cancels a waiting job and fails its children with dependency_failed', async () => {
    const parent = await job(h.keys.producer, { runAfter: new Date(Date.now() + 3_600_000).toISOString() });
    const child = await job(h.keys.producer, { dependsOn: [parent.id] });
    const grandchild = await job(h.keys.producer, { dependsOn: [child.id] });
    const cancelled = await post(h.app, h.keys.producer, `/jobs/${child.id}/cancel`, {});
    expect(cancelled.statusCode).toBe(200);
    expect(cancelled.json()).toMatchObject({ status: 'cancelled' });
    const after = (await get(h.app, h.keys.producer, `/jobs/${grandchild.id}?waitMs=1000`)).json() as WireJob;
    expect(after).toMatchObject({ status: 'dead', lastError: { code: 'dependency_failed', class: 'dependency_failed' } });
  });
});
