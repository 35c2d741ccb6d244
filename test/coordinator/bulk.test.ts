/**
 * POST /jobs/bulk, the operator filters of GET /jobs, and GET
 * /jobs/{id}/detail, on every backend: a bulk action touches exactly the
 * jobs its filter selects in the admin's tenant, in batches past one page,
 * stops at its limit, counts without changing on a dry run, and refuses a
 * status its action does not apply to; a filtered listing pages through
 * every match with the store's cursor.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, drainAfterAll, enqueue, errorCode, get, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';

interface WireJob {
  id: string;
  kind: string;
  status: string;
  createdAt: string;
  lastError: { code: string; class: string; message: string } | null;
}

/** Enqueues `count` jobs of `kind` with one attempt and fails each with `code`: dead jobs. */
async function deadJobs(h: Harness, key: string, workerKey: string, kind: string, count: number, code: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const response = await enqueue(h.app, key, { kind, payload: { i }, maxAttempts: 1 });
    expect(response.statusCode).toBe(202);
    ids.push((response.json() as WireJob).id);
  }
  const leased = await lease(h.app, workerKey, { kinds: [kind], max: count });
  expect(leased).toHaveLength(count);
  for (const job of leased) {
    const failed = await post(h.app, workerKey, `/jobs/${job.id}/fail`, {
      token: job.token,
      error: { code, message: `<img src=x onerror=alert(1)> ${code}` },
      retryable: false,
    });
    expect(failed.statusCode).toBe(200);
  }
  return ids;
}

