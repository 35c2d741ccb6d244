/**
 * Bad input is a 4xx with a stable code and never a 500: unknown fields,
 * wrong types, invalid JSON, prototype keys, unsafe integers, oversized and
 * mistyped bodies, unknown routes and methods. Runs on every backend: some
 * of these reach the store (accepted payloads, job ids it must not look up).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasUnsafeInteger } from '../../src/coordinator/json-body.js';
import { backends, bearer, drainAfterAll, enqueue, post, startCoordinator, type Harness } from '../support/http-fixtures.js';

function expectError(response: { statusCode: number; json(): unknown; headers: Record<string, unknown> }, status: number, code: string): void {
  expect(response.statusCode).toBe(status);
  expect(response.json()).toEqual({ error: { code, message: expect.any(String) } });
}

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeAll(async () => {
    h = await startCoordinator({ bodyLimitBytes: 64 * 1024 }, { backend });
  });
  afterAll(async () => {
    await h.close();
  });

  function rawEnqueue(payload: string, contentType = 'application/json') {
    return h.app.inject({
      method: 'POST',
      url: '/jobs',
      headers: { ...bearer(h.keys.producer), 'idempotency-key': `raw-${Math.random()}`, 'content-type': contentType },
      payload,
    });
  }

  describe('request validation', () => {
    it('rejects unknown fields naming the path', async () => {
      const response = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {}, colour: 'red' });
      expectError(response, 400, 'invalid_request');
      expect((response.json() as { error: { message: string } }).error.message).toContain('colour');
      const nested = await post(h.app, h.keys.worker, '/jobs/01900000-0000-7000-8000-000000000000/fail', {
        token: 't',
        error: { code: 'x', stack: 'at foo' },
      });
      expectError(nested, 400, 'invalid_request');
      expect((nested.json() as { error: { message: string } }).error.message).toContain('body/error/stack');
    });

    it('does not coerce body types', async () => {
      for (const body of [
        { kind: 'email', payload: {}, maxAttempts: '3' },
        { kind: 'email', payload: {}, priority: true },
        { kind: 5, payload: {} },
        { kind: 'email', payload: {}, maxAttempts: 2.5 },
        { kind: 'email', payload: {}, runAfter: 'tomorrow' },
        { kind: 'bad kind!', payload: {} },
        { payload: {} },
      ]) {
        const response = await enqueue(h.app, h.keys.producer, body);
        expectError(response, 400, 'invalid_request');
      }
      const message = (await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {}, maxAttempts: '3' })).json() as { error: { message: string } };
      expect(message.error.message).toContain('body/maxAttempts');
    });

    it('coerces and validates querystrings', async () => {
      const ok = await h.app.inject({ method: 'GET', url: '/jobs?limit=5&status=queued', headers: bearer(h.keys.producer) });
      expect(ok.statusCode).toBe(200);
      for (const query of ['limit=0', 'limit=abc', 'status=sleeping', 'limit=100000', 'colour=red']) {
        const response = await h.app.inject({ method: 'GET', url: `/jobs?${query}`, headers: bearer(h.keys.producer) });
        expectError(response, 400, 'invalid_request');
      }
    });

    it('answers invalid_json for malformed and empty JSON bodies', async () => {
      for (const text of ['{"kind":', '{kind: "x"}', "{'a':1}", '[1,2', 'nul']) {
        expectError(await rawEnqueue(text), 400, 'invalid_json');
      }
      expectError(await rawEnqueue(''), 400, 'invalid_request');
      expectError(await rawEnqueue('null'), 400, 'invalid_request');
      expectError(await rawEnqueue('[]'), 400, 'invalid_request');
    });

    it('rejects __proto__ and constructor.prototype keys anywhere', async () => {
      for (const text of [
        '{"kind":"email","payload":{"__proto__":{"admin":true}}}',
        '{"kind":"email","payload":{"a":[{"\\u005f_proto__":1}]}}',
        '{"kind":"email","payload":{"constructor":{"prototype":{"x":1}}}}',
      ]) {
        const response = await rawEnqueue(text);
        expectError(response, 400, 'invalid_request');
      }
      // A plain key named constructor is data, not an attack.
      expect((await rawEnqueue('{"kind":"email","payload":{"constructor":"Ada"}}')).statusCode).toBe(202);
    });

    it('rejects integers that JSON numbers cannot hold exactly', async () => {
      expectError(await rawEnqueue('{"kind":"email","payload":{"n":9007199254740993}}'), 400, 'invalid_request');
      expectError(await rawEnqueue('{"kind":"email","payload":[-12345678901234567890]}'), 400, 'invalid_request');
      expect((await rawEnqueue('{"kind":"email","payload":{"n":9007199254740991,"s":"12345678901234567890","f":1.5e300}}')).statusCode).toBe(202);
    });

    it('answers 413 payload_too_large for an oversized body', async () => {
      const response = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: 'x'.repeat(70 * 1024) });
      expectError(response, 413, 'payload_too_large');
    });

    it('answers 415 for a body that is not JSON', async () => {
      expectError(await rawEnqueue('kind=email', 'application/x-www-form-urlencoded'), 415, 'unsupported_media_type');
      expectError(await rawEnqueue('{"kind":"email","payload":1}', 'text/plain'), 415, 'unsupported_media_type');
    });

    it('answers 404 for unknown routes and 405 for a wrong method on a known path', async () => {
      const missing = await h.app.inject({ method: 'GET', url: '/nope', headers: bearer(h.keys.admin) });
      expectError(missing, 404, 'not_found');
      const unauthenticated = await h.app.inject({ method: 'GET', url: '/nope' });
      expectError(unauthenticated, 404, 'not_found');
      const wrongMethod = await h.app.inject({ method: 'DELETE', url: '/jobs/abc', headers: bearer(h.keys.admin) });
      expectError(wrongMethod, 405, 'method_not_allowed');
      expect(wrongMethod.headers['allow']).toBe('GET');
    });

    it('answers invalid_request for a malformed URL', async () => {
      for (const url of ['/jobs/%zz', '/%']) {
        expectError(await h.app.inject({ method: 'GET', url, headers: bearer(h.keys.producer) }), 400, 'invalid_request');
      }
    });

    it('answers 404 for malformed job ids without asking the store', async () => {
      for (const url of ['/jobs/not-a-uuid', `/jobs/${'a'.repeat(64)}`]) {
        expectError(await h.app.inject({ method: 'GET', url, headers: bearer(h.keys.producer) }), 404, 'not_found');
      }
      expectError(await h.app.inject({ method: 'GET', url: `/jobs/${'a'.repeat(65)}`, headers: bearer(h.keys.producer) }), 400, 'invalid_request');
    });

    it('never answers 500 for random garbage bodies', async () => {
      const samples = ['{}', '"x"', '1', 'true', '{"kind":{},"payload":[]}', '{"kind":"a","payload":1,"runAfter":null}', '\u0000', '{"a":"\\ud800"}'];
      for (const url of ['/jobs', '/lease', '/complete', '/jobs/01900000-0000-7000-8000-000000000000/fail']) {
        for (const payload of samples) {
          const response = await h.app.inject({
            method: 'POST',
            url,
            headers: { ...bearer(url === '/jobs' ? h.keys.producer : h.keys.worker), 'idempotency-key': 'g', 'content-type': 'application/json' },
            payload,
          });
          expect(response.statusCode, `${url} ${payload}`).toBeGreaterThanOrEqual(400);
          expect(response.statusCode, `${url} ${payload}`).toBeLessThan(500);
        }
      }
    });
  });
});

describe('hasUnsafeInteger', () => {
  it('finds unsafe integer literals outside strings only', () => {
    expect(hasUnsafeInteger('[9007199254740992]')).toBe(true);
    expect(hasUnsafeInteger('{"a":-9007199254740992}')).toBe(true);
    expect(hasUnsafeInteger('[9007199254740991,-9007199254740991]')).toBe(false);
    expect(hasUnsafeInteger('["9007199254740993"]')).toBe(false);
    expect(hasUnsafeInteger('["\\"9007199254740993"]')).toBe(false);
    expect(hasUnsafeInteger('[12345678901234567.5, 1e400]')).toBe(false);
  });
});
