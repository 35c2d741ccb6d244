/**
 * Kinds as a per-tenant allowlist: registration with defaults, payload schema
 * and size checks at enqueue, the kind's attempts and deadline applied to its
 * jobs, and the kind's result limit applied at complete. Runs on every
 * backend.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backends, bearer, drainAfterAll, enqueue, errorCode, get, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { kindParams } from '../support/kind-records.js';

const EMAIL_SCHEMA = {
  type: 'object',
  required: ['to'],
  properties: { to: { type: 'string', format: 'email' }, cc: { type: 'array', items: { type: 'string' } } },
  additionalProperties: false,
};

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({}, { backend });
  });
  afterEach(async () => {
    await h.close();
  });

  function putKind(kind: string, body: unknown, key = h.keys.admin) {
    return h.app.inject({ method: 'PUT', url: `/kinds/${kind}`, headers: bearer(key), payload: body as object });
  }

  describe('PUT /kinds/{kind} and GET /kinds', () => {
    it('registers a kind with defaults filled in and lists it for the tenant only', async () => {
      const response = await putKind('email', { payloadSchema: EMAIL_SCHEMA, maxAttempts: 7 });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toMatchObject({
        kind: 'email',
        payloadSchema: EMAIL_SCHEMA,
        maxAttempts: 7,
        leaseMs: 30_000,
        maxPayloadBytes: 1024 * 1024,
        backoff: { baseMs: 1000, maxMs: 300_000 },
        deadlineMs: null,
      });
      const list = await get(h.app, h.keys.producer, '/kinds');
      expect((list.json() as { kinds: { kind: string }[] }).kinds.map((k) => k.kind)).toEqual(['email']);
      const other = await get(h.app, h.keys.otherAdmin, '/kinds');
      expect((other.json() as { kinds: unknown[] }).kinds).toEqual([]);
    });

    it('is admin only and refuses a schema Ajv cannot compile or an inverted backoff', async () => {
      expect((await putKind('email', {}, h.keys.producer)).statusCode).toBe(403);
      expect((await putKind('email', {}, h.keys.worker)).statusCode).toBe(403);
      const badSchema = await putKind('email', { payloadSchema: { type: 'no-such-type' } });
      expect(badSchema.statusCode).toBe(400);
      expect(errorCode(badSchema)).toBe('invalid_request');
      expect((await putKind('email', { payloadSchema: [1] })).statusCode).toBe(400);
      expect((await putKind('email', { backoff: { baseMs: 10, maxMs: 5 } })).statusCode).toBe(400);
      expect((await putKind('bad name', {})).statusCode).toBe(400);
      expect((await putKind('email', { colour: 'red' })).statusCode).toBe(400);
    });

    it('refuses an asynchronous payload schema, naming the path, since enqueue would read its promise as a pass', async () => {
      const schema = { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } };
      for (const [payloadSchema, path] of [
        [{ $async: true, ...schema }, 'body/payloadSchema/$async'],
        [{ ...schema, $defs: { item: { $async: true, type: 'string' } } }, 'body/payloadSchema/$defs/item/$async'],
      ] as const) {
        const response = await putKind('async', { payloadSchema });
        expect(response.statusCode).toBe(400);
        expect(errorCode(response)).toBe('invalid_request');
        expect((response.json() as { error: { message: string } }).error.message).toContain(path);
      }
      expect((await putKind('sync', { payloadSchema: { $async: false, ...schema } })).statusCode).toBe(200);
      expect((await enqueue(h.app, h.keys.producer, { kind: 'sync', payload: {} })).statusCode).toBe(400);
    });

    it('refuses every payload of an asynchronous schema already in the store', async () => {
      await h.store.kindUpsert(kindParams('t1', 'async', { $async: true, type: 'object', required: ['n'] }));
      for (const payload of [{}, { n: 1 }]) {
        const response = await enqueue(h.app, h.keys.producer, { kind: 'async', payload });
        expect(response.statusCode).toBe(400);
        expect(errorCode(response)).toBe('invalid_payload');
        expect((response.json() as { error: { message: string } }).error.message).toContain('$async');
      }
    });
  });

  describe('enqueue against registered kinds', () => {
    it('answers unknown_kind for an unregistered kind once the tenant registered one', async () => {
      expect((await enqueue(h.app, h.keys.producer, { kind: 'sms', payload: {} })).statusCode).toBe(202);
      await putKind('email', {});
      const response = await enqueue(h.app, h.keys.producer, { kind: 'sms', payload: {} });
      expect(response.statusCode).toBe(400);
      expect(errorCode(response)).toBe('unknown_kind');
      // Other tenants keep accepting any kind.
      expect((await enqueue(h.app, h.keys.otherProducer, { kind: 'sms', payload: {} })).statusCode).toBe(202);
    });

    it('answers invalid_payload naming the first failing path', async () => {
      await putKind('email', { payloadSchema: EMAIL_SCHEMA });
      const cases: [unknown, string][] = [
        [{}, 'payload/to'],
        [{ to: 5 }, 'payload/to'],
        [{ to: 'not-an-email' }, 'payload/to'],
        [{ to: 'a@example.com', cc: ['x', 3] }, 'payload/cc/1'],
        [{ to: 'a@example.com', bcc: [] }, 'payload/bcc'],
        ['just a string', 'payload'],
      ];
      for (const [payload, path] of cases) {
        const response = await enqueue(h.app, h.keys.producer, { kind: 'email', payload });
        expect(response.statusCode).toBe(400);
        expect(errorCode(response)).toBe('invalid_payload');
        expect((response.json() as { error: { message: string } }).error.message.startsWith(path)).toBe(true);
      }
      expect((await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { to: 'a@example.com', cc: ['b'] } })).statusCode).toBe(202);
    });

    it("answers 413 for a payload over the kind's maxPayloadBytes", async () => {
      await putKind('small', { maxPayloadBytes: 20 });
      expect((await enqueue(h.app, h.keys.producer, { kind: 'small', payload: 'x'.repeat(10) })).statusCode).toBe(202);
      const response = await enqueue(h.app, h.keys.producer, { kind: 'small', payload: 'x'.repeat(30) });
      expect(response.statusCode).toBe(413);
      expect(errorCode(response)).toBe('payload_too_large');
    });

    it("gives jobs the kind's attempts and deadline unless the request sets them", async () => {
      await putKind('report', { maxAttempts: 9, deadlineMs: 60_000 });
      const job = (await enqueue(h.app, h.keys.producer, { kind: 'report', payload: 1 })).json() as {
        maxAttempts: number;
        createdAt: string;
        deadlineAt: string;
      };
      expect(job.maxAttempts).toBe(9);
      expect(Date.parse(job.deadlineAt) - Date.parse(job.createdAt)).toBe(60_000);
      const own = (await enqueue(h.app, h.keys.producer, { kind: 'report', payload: 2, maxAttempts: 2 })).json() as { maxAttempts: number };
      expect(own.maxAttempts).toBe(2);
    });

    it('sees a newly registered schema at once in this process', async () => {
      await putKind('email', {});
      expect((await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { to: 1 } })).statusCode).toBe(202);
      await putKind('email', { payloadSchema: EMAIL_SCHEMA });
      expect((await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { to: 1 } })).statusCode).toBe(400);
    });
  });

  describe('results against registered kinds', () => {
    it("makes a job dead with result_too_large when its result exceeds the kind's maxResultBytes", async () => {
      await putKind('tiny', { maxResultBytes: 16 });
      await putKind('roomy', {});
      await enqueue(h.app, h.keys.producer, { kind: 'tiny', payload: 1 });
      const [leased] = await lease(h.app, h.keys.worker);
      const response = await post(h.app, h.keys.worker, `/jobs/${leased?.id}/complete`, { token: leased?.token, result: 'x'.repeat(100) });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({ id: leased?.id, status: 'dead' });
      const job = (await get(h.app, h.keys.producer, `/jobs/${leased?.id}`)).json() as { status: string; lastError: { code: string }; result: unknown };
      expect(job).toMatchObject({ status: 'dead', lastError: { code: 'result_too_large' }, result: null });
      expect(errorCode(await get(h.app, h.keys.producer, `/jobs/${leased?.id}/result`))).toBe('result_not_ready');

      await enqueue(h.app, h.keys.producer, { kind: 'roomy', payload: 1 });
      const [roomy] = await lease(h.app, h.keys.worker);
      const ok = await post(h.app, h.keys.worker, `/jobs/${roomy?.id}/complete`, { token: roomy?.token, result: 'x'.repeat(100) });
      expect(ok.json()).toEqual({ id: roomy?.id, status: 'succeeded' });
    });

    it("retries with the kind's backoff, not the default", async () => {
      await h.close();
      h = await startCoordinator({ defaultBackoff: { baseMs: 3_600_000, maxMs: 3_600_000 } }, { backend });
      await putKind('quick', { backoff: { baseMs: 1, maxMs: 1 } });
      await enqueue(h.app, h.keys.producer, { kind: 'quick', payload: 1 });
      const [leased] = await lease(h.app, h.keys.worker);
      const failed = await post(h.app, h.keys.worker, `/jobs/${leased?.id}/fail`, { token: leased?.token, error: { code: 'e' } });
      const runAfter = Date.parse((failed.json() as { runAfter: string }).runAfter);
      expect(runAfter - Date.now()).toBeLessThan(60_000);
    });
  });
});
