/**
 * Hostile headers and query strings (issue 5, item 4): Idempotency-Key and
 * Authorization values of every kind, odd Content-Length and Content-Type
 * headers, and the list query of GET /jobs with hostile, repeated and unknown
 * parameters. Besides "never a 5xx, always the error shape, a refusal changes
 * nothing", the idempotency properties are checked with hostile keys: the
 * same key and body replay the same job, a changed body is a 409, and two
 * distinct keys (in the header or in a batch) never share a job.
 */

import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newApiKey } from '../../src/core/ids.js';
import { hostileChar, hostileString, SQL_INJECTIONS } from '../support/arbitraries.js';
import { backends, bearer, drainAfterAll, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { checkAnswer, shortReport, storeSnapshot, Tally, World, type SentRequest } from '../support/hostile-world.js';

/** LEASEHOLD_FUZZ_SCALE multiplies the runs for a longer hunt. */
const SCALE = Number(process.env['LEASEHOLD_FUZZ_SCALE'] ?? '') || 1;
const RUNS: Record<string, number> = { sqlite: 80 * SCALE, postgres: 35 * SCALE };
const tally = new Tally();
/** What an idempotency key may not hold (NUL, unpaired surrogates). */
const UNSTORABLE = /[\u0000\ud800-\udfff]/u;

afterAll(() => {
  console.log(tally.line(`hostile input (headers and queries, ${backends.map((b) => b.name).join('+')})`));
});

/** Header values a client library would still send (light-my-request passes them through as given). */
/** Keys the contract must accept: visible ASCII (inner spaces allowed), 1 to 255 characters. */
const PLAIN_KEY = /^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$/;
const plainKey = fc.stringMatching(PLAIN_KEY);
const headerValue = fc.oneof(
  hostileString.filter((s) => s.length <= 300),
  fc.string({ unit: hostileChar, maxLength: 8 }),
);

describe.each(backends)('hostile headers and queries ($name)', (backend) => {
  let h: Harness;
  let world: World;
  let baseline: string;
  drainAfterAll(backend);

  beforeAll(async () => {
    h = await startCoordinator({ authCacheMs: 60_000, kindCacheMs: 0, defaultLeaseMs: 86_400_000 }, { backend, manualClock: true });
    world = await World.seed(h);
    baseline = await storeSnapshot(h.store);
  });
  afterAll(async () => {
    await h?.close();
  });
  beforeEach(async () => {
    // A test that failed half-way may have left accepted changes behind.
    baseline = await storeSnapshot(h.store);
  });
  /** Every key accepted so far and its job: the same key always names the same job, distinct keys distinct jobs. */
  const jobOfKey = new Map<string, string>();
  function expectOwnJob(key: string, id: string): void {
    const known = jobOfKey.get(key);
    if (known !== undefined) expect(id, `key ${JSON.stringify(key).slice(0, 100)} named another job`).toBe(known);
    for (const [other, otherId] of jobOfKey) {
      if (other !== key && otherId === id)
        throw new Error(`keys ${JSON.stringify(other).slice(0, 100)} and ${JSON.stringify(key).slice(0, 100)} share job ${id}`);
    }
    jobOfKey.set(key, id);
  }

  async function send(sent: SentRequest): Promise<{ status: number; code: string | undefined; body: string; headers: Record<string, unknown> }> {
    const response = await h.app.inject({
      method: sent.method as 'GET',
      url: sent.url,
      headers: sent.headers as Record<string, string>,
      ...(sent.payload === undefined ? {} : { payload: sent.payload }),
    });
    const code = checkAnswer(response, sent, tally);
    return { status: response.statusCode, code, body: response.body, headers: response.headers };
  }

  async function expectUnchanged(context: string): Promise<void> {
    const after = await storeSnapshot(h.store);
    if (after !== baseline) expect(JSON.parse(after), `the database changed after ${context}`).toEqual(JSON.parse(baseline));
  }

  async function moveBaseline(): Promise<void> {
    await world.refresh();
    baseline = await storeSnapshot(h.store);
  }

  it('Idempotency-Key: any value is refused with a stable code or makes exactly one job, replayed for the same body', async () => {
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof(headerValue, plainKey, fc.constantFrom('', ' ', '\t', 'k'.repeat(255), 'k'.repeat(256))), async (key) => {
        // The body depends on the key alone: a key met again is a replay, and two keys the store
        // confused with each other would show up as a conflict.
        const body = JSON.stringify({ kind: 'email', payload: { key } });
        const sent: SentRequest = {
          method: 'POST',
          url: '/jobs',
          headers: { ...bearer(h.keys.producer), 'content-type': 'application/json', 'idempotency-key': key },
          payload: body,
        };
        const first = await send(sent);
        // The positive half: a visible-ASCII key of at most 255 characters is one the contract accepts.
        if (PLAIN_KEY.test(key)) expect(first.status, `key ${JSON.stringify(key)}: ${first.body}`).toBe(202);
        if (first.status >= 400) {
          expect(['idempotency_key_required', 'invalid_request'], first.body).toContain(first.code);
          if (key.trim().length === 0) expect(first.code).toBe('idempotency_key_required');
          await expectUnchanged(`Idempotency-Key ${JSON.stringify(key).slice(0, 100)}`);
          return;
        }
        expect(first.status).toBe(202);
        accepted += 1;
        expectOwnJob(key, (JSON.parse(first.body) as { id: string }).id);
        await moveBaseline();
        const replay = await send(sent);
        expect(replay.status).toBe(202);
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect((JSON.parse(replay.body) as { id: string }).id).toBe((JSON.parse(first.body) as { id: string }).id);
        const conflict = await send({ ...sent, payload: JSON.stringify({ kind: 'email', payload: { key, changed: true } }) });
        expect(conflict.code).toBe('idempotency_conflict');
        await expectUnchanged('a replay and a conflicting body');
      }),
      { numRuns: RUNS[backend.name] ?? 40, endOnFailure: true, reporter: shortReport },
    );
    // A run in which every key was refused would prove nothing about the keys that must work.
    expect(accepted).toBeGreaterThan(0);
  });

  it('distinct idempotency keys in one batch never share a job, whatever characters they hold', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(
          hostileString.filter((s) => s.length >= 1 && s.length <= 255),
          { minLength: 2, maxLength: 5 },
        ),
        async (keys) => {
          const jobs = keys.map((idempotencyKey) => ({ idempotencyKey, kind: 'email', payload: { key: idempotencyKey } }));
          const answer = await send({
            method: 'POST',
            url: '/jobs/batch',
            headers: { ...bearer(h.keys.producer), 'content-type': 'application/json' },
            payload: JSON.stringify({ jobs }),
          });
          if (keys.some((key) => UNSTORABLE.test(key))) {
            // PostgreSQL would keep such a key as U+FFFD and confuse it with another: refused as a whole.
            expect(answer.code, answer.body.slice(0, 300)).toBe('invalid_request');
            await expectUnchanged(`a batch with keys ${JSON.stringify(keys).slice(0, 200)}`);
            return;
          }
          expect(answer.status, answer.body).toBe(200);
          const results = (JSON.parse(answer.body) as { results: { idempotencyKey: string; status: number; job?: { id: string } }[] }).results;
          expect(results.map((r) => r.idempotencyKey)).toEqual(keys);
          const ids = results.map((r) => r.job?.id);
          expect(
            results.map((r) => r.status),
            answer.body.slice(0, 500),
          ).toEqual(keys.map(() => 202));
          expect(new Set(ids).size, `keys ${JSON.stringify(keys).slice(0, 300)} shared a job`).toBe(keys.length);
          for (const [index, key] of keys.entries()) expectOwnJob(key, ids[index] ?? '');
          await moveBaseline();
        },
      ),
      { numRuns: Math.ceil((RUNS[backend.name] ?? 40) / 2), endOnFailure: true, reporter: shortReport },
    );
  });

  it('idempotency keys that PostgreSQL would fold into U+FFFD are refused, in the header and in a batch', async () => {
    for (const key of ['x\u0000', 'x\ud800', 'x\udbff', '\udc00x']) {
      const single = await send({
        method: 'POST',
        url: '/jobs',
        headers: { ...bearer(h.keys.producer), 'content-type': 'application/json', 'idempotency-key': key },
        payload: '{"kind":"email","payload":1}',
      });
      expect(single.code).toBe('invalid_request');
    }
    const batch = await send({
      method: 'POST',
      url: '/jobs/batch',
      headers: { ...bearer(h.keys.producer), 'content-type': 'application/json' },
      payload: JSON.stringify({ jobs: ['x\ud800', 'x\udbff', 'x\ufffd'].map((idempotencyKey, n) => ({ idempotencyKey, kind: 'email', payload: n })) }),
    });
    expect(batch.code).toBe('invalid_request');
    await expectUnchanged('keys with NUL and unpaired surrogates');
    // U+FFFD itself and paired surrogates are ordinary characters.
    const fine = await send({
      method: 'POST',
      url: '/jobs/batch',
      headers: { ...bearer(h.keys.producer), 'content-type': 'application/json' },
      payload: JSON.stringify({ jobs: ['x\ufffd', 'x\ud83d\ude00'].map((idempotencyKey, n) => ({ idempotencyKey, kind: 'email', payload: n })) }),
    });
    expect(fine.status).toBe(200);
    await moveBaseline();
  });

  it('Authorization: anything but a valid key answers 401 and changes nothing', async () => {
    const valid = h.keys.producer;
    const authorization = fc.oneof(
      headerValue,
      headerValue.map((s) => `Bearer ${s}`),
      fc.constantFrom(
        '',
        'Bearer',
        'Bearer ',
        'Basic dXNlcjpwYXNz',
        valid,
        `Token ${valid}`,
        `Bearer ${valid}x`,
        `Bearer x${valid}`,
        `Bearer ${valid.slice(0, -1)}`,
        `Bearer ${valid} ${valid}`,
        `Bearer ${valid},Bearer ${valid}`,
        `Bearer\t${valid}`,
        `Bearer ${valid.toUpperCase()}`,
        `Bearer ${newApiKey()}`,
        `Bearer ${'a'.repeat(257)}`,
        `Bearer ${'a'.repeat(100_000)}`,
        `Bearer ${valid}\u0000`,
        `Bearer ' OR '1'='1`,
      ),
      fc.constantFrom(...SQL_INJECTIONS).map((s) => `Bearer ${s}`),
    );
    await fc.assert(
      fc.asyncProperty(authorization, fc.constantFrom('/jobs', '/stats', '/kinds', '/lease'), async (value, path) => {
        const method = path === '/lease' ? 'POST' : 'GET';
        const answer = await send({
          method,
          url: path,
          headers: { authorization: value, 'content-type': 'application/json' },
          ...(method === 'POST' ? { payload: '{"workerId":"w"}' } : {}),
        });
        expect(answer.status, `${JSON.stringify(value).slice(0, 200)} → ${answer.body}`).toBe(401);
        expect(answer.code).toBe('unauthorized');
        await expectUnchanged(`Authorization ${JSON.stringify(value).slice(0, 100)}`);
      }),
      { numRuns: RUNS[backend.name] ?? 40, endOnFailure: true, reporter: shortReport },
    );
  });

  it('GET /jobs: hostile, repeated and unknown query parameters answer 200 or 400 invalid_request', async () => {
    const param = fc.oneof(
      fc.constantFrom('status', 'kind', 'limit', 'cursor'),
      fc.constantFrom('__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'tenant', 'owner', '', '%', 'status[]', 'limit[0]'),
    );
    const value = fc.oneof(
      fc.constantFrom(
        'queued',
        'running',
        'succeeded',
        'dead',
        'email',
        '1',
        '1000',
        '1001',
        '0',
        '-1',
        '1e3',
        '1.5',
        '0x10',
        '',
        '9007199254740993',
        '00000000001',
        '99999999999999999999',
      ),
      headerValue,
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(param, value), { maxLength: 5 }), fc.boolean(), async (pairs, rawEncoding) => {
        const query = pairs
          .map(([k, v]) =>
            rawEncoding ? `${k}=${v.replace(/[#\s]/g, '')}` : `${encodeURIComponent(k)}=${encodeURIComponent(v.replace(/[\ud800-\udfff]/g, '\ufffd'))}`,
          )
          .join('&');
        const answer = await send({ method: 'GET', url: `/jobs?${query}`, headers: bearer(h.keys.producer) });
        if (answer.status !== 200) expect(answer.code, `?${query.slice(0, 200)} → ${answer.body.slice(0, 300)}`).toBe('invalid_request');
        await expectUnchanged(`GET /jobs?${query.slice(0, 100)}`);
      }),
      { numRuns: RUNS[backend.name] ?? 40, endOnFailure: true, reporter: shortReport },
    );
  });

  it('odd framing headers: Content-Length, Content-Type, Transfer-Encoding, Accept', async () => {
    const body = JSON.stringify({ kind: 'email', payload: { framing: true } });
    const variants: Record<string, string>[] = [
      { 'content-length': '3' },
      { 'content-length': '-1' },
      { 'content-length': 'abc' },
      { 'content-length': '99999999999999999999' },
      { 'content-type': 'application/json, text/plain' },
      { 'content-type': 'application/json; charset=utf-7' },
      { 'content-type': '' },
      { 'content-encoding': 'gzip' },
      { 'content-encoding': 'br' },
      { 'transfer-encoding': 'gzip, chunked' },
      { accept: 'text/html' },
      { accept: 'application/xml;q=1, */*;q=0' },
      { 'x-forwarded-for': "'; DROP TABLE jobs; --" },
      { host: "evil'; --" },
      { expect: '100-continue' },
    ];
    for (const extra of variants) {
      const headers = { ...bearer(h.keys.producer), 'content-type': 'application/json', 'idempotency-key': `framing-${JSON.stringify(extra)}`, ...extra };
      let answer: Awaited<ReturnType<typeof send>>;
      try {
        answer = await send({ method: 'POST', url: '/jobs', headers, payload: body });
      } catch (error) {
        // light-my-request itself refuses some framings it cannot express; a real client could not send them either.
        if (error instanceof Error && /content-length|header/i.test(error.message) && !/5xx/.test(error.message)) continue;
        throw error;
      }
      if (answer.status < 300) await moveBaseline();
      else await expectUnchanged(`headers ${JSON.stringify(extra)}`);
    }
  });
});
