/**
 * The export contract over real HTTP on a real SQLite file: idempotency,
 * ownership (404 for another user's export), status and result answers,
 * failure classification by the export worker, backpressure with the task
 * endpoints still answering, and the synchronous endpoint stopping its read
 * when the client goes away.
 */

import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { Worker } from '../../../src/index.js';
import { EXPORT_KIND, type ExportPayload } from '../../../apps/exports/export-job.js';
import { exportHandler } from '../../../apps/exports/export-worker.js';
import { deploy, resultRows, type Deployment } from './fixture.js';

let deployment: Deployment | undefined;
let worker: Worker | undefined;
afterEach(async () => {
  await worker?.stop({ graceMs: 1_000 });
  worker = undefined;
  await deployment?.close();
  deployment = undefined;
});

function startWorker(d: Deployment, maxResultBytes = 64 * 1024 * 1024): Worker {
  const handlers = { [EXPORT_KIND]: exportHandler(d.path, { maxResultBytes }) };
  const started = new Worker({ queue: d.queue, handlers, concurrency: 1, leaseMs: 5_000, waitMs: 200 });
  void started.run();
  return started;
}

const post = (d: Deployment, user: Deployment['users'][number], key: string | undefined, body: unknown = {}) =>
  d.call(user, 'POST', '/exports', { body, headers: key === undefined ? {} : { 'idempotency-key': key } });

describe('POST /exports', () => {
  it('answers 202 with Location and Retry-After; the same key and parameters return the original job', async () => {
    const d = (deployment = await deploy());
    const owner = d.users[1]!;
    const first = await post(d, owner, 'k-1', { status: 'open' });
    expect(first.status).toBe(202);
    const job = first.json() as { id: string; status: string; attempts: number; errorCode: null };
    expect(job).toEqual({ id: job.id, status: 'queued', attempts: 0, errorCode: null });
    expect(first.headers['location']).toBe(`/exports/${job.id}`);
    expect(Number(first.headers['retry-after'])).toBeGreaterThan(0);

    const again = await post(d, owner, 'k-1', { status: 'open' });
    expect(again.status).toBe(202);
    expect((again.json() as { id: string }).id).toBe(job.id);
    expect((await d.queue.list({})).jobs).toHaveLength(1);
  });

  it('answers 409 for the same key with different parameters, and writes nothing', async () => {
    const d = (deployment = await deploy());
    const owner = d.users[1]!;
    expect((await post(d, owner, 'k-1', { status: 'open' })).status).toBe(202);
    const changed = await post(d, owner, 'k-1', { status: 'done' });
    expect(changed.status).toBe(409);
    expect(changed.json()).toMatchObject({ code: 'idempotency_conflict' });
    // The default parameters are a different request too.
    expect((await post(d, owner, 'k-1', {})).status).toBe(409);
    expect((await d.queue.list({})).jobs).toHaveLength(1);
  });

  it('writes the request row and the job in one transaction: a failed insert leaves no job, and the key works afterwards', async () => {
    const d = (deployment = await deploy());
    const owner = d.users[1]!;
    // The application's own insert fails after the job was written in the same transaction.
    d.db.exec("CREATE TRIGGER refuse BEFORE INSERT ON export_requests BEGIN SELECT RAISE(ABORT, 'planted'); END");
    const failed = await post(d, owner, 'k-tx');
    expect(failed.status).toBe(500);
    expect(failed.json()).toMatchObject({ code: 'internal_error' });
    expect((await d.queue.list({})).jobs).toHaveLength(0);
    d.db.exec('DROP TRIGGER refuse');
    const retried = await post(d, owner, 'k-tx');
    expect(retried.status).toBe(202);
    expect((await d.queue.list({})).jobs).toHaveLength(1);
  });

  it('scopes keys by owner: another user with the same key gets a job of its own', async () => {
    const d = (deployment = await deploy());
    const a = (await post(d, d.users[1]!, 'shared')).json() as { id: string };
    const b = (await post(d, d.users[2]!, 'shared')).json() as { id: string };
    expect(a.id).not.toBe(b.id);
  });

  it('refuses a missing key or bad parameters with a stable code', async () => {
    const d = (deployment = await deploy());
    expect((await post(d, d.users[1]!, undefined)).json()).toMatchObject({ code: 'idempotency_key_required' });
    expect((await post(d, d.users[1]!, 'k', { status: 'late' })).json()).toMatchObject({ code: 'invalid_parameters' });
    expect((await post(d, d.users[1]!, 'k', { status: 'open', extra: 1 })).status).toBe(400);
    expect((await d.queue.list({})).jobs).toHaveLength(0);
  });
});

