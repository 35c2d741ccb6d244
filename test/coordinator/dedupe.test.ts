/**
 * POST /jobs and POST /jobs/batch with `dedupe` and `unique`: the status
 * codes, headers and bodies (202 with Deduplicated: true and deduplicated:
 * true for a folded request, 409 duplicate_job with error.details.jobId for a
 * unique key's holder), the payload schema applied to a replacing payload,
 * and bad input refused with 400 before anything changes. Runs on every backend.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backends, bearer, drainAfterAll, enqueue, errorCode, get, lease, startCoordinator, type Harness } from '../support/http-fixtures.js';

interface WireJob {
  id: string;
  status: string;
  runAfter: string;
  createdAt: string;
  deduplicated?: boolean;
}

interface ErrorBody {
  error: { code: string; message: string; details?: { jobId?: string } };
}

const HOUR = 3_600_000;

describe.each(backends)('dedupe and unique over HTTP ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({}, { backend });
  });
  afterEach(async () => {
    await h.close();
  });

  async function jobCount(key = h.keys.producer): Promise<number> {
    return ((await get(h.app, key, '/jobs')).json() as { jobs: unknown[] }).jobs.length;
  }

  it('drop: 202 with the existing job, Deduplicated: true and deduplicated: true', async () => {
    const dedupe = { key: 'report:42', mode: 'drop', ttlMs: HOUR };
    const first = await enqueue(h.app, h.keys.producer, { kind: 'report', payload: { n: 1 }, dedupe });
    expect(first.statusCode).toBe(202);
    expect(first.headers['deduplicated']).toBeUndefined();
    expect((first.json() as WireJob).deduplicated).toBeUndefined();
    const again = await enqueue(h.app, h.keys.producer, { kind: 'report', payload: { n: 2 }, dedupe });
    expect(again.statusCode).toBe(202);
    expect(again.headers['deduplicated']).toBe('true');
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.headers['location']).toBe(first.headers['location']);
    const id = (first.json() as WireJob).id;
    expect(again.json()).toMatchObject({ id, status: 'queued', deduplicated: true });
    expect(await jobCount()).toBe(1);
    // drop keeps the first payload.
    expect((await lease(h.app, h.keys.worker, { kinds: ['report'] })).map((job) => [job.id, job.payload])).toEqual([[id, { n: 1 }]]);
  });

  it('an idempotent replay answers as a replay, not as a fold', async () => {
    const body = { kind: 'report', payload: { n: 1 }, dedupe: { key: 'd', mode: 'drop', ttlMs: HOUR } };
    await enqueue(h.app, h.keys.producer, body, 'same');
    const replay = await enqueue(h.app, h.keys.producer, body, 'same');
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['deduplicated']).toBeUndefined();
    expect((replay.json() as WireJob).deduplicated).toBeUndefined();
  });

  it('replace: the new payload must pass the kind schema; a refused one changes nothing', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false };
    expect((await h.app.inject({ method: 'PUT', url: '/kinds/report', headers: bearer(h.keys.admin), payload: { payloadSchema: schema } })).statusCode).toBe(
      200,
    );
    const dedupe = { key: 'd', mode: 'replace', ttlMs: HOUR };
    const first = (await enqueue(h.app, h.keys.producer, { kind: 'report', payload: { n: 1 }, dedupe })).json() as WireJob;
    const bad = await enqueue(h.app, h.keys.producer, { kind: 'report', payload: { n: 'two' }, dedupe });
    expect(bad.statusCode).toBe(400);
    expect(errorCode(bad)).toBe('invalid_payload');
    const good = await enqueue(h.app, h.keys.producer, { kind: 'report', payload: { n: 3 }, dedupe });
    expect(good.statusCode).toBe(202);
    expect(good.json()).toMatchObject({ id: first.id, runAfter: first.runAfter, deduplicated: true });
    const leased = await lease(h.app, h.keys.worker, { kinds: ['report'] });
    expect(leased.map((job) => [job.id, job.payload])).toEqual([[first.id, { n: 3 }]]);
  });

  it('extend: pushes runAfter out to now + ttlMs, never past maxDelayMs from the first enqueue', async () => {
    const dedupe = { key: 'd', mode: 'extend', ttlMs: 60_000, maxDelayMs: 5_000 };
    const first = (await enqueue(h.app, h.keys.producer, { kind: 'sync', payload: { v: 1 }, dedupe })).json() as WireJob;
    const again = (await enqueue(h.app, h.keys.producer, { kind: 'sync', payload: { v: 2 }, dedupe })).json() as WireJob;
    expect(again.id).toBe(first.id);
    expect(Date.parse(again.runAfter)).toBe(Date.parse(first.createdAt) + 5_000);
    expect(await lease(h.app, h.keys.worker, { kinds: ['sync'] })).toEqual([]);
  });

  it('unique: 409 duplicate_job with error.details.jobId, and nothing enqueued', async () => {
    const unique = { key: 'nightly', forMs: HOUR };
    const first = (await enqueue(h.app, h.keys.producer, { kind: 'report', payload: {}, unique })).json() as WireJob;
    const refused = await enqueue(h.app, h.keys.producer, { kind: 'report', payload: { other: true }, unique });
    expect(refused.statusCode).toBe(409);
    const body = refused.json() as ErrorBody;
    expect(body.error).toMatchObject({ code: 'duplicate_job', details: { jobId: first.id } });
    expect(body.error.message.length).toBeGreaterThan(0);
    expect(await jobCount()).toBe(1);
    // Another user of the tenant has keys of its own (and learns nothing of this one's).
    expect((await enqueue(h.app, h.keys.producer2, { kind: 'report', payload: {}, unique })).statusCode).toBe(202);
  });

  it('POST /jobs/batch: deduplicated items and duplicate_job items, each as POST /jobs would answer', async () => {
    const unique = { key: 'u', forMs: HOUR };
    const held = (await enqueue(h.app, h.keys.producer, { kind: 'report', payload: {}, unique })).json() as WireJob;
    const dedupe = { key: 'd', mode: 'drop', ttlMs: HOUR };
    const response = await h.app.inject({
      method: 'POST',
      url: '/jobs/batch',
      headers: bearer(h.keys.producer),
      payload: {
        jobs: [
          { idempotencyKey: 'b1', kind: 'report', payload: { n: 1 }, dedupe },
          { idempotencyKey: 'b2', kind: 'report', payload: { n: 2 }, dedupe },
          { idempotencyKey: 'b3', kind: 'report', payload: {}, unique },
        ],
      },
    });
    expect(response.statusCode).toBe(200);
    const [b1, b2, b3] = (
      response.json() as { results: { status: number; replayed?: boolean; deduplicated?: boolean; job?: WireJob; error?: ErrorBody['error'] }[] }
    ).results;
    expect(b1).toMatchObject({ status: 202, replayed: false });
    expect(b1?.deduplicated).toBeUndefined();
    expect(b2).toMatchObject({ status: 202, replayed: false, deduplicated: true, job: { id: b1?.job?.id } });
    expect(b3).toMatchObject({ status: 409, error: { code: 'duplicate_job', details: { jobId: held.id } } });
  });

  it('refuses bad dedupe and unique fields with 400 invalid_request, enqueuing nothing', async () => {
    const bad: Record<string, unknown>[] = [
      { dedupe: { key: 'd', mode: 'merge', ttlMs: 1000 } },
      { dedupe: { key: 'd', mode: 'drop', ttlMs: 0 } },
      { dedupe: { key: 'd', mode: 'drop', ttlMs: 1.5 } },
      { dedupe: { key: 'd', mode: 'drop', ttlMs: 30 * 24 * HOUR + 1 } },
      { dedupe: { key: 'd', mode: 'extend', ttlMs: 1000, maxDelayMs: 0 } },
      { dedupe: { key: 'x'.repeat(256), mode: 'drop', ttlMs: 1000 } },
      { dedupe: { key: '', mode: 'drop', ttlMs: 1000 } },
      { dedupe: { key: 'nul\u0000', mode: 'drop', ttlMs: 1000 } },
      { dedupe: { key: 'd', mode: 'drop' } },
      { dedupe: { key: 'd', mode: 'drop', ttlMs: 1000, extra: 1 } },
      { unique: { key: 'u' } },
      { unique: { key: 'u', forMs: -1 } },
      { unique: { key: 'x'.repeat(256), forMs: 0 } },
      { unique: 'u' },
    ];
    for (const fields of bad) {
      const response = await enqueue(h.app, h.keys.producer, { kind: 'report', payload: {}, ...fields });
      expect(response.statusCode, JSON.stringify(fields)).toBe(400);
      expect(errorCode(response), JSON.stringify(fields)).toBe('invalid_request');
    }
    expect(await jobCount()).toBe(0);
    // The longest key and the longest window are accepted.
    const edge = await enqueue(h.app, h.keys.producer, { kind: 'report', payload: {}, dedupe: { key: 'x'.repeat(255), mode: 'drop', ttlMs: 30 * 24 * HOUR } });
    expect(edge.statusCode).toBe(202);
  });
});