async function listAll(h: Harness, key: string, query: string, limit: number): Promise<{ jobs: WireJob[]; pages: number }> {
  const jobs: WireJob[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const response = await get(h.app, key, `/jobs?${query}&limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
    expect(response.statusCode, response.body).toBe(200);
    const page = response.json() as { jobs: WireJob[]; nextCursor: string | null };
    jobs.push(...page.jobs);
    cursor = page.nextCursor;
    pages += 1;
  } while (cursor !== null);
  return { jobs, pages };
}

describe.each(backends)('operator routes ($name)', (backend) => {
  drainAfterAll(backend);
  let h: Harness;
  let boomIds: string[];
  let otherIds: string[];
  let otherTenantIds: string[];
  beforeAll(async () => {
    h = await startCoordinator({}, { backend });
    boomIds = await deadJobs(h, h.keys.producer, h.keys.worker, 'mail', 130, 'boom');
    otherIds = await deadJobs(h, h.keys.producer, h.keys.worker, 'mail', 5, 'other');
    otherTenantIds = await deadJobs(h, h.keys.otherProducer, h.keys.otherWorker, 'mail', 3, 'boom');
  }, 60_000);
  afterAll(async () => {
    await h.close();
  });

  it('filters GET /jobs by error code and creation time, paging through every match', async () => {
    const { jobs, pages } = await listAll(h, h.keys.admin, 'status=dead&errorCode=boom', 40);
    expect(jobs.map((j) => j.id).sort()).toEqual([...boomIds].sort());
    expect(pages).toBeGreaterThanOrEqual(4);
    expect(new Set(jobs.map((j) => j.lastError?.code))).toEqual(new Set(['boom']));
    const other = await listAll(h, h.keys.admin, 'errorCode=other', 100);
    expect(other.jobs.map((j) => j.id).sort()).toEqual([...otherIds].sort());
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect((await listAll(h, h.keys.admin, `createdAfter=${future}`, 100)).jobs).toEqual([]);
    expect((await listAll(h, h.keys.admin, `createdBefore=${future}&errorCode=other`, 100)).jobs).toHaveLength(5);
    const bad = await get(h.app, h.keys.admin, '/jobs?createdAfter=yesterday');
    expect(bad.statusCode).toBe(400);
    expect(errorCode(bad)).toBe('invalid_request');
  });

  it('counts on a dry run, then requeues exactly the matching jobs of its tenant in batches, up to its limit', async () => {
    const filter = { kind: 'mail', errorCode: 'boom' };
    const dry = await post(h.app, h.keys.admin, '/jobs/bulk', { action: 'requeue', filter, dryRun: true });
    expect(dry.json()).toEqual({ matched: 130, changed: 0 });
    const capped = await post(h.app, h.keys.admin, '/jobs/bulk', { action: 'requeue', filter, limit: 120 });
    expect(capped.statusCode, capped.body).toBe(200);
    expect(capped.json()).toEqual({ matched: 120, changed: 120 });
    const rest = await post(h.app, h.keys.admin, '/jobs/bulk', { action: 'requeue', filter });
    expect(rest.json()).toEqual({ matched: 10, changed: 10 });
    const again = await post(h.app, h.keys.admin, '/jobs/bulk', { action: 'requeue', filter });
    expect(again.json()).toEqual({ matched: 0, changed: 0 });

    const queued = await listAll(h, h.keys.admin, 'status=queued', 1000);
    expect(queued.jobs.map((j) => j.id).sort()).toEqual([...boomIds].sort());
    const stillDead = await listAll(h, h.keys.admin, 'status=dead', 1000);
    expect(stillDead.jobs.map((j) => j.id).sort()).toEqual([...otherIds].sort());
    const otherTenant = await listAll(h, h.keys.otherAdmin, 'status=dead', 1000);
    expect(otherTenant.jobs.map((j) => j.id).sort()).toEqual([...otherTenantIds].sort());
  });

  it('cancels queued jobs by filter and refuses a status the action does not apply to', async () => {
    const wrong = await post(h.app, h.keys.admin, '/jobs/bulk', { action: 'cancel', filter: { status: 'dead' } });
    expect(wrong.statusCode).toBe(400);
    expect(errorCode(wrong)).toBe('invalid_request');
    const noOutcome = await post(h.app, h.keys.admin, '/jobs/bulk', { action: 'reconcile', filter: {} });
    expect(errorCode(noOutcome)).toBe('invalid_request');
    const overLimit = await post(h.app, h.keys.admin, '/jobs/bulk', { action: 'cancel', filter: {}, limit: 10_001 });
    expect(overLimit.statusCode).toBe(400);
    const byProducer = await post(h.app, h.keys.producer, '/jobs/bulk', { action: 'cancel', filter: {} });
    expect(byProducer.statusCode).toBe(403);

    const cancelled = await post(h.app, h.keys.admin, '/jobs/bulk', { action: 'cancel', filter: { status: 'queued', errorCode: 'boom' }, limit: 7 });
    expect(cancelled.json()).toEqual({ matched: 7, changed: 7 });
    expect((await listAll(h, h.keys.admin, 'status=cancelled', 1000)).jobs).toHaveLength(7);
  });

  it('GET /jobs/{id}/detail has the payload, the attempts and the last error; another tenant sees 404', async () => {
    const id = otherIds[0] ?? '';
    const response = await get(h.app, h.keys.admin, `/jobs/${id}/detail`);
    expect(response.statusCode, response.body).toBe(200);
    const detail = response.json() as {
      job: WireJob;
      payload: unknown;
      attempts: { outcome: string; errorCode: string }[];
      checkpoint: unknown;
      result: unknown;
    };
    expect(detail.job).toMatchObject({ id, status: 'dead', lastError: { code: 'other' } });
    expect(detail.payload).toEqual({ i: 0 });
    expect(detail.attempts).toHaveLength(1);
    expect(detail.attempts[0]?.errorCode).toBe('other');
    expect(detail.checkpoint).toBeNull();
    expect(detail.result).toBeNull();
    expect((await get(h.app, h.keys.otherAdmin, `/jobs/${id}/detail`)).statusCode).toBe(404);
    expect((await get(h.app, h.keys.producer, `/jobs/${id}/detail`)).statusCode).toBe(403);
  });
});
