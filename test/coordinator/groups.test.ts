/**
 * Groups over HTTP, on every backend (docs/FAIRNESS.md): POST /jobs and
 * POST /jobs/batch take a job's `group` (1 to 255 characters; anything else
 * is 400 invalid_request naming the field, never 500), every job answer says
 * its group (null without one), PUT /kinds/{kind} takes `groups` (limits per
 * group and weights, bounded: a bad value, too many weights or too long a name
 * is 400 invalid_request) and GET answers it, and the lease shares the kind
 * among the groups: a light group's jobs are not stuck behind a heavy one's,
 * and a group at its own maxConcurrent is skipped while the others lease.
 */

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_GROUP_WEIGHTS } from '../../src/core/fair-share.js';
import { backends, bearer, drainAfterAll, enqueue, errorCode, get, lease, post, putKind, startCoordinator, type Harness } from '../support/http-fixtures.js';

describe.each(backends)('groups over HTTP ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({}, { backend });
  });
  afterEach(async () => {
    await h.close();
  });

  it('takes a job’s group, answers it in every job answer, and null without one', async () => {
    const grouped = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {}, group: 'customer-7' });
    expect(grouped.statusCode, grouped.body).toBe(202);
    expect(grouped.json()).toMatchObject({ group: 'customer-7' });
    const plain = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {} });
    expect(plain.json()).toMatchObject({ group: null });
    const id = grouped.json().id as string;
    expect((await get(h.app, h.keys.producer, `/jobs/${id}`)).json()).toMatchObject({ group: 'customer-7' });
    const listed = (await get(h.app, h.keys.admin, '/jobs?limit=10')).json() as { jobs: { id: string; group: string | null }[] };
    expect(Object.fromEntries(listed.jobs.map((job) => [job.id, job.group]))).toEqual({ [id]: 'customer-7', [plain.json().id]: null });
    const batch = await post(h.app, h.keys.producer, '/jobs/batch', {
      jobs: [
        { kind: 'email', payload: {}, group: 'a', idempotencyKey: 'b1' },
        { kind: 'email', payload: {}, idempotencyKey: 'b2' },
      ],
    });
    expect(batch.statusCode, batch.body).toBeLessThan(300);
    expect(JSON.stringify(batch.json())).toContain('"group":"a"');
    // The lease answers it too, for the worker's handler (JobContext.group).
    const leased = await lease(h.app, h.keys.worker, { max: 10 });
    expect(Object.fromEntries(leased.map((job) => [job.id, job.group]))).toMatchObject({ [id]: 'customer-7', [plain.json().id]: null });
  });

  it('refuses a bad group with 400 invalid_request naming the field, in a single enqueue and in a batch', async () => {
    for (const group of ['', 'g'.repeat(256), 'nul\u0000', 42, null, ['a']]) {
      const response = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {}, group });
      expect(response.statusCode, JSON.stringify(group).slice(0, 40)).toBe(400);
      expect(errorCode(response)).toBe('invalid_request');
      expect(response.json().error.message).toMatch(/group/);
      const batch = await post(h.app, h.keys.producer, '/jobs/batch', { jobs: [{ kind: 'email', payload: {}, group, idempotencyKey: 'k' }] });
      expect(batch.statusCode).toBe(400);
      expect(errorCode(batch)).toBe('invalid_request');
    }
    expect((await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {}, group: 'g'.repeat(255) })).statusCode).toBe(202);
  });

  it('stores a kind’s groups and answers them; null clears them', async () => {
    const body = { groups: { maxConcurrent: 2, rate: { limit: 5, perMs: 1_000 }, weights: { gold: 3, '': 0.5 } } };
    const saved = await putKind(h.app, h.keys.admin, 'report', body);
    expect(saved.statusCode, saved.body).toBe(200);
    expect(saved.json()).toMatchObject(body);
    expect((await get(h.app, h.keys.producer, '/kinds/report')).json()).toMatchObject(body);
    expect((await get(h.app, h.keys.producer, '/kinds')).json().kinds[0]).toMatchObject(body);
    const cleared = await putKind(h.app, h.keys.admin, 'report', { groups: null });
    expect(cleared.json()).toMatchObject({ groups: null });
    expect((await putKind(h.app, h.keys.admin, 'plain', {})).json()).toMatchObject({ groups: null });
  });

  it('refuses bad groups rules with 400 invalid_request, never 500: bounds, types, too many weights, too long a name', async () => {
    const tooMany = Object.fromEntries(Array.from({ length: MAX_GROUP_WEIGHTS + 1 }, (_, i) => [`g${i}`, 1]));
    for (const groups of [
      { maxConcurrent: 0 },
      { maxConcurrent: 1.5 },
      { maxConcurrent: 1_000_001 },
      { rate: { limit: 0, perMs: 1_000 } },
      { rate: { limit: 1 } },
      { rate: { limit: 1, perMs: 86_400_001 } },
      { weights: { a: 0 } },
      { weights: { a: 1_001 } },
      { weights: { a: 'heavy' } },
      { weights: { ['n'.repeat(256)]: 1 } },
      { weights: tooMany },
      { weights: [1, 2] },
      { fairness: 'max' },
      'all',
    ]) {
      const response = await putKind(h.app, h.keys.admin, 'report', { groups });
      expect(response.statusCode, JSON.stringify(groups).slice(0, 60)).toBe(400);
      expect(errorCode(response)).toBe('invalid_request');
      expect(response.json().error.message).toMatch(/groups/);
    }
    expect((await get(h.app, h.keys.admin, '/kinds/report')).statusCode).toBe(404);
    // The bounds themselves are allowed.
    const bounds = { maxConcurrent: 1_000_000, rate: { limit: 1, perMs: 86_400_000 }, weights: { ['n'.repeat(255)]: 0.01, b: 1_000 } };
    expect((await putKind(h.app, h.keys.admin, 'report', { groups: bounds })).statusCode).toBe(200);
  });

  it('GET /metrics shows the busiest groups’ waiting and running jobs, and sums the rest under group *', async () => {
    const token = 'scrape-token-0123456789-abcdefghijklmnop';
    const scraping = await startCoordinator({ metricsToken: token }, { backend });
    try {
      const jobs = [
        ...Array.from({ length: 5 }, (_, i) => ({ kind: 'report', payload: {}, group: 'big', idempotencyKey: `big-${i}` })),
        // 25 more groups of one job each: 20 series per tenant at most, so 6 of these go into the rest.
        ...Array.from({ length: 25 }, (_, i) => ({ kind: 'report', payload: {}, group: `small-${String(i).padStart(2, '0')}`, idempotencyKey: `s-${i}` })),
        { kind: 'report', payload: {}, idempotencyKey: 'none' },
      ];
      expect((await post(scraping.app, scraping.keys.producer, '/jobs/batch', { jobs })).statusCode).toBeLessThan(300);
      const leased = await lease(scraping.app, scraping.keys.worker, { max: 2, kinds: ['report'] });
      expect(leased).toHaveLength(2);
      const text = (await scraping.app.inject({ method: 'GET', url: '/metrics', headers: bearer(token) })).body;
      const samples = (name: string): string[] => text.split('\n').filter((line) => line.startsWith(`${name}{`));
      const waiting = samples('leasehold_group_jobs_waiting');
      expect(waiting).toHaveLength(21);
      // The lease took one job of the first two groups in key order (every group starts level): big, then small-00.
      expect(waiting).toContain(`leasehold_group_jobs_waiting{tenant="t1",kind="report",group="big"} 4`);
      expect(samples('leasehold_group_jobs_running')).toContain(`leasehold_group_jobs_running{tenant="t1",kind="report",group="big"} 1`);
      const rest = waiting.find((line) => line.includes('group="*"'));
      expect(rest).toMatch(/kind="\*",group="\*"\} 6$/);
      expect(text).toContain('# TYPE leasehold_group_jobs_running gauge');
    } finally {
      await scraping.close();
    }
  });

  it('leases a light group’s jobs among the first ones behind a heavy backlog, and skips a group at its limit', async () => {
    expect((await putKind(h.app, h.keys.admin, 'report', { groups: { maxConcurrent: 3 } })).statusCode).toBe(200);
    const batch = (group: string, n: number) =>
      post(h.app, h.keys.producer, '/jobs/batch', {
        jobs: Array.from({ length: n }, (_, i) => ({ kind: 'report', payload: { group, i }, group, idempotencyKey: `${group}-${i}` })),
      });
    expect((await batch('heavy', 50)).statusCode).toBeLessThan(300);
    expect((await batch('light', 2)).statusCode).toBeLessThan(300);
    const first = await lease(h.app, h.keys.worker, { max: 10 });
    const groups = first.map((job) => (job.payload as { group: string }).group);
    expect(groups.filter((group) => group === 'heavy')).toHaveLength(3);
    expect(groups.filter((group) => group === 'light')).toHaveLength(2);
    expect(await lease(h.app, h.keys.worker, { max: 10 })).toEqual([]);
    const done = first.find((job) => (job.payload as { group: string }).group === 'heavy');
    if (done === undefined) throw new Error('no heavy job');
    expect((await post(h.app, h.keys.worker, `/jobs/${done.id}/complete`, { token: done.token })).statusCode).toBeLessThan(300);
    expect((await lease(h.app, h.keys.worker, { max: 10 })).map((job) => (job.payload as { group: string }).group)).toEqual(['heavy']);
  });
});