describe('GET /exports/{id} and its result', () => {
  it('answers 404 to another user for the job and the result, as for an id that does not exist', async () => {
    const d = (deployment = await deploy());
    const id = ((await post(d, d.users[1]!, 'k')).json() as { id: string }).id;
    const stranger = d.users[2]!;
    const missing = await d.call(stranger, 'GET', '/exports/01a00000-0000-7000-8000-000000000000');
    for (const answer of [await d.call(stranger, 'GET', `/exports/${id}`), await d.call(stranger, 'GET', `/exports/${id}/result`), missing]) {
      expect(answer.status).toBe(404);
      expect(answer.json()).toEqual({ code: 'not_found', message: 'no such export' });
    }
  });

  it('serves the CSV only after success, with a SHA-256 checksum that verifies and the bytes of the synchronous export', async () => {
    const d = (deployment = await deploy());
    const owner = d.users[0]!;
    const id = ((await post(d, owner, 'k', { status: 'done' })).json() as { id: string }).id;
    const early = await d.call(owner, 'GET', `/exports/${id}/result`);
    expect(early.status).toBe(409);
    expect(early.json()).toMatchObject({ code: 'export_not_ready', status: 'queued' });

    worker = startWorker(d);
    expect((await d.queue.waitFor(id, { timeoutMs: 30_000 })).status).toBe('succeeded');
    expect((await d.call(owner, 'GET', `/exports/${id}`)).json()).toEqual({ id, status: 'succeeded', attempts: 1, errorCode: null });
    const result = await d.call(owner, 'GET', `/exports/${id}/result`);
    expect(result.status).toBe(200);
    expect(result.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(result.headers['x-checksum-sha256']).toBe(createHash('sha256').update(result.body).digest('hex'));
    const sync = await d.call(owner, 'GET', '/tasks/export.csv?status=done');
    expect(result.body.equals(sync.body)).toBe(true);
    expect(result.body.toString().split('\r\n').length).toBeGreaterThan(100);
    expect(resultRows(d.db, id)).toBe(1);
  });

  it('fails a CSV over the size limit at once with result_too_large, and invalid stored parameters with invalid_parameters', async () => {
    const d = (deployment = await deploy());
    const owner = d.users[0]!;
    const id = ((await post(d, owner, 'big')).json() as { id: string }).id;
    const bad = await d.queue.enqueue({
      kind: EXPORT_KIND,
      payload: { ownerId: owner.id, status: 'sometimes' } as unknown as ExportPayload,
      idempotencyKey: 'bad',
    });
    worker = startWorker(d, 10_000);
    const failed = await d.queue.waitFor(id, { timeoutMs: 30_000 });
    expect(failed.status).toBe('dead');
    expect((await d.call(owner, 'GET', `/exports/${id}`)).json()).toEqual({ id, status: 'failed', attempts: 1, errorCode: 'result_too_large' });
    expect((await d.call(owner, 'GET', `/exports/${id}/result`)).json()).toMatchObject({
      code: 'export_not_ready',
      status: 'failed',
      errorCode: 'result_too_large',
    });
    const invalid = await d.queue.waitFor(bad.id, { timeoutMs: 30_000 });
    expect([invalid.status, invalid.attempts, invalid.lastError?.code]).toEqual(['dead', 1, 'invalid_parameters']);
  });
});

describe('a stale attempt', () => {
  it('cannot commit its CSV after its lease expired and another attempt succeeded: the late completion is refused 409', async () => {
    const d = (deployment = await deploy());
    const owner = d.users[0]!;
    const id = ((await post(d, owner, 'k')).json() as { id: string }).id;
    // The stale attempt: leased through the Queue's worker calls with a short lease, and never renewed.
    const [lease] = (await d.queue.workerTransport.leaseResponse({ workerId: 'stale', kinds: [EXPORT_KIND], leaseMs: 300, max: 1, waitMs: 0 })).jobs;
    expect(lease?.id).toBe(id);
    const staleBytes = (await d.call(owner, 'GET', '/tasks/export.csv')).body;
    const firstTask = (d.db.prepare('SELECT MIN(id) AS id FROM tasks WHERE user_id = ?').get(owner.id) as { id: number }).id;
    expect((await d.call(owner, 'PATCH', `/tasks/${firstTask}`, { body: { title: 'renamed before the second attempt' } })).status).toBe(200);

    // The reaper requeues the expired lease; a worker takes the job and commits its own CSV.
    worker = startWorker(d);
    expect((await d.queue.waitFor(id, { timeoutMs: 30_000 })).status).toBe('succeeded');

    const late = d.queue.workerTransport.complete(id, {
      token: lease!.token,
      resultBytes: { contentType: 'text/csv; charset=utf-8', base64: staleBytes.toString('base64') },
    });
    await expect(late).rejects.toMatchObject({ status: 409 });
    expect(resultRows(d.db, id)).toBe(1);
    const result = await d.call(owner, 'GET', `/exports/${id}/result`);
    expect(result.body.equals(staleBytes)).toBe(false);
    expect(result.body.toString()).toContain('renamed before the second attempt');
    expect(result.headers['x-checksum-sha256']).toBe(createHash('sha256').update(result.body).digest('hex'));
  });
});

describe('backpressure', () => {
  it('answers 503 with Retry-After past the pending limit while the task endpoints keep answering', async () => {
    const d = (deployment = await deploy({ settings: { maxPendingExports: 2 } }));
    const owner = d.users[1]!;
    expect((await post(d, owner, 'a')).status).toBe(202);
    expect((await post(d, owner, 'b')).status).toBe(202);
    const refused = await post(d, owner, 'c');
    expect(refused.status).toBe(503);
    expect(refused.json()).toMatchObject({ code: 'exports_overloaded' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // Tasks still answer, reads and writes.
    expect((await d.call(owner, 'GET', '/tasks')).status).toBe(200);
    const created = await d.call(owner, 'POST', '/tasks', { body: { title: 'still works' } });
    expect(created.status).toBe(201);
    // A replay of an accepted key is not new work: it still answers 202.
    expect((await post(d, owner, 'a')).status).toBe(202);
    expect((await d.queue.list({})).jobs).toHaveLength(2);
  });
});

describe('GET /tasks/export.csv', () => {
  it('streams every row to a client that reads to the end', async () => {
    const d = (deployment = await deploy());
    const ended = d.nextSyncEnd();
    const answer = await d.call(d.users[0]!, 'GET', '/tasks/export.csv');
    expect(answer.status).toBe(200);
    expect(answer.body.toString().trimEnd().split('\r\n')).toHaveLength(3_001);
    expect(await ended).toEqual({ userId: d.users[0]!.id, rowsRead: 3_000, completed: true });
  });

  it('stops reading the query when the client disconnects midway', async () => {
    const d = (deployment = await deploy({ dataset: { users: 1, minTasks: 1, maxTasks: 1, heavyUsers: 1, heavyTasks: 200_000, seed: 3 } }));
    const ended = d.nextSyncEnd();
    const answer = await d.pool.request({ method: 'GET', path: '/tasks/export.csv', headers: { authorization: `Bearer ${d.users[0]!.key}` } });
    for await (const _chunk of answer.body) break;
    const end = await ended;
    expect(end.completed).toBe(false);
    expect(end.rowsRead).toBeLessThan(200_000);
    // The server still serves the same user afterwards.
    expect((await d.call(d.users[0]!, 'GET', '/tasks?limit=1')).status).toBe(200);
  });
});
