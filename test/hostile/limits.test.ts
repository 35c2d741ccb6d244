/**
 * Size and depth limits at their edges (issue 5, item 4): bodies just under,
 * at and over the coordinator's body limit (counted in bytes, not
 * characters) on every route that takes a body, the larger limit of the two
 * batch routes, a kind's maxPayloadBytes, the 4096-byte progress limit, and
 * the 128-level nesting limit. Over real HTTP, an oversized body is refused
 * before it is read whole: a Content-Length over the limit is answered 413
 * before a byte of the body is sent, and a chunked body is answered 413 while
 * the client is still sending. Every refusal leaves the database unchanged.
 */

import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { MAX_JSON_DEPTH } from '../../src/coordinator/json-body.js';
import { LIMITS } from '../../src/protocol/schemas.js';
import { Ref } from '../support/arbitraries.js';
import { backends, bearer, drainAfterAll, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { checkAnswer, ENDPOINTS, storeSnapshot, Tally, World, type SentRequest } from '../support/hostile-world.js';

const BODY_LIMIT = 64 * 1024;
const BATCH_BODY_LIMIT = 192 * 1024;
const tally = new Tally();

afterAll(() => {
  console.log(tally.line(`hostile input (limits, ${backends.map((b) => b.name).join('+')})`));
});

/** `{"kind":"email","payload":"…"}` padded to exactly `bytes` bytes with `unit` (1, 2 or 4 bytes in UTF-8). */
function enqueueBodyOfSize(bytes: number, unit = 'x'): string {
  const frame = '{"kind":"email","payload":""}';
  const unitBytes = Buffer.byteLength(unit, 'utf8');
  const room = bytes - frame.length;
  const text = `{"kind":"email","payload":"${unit.repeat(Math.floor(room / unitBytes))}${'x'.repeat(room % unitBytes)}"}`;
  if (Buffer.byteLength(text, 'utf8') !== bytes) throw new Error('bad padding');
  return text;
}

/** A JSON object whose one string field pads it to `bytes` bytes. */
function paddedBody(bytes: number, field = 'pad'): string {
  const frame = `{"${field}":""}`;
  return `{"${field}":"${'x'.repeat(bytes - frame.length)}"}`;
}

interface RawAnswer {
  readonly status: number;
  readonly body: string;
  /** Body bytes the client had written when the answer's head arrived. */
  readonly sentBeforeAnswer: number;
}

/** Sends a request head, then `chunks` of body while no answer has come, over a plain socket. */
async function rawRequest(port: number, head: string, chunks: () => Buffer | null): Promise<RawAnswer> {
  const socket: Socket = connect({ port, host: '127.0.0.1' });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let sent = 0;
  let sentBeforeAnswer = -1;
  let received = '';
  let closed = false;
  socket.on('data', (data: Buffer) => {
    if (sentBeforeAnswer < 0) sentBeforeAnswer = sent;
    received += data.toString('latin1');
  });
  const ended = new Promise<void>((resolve) => {
    socket.on('close', () => {
      closed = true;
      resolve();
    });
    socket.on('error', () => undefined);
  });
  socket.write(head);
  for (;;) {
    if (sentBeforeAnswer >= 0 || closed) break;
    const chunk = chunks();
    if (chunk === null) break;
    const flushed = socket.write(chunk);
    sent += chunk.length;
    if (!flushed) await new Promise<void>((resolve) => socket.once('drain', resolve).once('close', resolve));
    else await new Promise<void>((resolve) => setImmediate(resolve));
  }
  // The answer is short: wait until its body is complete (the head says how long), or the socket closes.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const split = received.indexOf('\r\n\r\n');
    const length = /content-length:\s*(\d+)/i.exec(received.slice(0, Math.max(0, split)))?.[1];
    if (split >= 0 && length !== undefined && received.length >= split + 4 + Number(length)) break;
    if (closed || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  socket.destroy();
  await ended;
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0);
  const bodyStart = received.indexOf('\r\n\r\n');
  return { status, body: bodyStart < 0 ? '' : received.slice(bodyStart + 4), sentBeforeAnswer: Math.max(0, sentBeforeAnswer) };
}

describe.each(backends)('limits ($name)', (backend) => {
  let h: Harness;
  let world: World;
  let baseline: string;
  drainAfterAll(backend);

  beforeAll(async () => {
    h = await startCoordinator(
      { bodyLimitBytes: BODY_LIMIT, batchBodyLimitBytes: BATCH_BODY_LIMIT, kindCacheMs: 0, defaultLeaseMs: 86_400_000 },
      { backend, manualClock: true },
    );
    world = await World.seed(h);
    await h.app.inject({ method: 'PUT', url: '/kinds/tiny', headers: bearer(h.keys.admin), payload: { maxPayloadBytes: 100 } });
  });
  afterAll(async () => {
    await h?.close();
  });
  beforeEach(async () => {
    baseline = await storeSnapshot(h.store);
  });

  async function send(sent: SentRequest): Promise<{ status: number; code: string | undefined; body: string }> {
    const response = await h.app.inject({
      method: sent.method as 'POST',
      url: sent.url,
      headers: sent.headers as Record<string, string>,
      ...(sent.payload === undefined ? {} : { payload: sent.payload }),
    });
    return { status: response.statusCode, code: checkAnswer(response, sent, tally), body: response.body };
  }

  async function expectUnchanged(context: string): Promise<void> {
    const after = await storeSnapshot(h.store);
    if (after !== baseline) expect(JSON.parse(after), `the database changed after ${context}`).toEqual(JSON.parse(baseline));
  }

  async function accepted(): Promise<void> {
    await world.refresh();
    baseline = await storeSnapshot(h.store);
  }

  function enqueueRequest(payload: string, key: string): SentRequest {
    return { method: 'POST', url: '/jobs', headers: { ...bearer(h.keys.producer), 'content-type': 'application/json', 'idempotency-key': key }, payload };
  }

  it('the body limit is the configured one, and 1 MiB by default', async () => {
    expect(h.app.initialConfig.bodyLimit).toBe(BODY_LIMIT);
    const plain = await buildCoordinator({ store: h.store, logger: false, config: { reaperIntervalMs: 0 } });
    try {
      expect(plain.initialConfig.bodyLimit).toBe(LIMITS.bodyLimitBytes);
      expect(LIMITS.bodyLimitBytes).toBe(1024 * 1024);
    } finally {
      await plain.close();
    }
  });

  it('POST /jobs: a body just under and at the limit is accepted, one byte over is 413; bytes, not characters, count', async () => {
    for (const [size, unit] of [
      [BODY_LIMIT - 1, 'x'],
      [BODY_LIMIT, 'x'],
      [BODY_LIMIT, 'é'],
      [BODY_LIMIT, '\u{1f600}'],
    ] as const) {
      const answer = await send(enqueueRequest(enqueueBodyOfSize(size, unit), `limit-${size}-${unit}`));
      expect(answer.status, `${size} bytes of ${unit}: ${answer.body.slice(0, 200)}`).toBe(202);
      await accepted();
    }
    for (const unit of ['x', 'é', '\u{1f600}']) {
      const answer = await send(enqueueRequest(enqueueBodyOfSize(BODY_LIMIT + 1, unit), `over-${unit}`));
      expect(answer.code).toBe('payload_too_large');
      expect(answer.status).toBe(413);
    }
    // Characters under the limit, bytes over it.
    const wide = `{"kind":"email","payload":"${'é'.repeat(BODY_LIMIT / 2)}"}`;
    expect(wide.length).toBeLessThan(BODY_LIMIT);
    expect((await send(enqueueRequest(wide, 'wide'))).code).toBe('payload_too_large');
    await expectUnchanged('bodies over the limit');
  });

  it('every route that takes a body answers 413 one byte over its limit, and nothing changes', async () => {
    const batch = new Set(['/jobs/batch', '/complete']);
    const routes = ENDPOINTS.filter((e) => e.method !== 'GET');
    expect(routes.length).toBe(19);
    for (const endpoint of routes) {
      const url = endpoint.route
        .replace(':id', world.resolve(new Ref('jobId', 'running')))
        .replace(':kind', 'big')
        .replace(':name', 'big');
      const limit = batch.has(endpoint.route) ? BATCH_BODY_LIMIT : BODY_LIMIT;
      const roles = endpoint.roles === 'public' ? [] : endpoint.roles;
      const key = roles.includes('worker') ? h.keys.worker : roles.includes('producer') ? h.keys.producer : h.keys.admin;
      const headers = { ...bearer(key), 'content-type': 'application/json', 'idempotency-key': `big-${endpoint.route}` };
      const over = await send({ method: endpoint.method, url, headers, payload: paddedBody(limit + 1) });
      expect(over.code, `${endpoint.method} ${endpoint.route}`).toBe('payload_too_large');
      if (batch.has(endpoint.route)) {
        // Between the two limits: the batch routes read it (and refuse the unknown field, not the size).
        const between = await send({ method: endpoint.method, url, headers, payload: paddedBody(BODY_LIMIT + 1) });
        expect(between.code, `${endpoint.route} between the limits`).toBe('invalid_request');
      }
    }
    await expectUnchanged('oversized bodies on every route');
  });

  it("a kind's maxPayloadBytes: at the limit accepted, one byte over 413", async () => {
    // The payload is measured in canonical JSON: a 100-byte string literal is 98 characters and its quotes.
    const at = await send(enqueueRequest(JSON.stringify({ kind: 'tiny', payload: 'p'.repeat(98) }), 'tiny-at'));
    expect(at.status, at.body).toBe(202);
    await accepted();
    const over = await send(enqueueRequest(JSON.stringify({ kind: 'tiny', payload: 'p'.repeat(99) }), 'tiny-over'));
    expect(over.code).toBe('payload_too_large');
    const overWide = await send(enqueueRequest(JSON.stringify({ kind: 'tiny', payload: 'é'.repeat(50) }), 'tiny-wide'));
    expect(overWide.code).toBe('payload_too_large');
    await expectUnchanged("payloads over the kind's limit");
  });

  it('renew progress: 4096 bytes of JSON accepted, 4097 refused with 413', async () => {
    const id = world.resolve(new Ref('jobId', 'running'));
    const token = world.resolve(new Ref('token', 'live'));
    const renew = (progress: string): SentRequest => ({
      method: 'POST',
      url: `/jobs/${id}/renew`,
      headers: { ...bearer(h.keys.worker), 'content-type': 'application/json' },
      payload: JSON.stringify({ token, progress, leaseMs: 86_400_000 }),
    });
    const over = await send(renew('q'.repeat(4096 - 1)));
    expect(over.code).toBe('payload_too_large');
    await expectUnchanged('progress over the limit');
    const at = await send(renew('q'.repeat(4096 - 2)));
    expect(at.status, at.body).toBe(200);
    await accepted();
  });

  it(`nesting: ${MAX_JSON_DEPTH} levels accepted, one more refused with 400, a million never a 5xx`, async () => {
    const nested = (depth: number): string => `{"kind":"email","payload":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;
    const at = await send(enqueueRequest(nested(MAX_JSON_DEPTH), 'deep-at'));
    expect(at.status, at.body).toBe(202);
    await accepted();
    for (const depth of [MAX_JSON_DEPTH + 1, 5_000, 30_000]) {
      const answer = await send(enqueueRequest(nested(depth), `deep-${depth}`));
      expect(answer.code, `depth ${depth}`).toBe('invalid_request');
    }
    // Deeper than the body limit allows as brackets: refused for its size, and never a stack overflow.
    const huge = await send(enqueueRequest(nested(1_000_000), 'deep-huge'));
    expect(huge.code).toBe('payload_too_large');
    await expectUnchanged('deep nesting');
  });

  it('integers beyond what a column holds are refused with 400, the largest allowed ones are stored', async () => {
    const id = world.resolve(new Ref('jobId', 'running'));
    const token = world.resolve(new Ref('token', 'live'));
    const worker = { ...bearer(h.keys.worker), 'content-type': 'application/json' };
    const admin = { ...bearer(h.keys.otherAdmin), 'content-type': 'application/json' };
    const refused: SentRequest[] = [
      { method: 'POST', url: `/jobs/${id}/checkpoint`, headers: worker, payload: `{"token":"${token}","step":2147483648,"state":1}` },
      { method: 'POST', url: `/jobs/${id}/checkpoint`, headers: worker, payload: `{"token":"${token}","step":1e20,"state":1}` },
      { method: 'PUT', url: '/kinds/wide', headers: admin, payload: '{"backoff":{"baseMs":2147483648,"maxMs":4294967296}}' },
      { method: 'PUT', url: '/kinds/wide', headers: admin, payload: '{"maxResultBytes":2147483648}' },
      { method: 'PUT', url: '/kinds/wide', headers: admin, payload: '{"deadlineMs":9007199254740991}' },
      { method: 'PUT', url: '/kinds/wide', headers: admin, payload: '{"deadlineMs":1e92}' },
      {
        method: 'POST',
        url: '/jobs',
        headers: { ...bearer(h.keys.producer), 'content-type': 'application/json', 'idempotency-key': 'wide' },
        payload: '{"kind":"email","payload":1,"deadlineMs":1e92}',
      },
    ];
    for (const sent of refused) expect((await send(sent)).code, String(sent.payload)).toBe('invalid_request');
    await expectUnchanged('integers beyond the columns');
    expect(
      (await send({ method: 'POST', url: `/jobs/${id}/checkpoint`, headers: worker, payload: `{"token":"${token}","step":2147483647,"state":1}` })).status,
    ).toBe(200);
    const widest = await send({
      method: 'PUT',
      url: '/kinds/wide',
      headers: admin,
      payload: JSON.stringify({
        backoff: { baseMs: LIMITS.maxBackoffMs, maxMs: LIMITS.maxBackoffMs },
        maxResultBytes: LIMITS.maxResultBytes,
        deadlineMs: LIMITS.maxDeadlineMs,
      }),
    });
    expect(widest.status, widest.body).toBe(200);
    const job = await send({
      method: 'POST',
      url: '/jobs',
      headers: { ...bearer(h.keys.otherProducer), 'content-type': 'application/json', 'idempotency-key': 'wide' },
      payload: '{"kind":"wide","payload":1}',
    });
    expect(job.status, job.body).toBe(202);
    await accepted();
  });

  describe('over real HTTP', () => {
    let port = 0;
    beforeAll(async () => {
      await h.app.listen({ port: 0, host: '127.0.0.1' });
      const address = h.app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      port = address.port;
    });

    function head(extra: string): string {
      return `POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${h.keys.producer}\r\nIdempotency-Key: raw-${Math.random()}\r\nContent-Type: application/json\r\n${extra}\r\n`;
    }

    it('a Content-Length over the limit is answered 413 before any of the body is sent', async () => {
      const answer = await rawRequest(port, head(`Content-Length: ${1024 ** 3}\r\n`), () => null);
      expect(answer.status).toBe(413);
      expect(JSON.parse(answer.body)).toEqual({ error: { code: 'payload_too_large', message: expect.any(String) } });
      expect(answer.sentBeforeAnswer).toBe(0);
      tally.cases += 1;
      tally.refused += 1;
      await expectUnchanged('a huge Content-Length');
    });

    it('a chunked body is answered 413 once it passes the limit, while the client is still sending', async () => {
      const chunk = Buffer.from('x'.repeat(16 * 1024));
      const total = 256 * 1024 * 1024;
      let offered = 0;
      const answer = await rawRequest(port, head('Transfer-Encoding: chunked\r\n'), () => {
        if (offered >= total) return null;
        const prefix = offered === 0 ? '{"kind":"email","payload":"' : '';
        const body = Buffer.concat([Buffer.from(prefix), chunk]);
        offered += body.length;
        return Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n')]);
      });
      expect(answer.status).toBe(413);
      expect(JSON.parse(answer.body)).toEqual({ error: { code: 'payload_too_large', message: expect.any(String) } });
      // The answer came long before the 256 MiB were sent: the coordinator stopped at the limit.
      expect(answer.sentBeforeAnswer).toBeGreaterThan(BODY_LIMIT);
      expect(answer.sentBeforeAnswer).toBeLessThan(total / 4);
      console.log(`chunked body: 413 after ${answer.sentBeforeAnswer} bytes sent (limit ${BODY_LIMIT})`);
      tally.cases += 1;
      tally.refused += 1;
      await expectUnchanged('an endless chunked body');
    });
  });
});
