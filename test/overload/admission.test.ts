/**
 * Admission control (src/coordinator/admission.ts) over real HTTP on a random
 * port: a burst an honest producer sends is accepted in full; unrouted and
 * unauthenticated requests are answered before their body is read and their
 * connections closed, so they hold nothing; a slow body is cut off by the
 * request timeout and frees what it held; per-key and per-tenant caps answer
 * 429 with Retry-After while other tenants pass; the queueing-delay rule
 * refuses a standing queue and recovers once it drains; and the count
 * ceiling still bounds what is in flight.
 */

import { connect, type AddressInfo, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { QueueDelayProbe, QueueDelayRule, UNCOUNTED_ROUTES } from '../../src/coordinator/admission.js';
import { CoordinatorConfigError, resolveConfig, type CoordinatorConfigInput } from '../../src/engine/config.js';
import type { Store } from '../../src/store/store.js';
import { createKey, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { waitFor } from '../support/wait-for.js';

const BODY = '{"kind":"held","payload":{"n":1}}';

interface RawRequest {
  /** The status code of the answer. */
  readonly status: Promise<number>;
  /** Everything received, once the server closed the connection. */
  readonly closed: Promise<string>;
  send(text: string): void;
  destroy(): void;
}

/** Writes `head` (and whatever part of a body it carries) on a fresh socket and keeps it open. */
async function rawRequest(port: number, head: string): Promise<RawRequest> {
  const socket: Socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  const status = new Promise<number>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(received);
      if (match !== null) resolve(Number(match[1]));
    });
  });
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  socket.on('error', () => undefined);
  socket.write(head);
  return { status, closed, send: (text) => socket.write(text), destroy: () => socket.destroy() };
}

/** A POST /jobs whose headers and first body byte are sent, the rest withheld. */
function holdEnqueue(port: number, key: string, idempotencyKey: string): Promise<RawRequest> {
  return rawRequest(
    port,
    `POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nIdempotency-Key: ${idempotencyKey}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY.slice(0, 1)}`,
  );
}

async function finish(held: RawRequest): Promise<number> {
  held.send(BODY.slice(1));
  const status = await held.status;
  held.destroy();
  return status;
}

async function storedJobs(store: Store, tenant = 't1'): Promise<number> {
  const stats = await store.stats({ tenant });
  return Object.values(stats.counts).reduce((sum, n) => sum + n, 0);
}

describe('admission control', () => {
  let h: Harness | undefined;
  let pool: Pool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
    await h?.close();
    h = undefined;
  });

  async function listening(config: CoordinatorConfigInput = {}): Promise<{ h: Harness; port: number; url: string }> {
    h = await startCoordinator(config);
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (h.app.server.address() as AddressInfo).port;
    return { h, port, url: `http://127.0.0.1:${port}` };
  }

  async function enqueueOver(
    url: string,
    key: string,
    idempotencyKey: string,
    body = { kind: 'k', payload: {} },
  ): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
    pool ??= new Pool(url, { connections: 1_024, pipelining: 1 });
    const response = await pool.request({
      method: 'POST',
      path: '/jobs',
      headers: { authorization: `Bearer ${key}`, 'idempotency-key': idempotencyKey, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.statusCode, headers: response.headers, body: await response.body.text() };
  }

  it('accepts a burst of 1,000 concurrent enqueues from one producer on an idle coordinator in full', async () => {
    const { h, url } = await listening();
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 1_000 }, (_, i) => enqueueOver(url, h.keys.producer, `burst-${i}`)));
    const elapsed = performance.now() - started;
    const statuses: Record<number, number> = {};
    for (const answer of answers) statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
    console.log(`burst of 1,000 concurrent POST /jobs (sqlite): ${JSON.stringify(statuses)} in ${elapsed.toFixed(0)} ms`);
    expect(statuses).toEqual({ 202: 1_000 });
    expect(await storedJobs(h.store)).toBe(1_000);
  }, 60_000);

  it('answers 64 anonymous slow sockets on an unrouted path before their bodies, closing them, while a producer enqueues within 1 s', async () => {
    const { h, port, url } = await listening();
    const sockets = await Promise.all(
      Array.from({ length: 64 }, () =>
        rawRequest(port, 'POST /no-such-route HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{'),
      ),
    );
    // Every one is answered 404 with Connection: close without its remaining 99 bytes, and the server closes it.
    const received = await Promise.all(sockets.map((s) => s.closed));
    for (const text of received) {
      expect(text).toMatch(/^HTTP\/1\.1 404 /);
      expect(text.toLowerCase()).toContain('connection: close');
    }
    const started = performance.now();
    const answer = await enqueueOver(url, h.keys.producer, 'beside-slow-sockets');
    const latency = performance.now() - started;
    console.log(`enqueue beside 64 anonymous slow sockets: ${answer.status} in ${latency.toFixed(1)} ms`);
    expect(answer.status).toBe(202);
    expect(latency).toBeLessThan(1_000);
  });

  it('answers a missing or bad key before the body is read and closes the connection; the enqueue beside it passes', async () => {
    const { h, port, url } = await listening({ maxInFlightRequests: 1 });
    const anonymous = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        rawRequest(
          port,
          `POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n${i % 2 === 0 ? '' : 'Authorization: Bearer not-a-key\r\n'}` +
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
        ),
      ),
    );
    for (const text of await Promise.all(anonymous.map((s) => s.closed))) {
      expect(text).toMatch(/^HTTP\/1\.1 401 /);
      expect(text.toLowerCase()).toContain('connection: close');
    }
    // With a ceiling of one, a slot still held by any of them would refuse this.
    expect((await enqueueOver(url, h.keys.producer, 'beside-bad-keys')).status).toBe(202);
  });

  it('cuts off a slow-loris body at the request timeout and frees what it held', async () => {
    const { h, port, url } = await listening({ requestTimeoutMs: 300, headersTimeoutMs: 200, maxInFlightPerKey: 1 });
    const started = performance.now();
    const slow = await holdEnqueue(port, h.keys.producer, 'slow-loris');
    // The key's only slot is held while the body trickles.
    await waitFor('the slow request to be admitted', () => h.app.admission.inFlightOf('', 't1').tenant === 1);
    expect((await enqueueOver(url, h.keys.producer, 'while-slow-loris')).status).toBe(429);
    const received = await slow.closed;
    const cutAfter = performance.now() - started;
    console.log(`slow-loris body cut off after ${cutAfter.toFixed(0)} ms (requestTimeoutMs 300)`);
    expect(received).toMatch(/^HTTP\/1\.1 400 /);
    expect(received).toContain('did not arrive in time');
    expect(cutAfter).toBeLessThan(3_000);
    expect((await enqueueOver(url, h.keys.producer, 'after-slow-loris')).status).toBe(202);
    // Slow headers are cut off too.
    const slowHeaders = await rawRequest(port, 'POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    expect(await slowHeaders.closed).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("answers 429 with Retry-After beyond a key's and a tenant's requests in flight, before the body, while another tenant passes", async () => {
    const { h, port, url } = await listening({ maxInFlightPerKey: 2, maxInFlightPerTenant: 3 });
    const held = await Promise.all([0, 1].map((i) => holdEnqueue(port, h.keys.producer, `cap-${i}`)));
    await waitFor('the two held requests to be admitted', () => h.app.admission.inFlightOf('', 't1').tenant === 2);
    const refused = await enqueueOver(url, h.keys.producer, 'cap-refused');
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'too_many_requests' } });
    // Another key of the tenant has its own cap, but the tenant's is shared: one more, then 429.
    const third = await holdEnqueue(port, h.keys.producer2, 'cap-2');
    await waitFor('the third held request to be admitted', () => h.app.admission.inFlightOf('', 't1').tenant === 3);
    const tenantRefused = await enqueueOver(url, h.keys.producer2, 'tenant-refused');
    expect(tenantRefused.status).toBe(429);
    expect(tenantRefused.headers['retry-after']).toBe('1');
    // The other tenant is not held back.
    expect((await enqueueOver(url, h.keys.otherProducer, 'other-tenant')).status).toBe(202);
    const before = await storedJobs(h.store);
    expect(await Promise.all([...held, third].map(finish))).toEqual([202, 202, 202]);
    expect(await storedJobs(h.store)).toBe(before + 3);
    expect((await enqueueOver(url, h.keys.producer, 'cap-after')).status).toBe(202);
  });

  it("answers 429 with Retry-After beyond a key's and a tenant's long polls, while another tenant's poll parks", async () => {
    const { h, url } = await listening({ maxPollsPerKey: 2, maxPollsPerTenant: 3 });
    pool ??= new Pool(url, { connections: 64, pipelining: 1 });
    const http = pool;
    const secondWorker = await createKey(h.store, 't1', 'worker-2', 'worker');
    const poll = (key: string, kinds: readonly string[]) =>
      http.request({
        method: 'POST',
        path: '/lease',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ workerId: 'w', kinds, waitMs: 20_000 }),
      });
    const parked = [poll(h.keys.worker, ['a']), poll(h.keys.worker, ['b'])];
    let refused: Awaited<ReturnType<typeof poll>> | undefined;
    await waitFor('the key poll cap to fill', async () => {
      const answer = await poll(h.keys.worker, ['c']);
      if (answer.statusCode === 429) refused = answer;
      else parked.push(Promise.resolve(answer));
      return answer.statusCode === 429;
    });
    expect(refused?.headers['retry-after']).toBe('1');
    expect(JSON.parse(await (refused as NonNullable<typeof refused>).body.text())).toMatchObject({ error: { code: 'too_many_requests' } });
    parked.push(poll(secondWorker, ['d']));
    await waitFor('the tenant poll cap to fill', async () => (await poll(secondWorker, ['e'])).statusCode === 429);
    // Another tenant's poll parks and is woken by its own enqueue.
    const other = poll(h.keys.otherWorker, ['x']);
    expect((await enqueueOver(url, h.keys.otherProducer, 'wake-other', { kind: 'x', payload: {} })).status).toBe(202);
    expect((await other).statusCode).toBe(200);
    await h.app.close();
    for (const answer of await Promise.all(parked)) {
      expect([200, 204]).toContain(answer.statusCode);
      await answer.body.dump();
    }
  });

  it('refuses counted requests 503 while they wait behind each other longer than the target, and admits again once the queue drains', async () => {
    // Enqueues reach the store one at a time, 20 ms each (a store that serves one statement at a time, like a
    // pool with one connection, whose queue the store reports): eight closed-loop lanes keep a standing queue,
    // each request waiting behind the others' for whole intervals. The lease protocol is never refused by this rule.
    h = await startCoordinator({});
    const inner = h.store;
    let chain: Promise<unknown> = Promise.resolve();
    // When each enqueue still waiting for its turn was called, oldest first: the store's own queue.
    const waiting: number[] = [];
    const slow = new Proxy(inner, {
      get(target, property, receiver) {
        if (property === 'queueWaitMs') return () => (waiting.length === 0 ? 0 : performance.now() - (waiting[0] as number));
        if (property === 'jobEnqueue') {
          return (params: Parameters<Store['jobEnqueue']>[0]) => {
            waiting.push(performance.now());
            const turn = chain.then(() => {
              waiting.shift();
              return new Promise((resolve) => setTimeout(resolve, 20));
            });
            chain = turn;
            return turn.then(() => target.jobEnqueue(params));
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const { buildCoordinator } = await import('../../src/coordinator/app.js');
    const app = await buildCoordinator({ store: slow, logger: false, config: { reaperIntervalMs: 0, admissionTargetMs: 10, admissionIntervalMs: 50 } });
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const key = h.keys.producer;
      const statuses: number[] = [];
      const retryAfter = new Set<unknown>();
      let leaseStatus = 0;
      const lanes = Array.from({ length: 8 }, async (_, lane) => {
        for (let i = 0; i < 15; i++) {
          const answer = await enqueueOver(url, key, `codel-${lane}-${i}`);
          statuses.push(answer.status);
          if (answer.status === 503) {
            retryAfter.add(answer.headers['retry-after']);
            expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'overloaded' } });
            if (leaseStatus === 0) {
              const leased = await app.inject({
                method: 'POST',
                url: '/lease',
                headers: { authorization: `Bearer ${h?.keys.worker ?? ''}` },
                payload: { workerId: 'w', kinds: ['none'] },
              });
              leaseStatus = leased.statusCode;
            }
          }
        }
      });
      await Promise.all(lanes);
      const refused = statuses.filter((s) => s === 503).length;
      console.log(`enqueues served one at a time, 20 ms each, 8 lanes (target 10 ms over 50 ms): ${statuses.length - refused} admitted, ${refused} refused`);
      expect(refused).toBeGreaterThan(0);
      expect(new Set(statuses)).toEqual(new Set([202, 503]));
      expect([...retryAfter]).toEqual(['1']);
      expect(leaseStatus).toBe(204);
      // Nothing is in flight: the queue is empty and the next request is admitted.
      await waitFor('the rule to admit again', async () => (await enqueueOver(url, key, `codel-after-${performance.now()}`)).status === 202);
      expect(await storedJobs(inner)).toBeGreaterThan(statuses.length - refused);
    } finally {
      await pool?.close();
      pool = undefined;
      await app.close();
    }
  });

  it('still bounds the counted requests in flight by maxInFlightRequests, and keeps reads and the lease protocol open', async () => {
    const { h, port, url } = await listening({ maxInFlightRequests: 3 });
    const held = await Promise.all([0, 1, 2].map((i) => holdEnqueue(port, h.keys.producer, `held-${i}`)));
    await waitFor('the held requests to fill the ceiling', () => h.app.admission.countedInFlight === 3);
    const refused = await enqueueOver(url, h.keys.producer2, 'refused');
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.body).not.toMatch(/stack|SELECT|INSERT|Bearer/i);
    expect((await h.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    const leased = await h.app.inject({ method: 'POST', url: '/lease', headers: { authorization: `Bearer ${h.keys.worker}` }, payload: { workerId: 'w' } });
    expect(leased.statusCode).toBe(204);
    expect(await Promise.all(held.map(finish))).toEqual([202, 202, 202]);
    expect((await enqueueOver(url, h.keys.producer, 'after')).status).toBe(202);
  });

  it('exempts only routes that exist, so a renamed lease-protocol route cannot turn counted unnoticed', async () => {
    h = await startCoordinator({});
    for (const route of UNCOUNTED_ROUTES) {
      const [method, url] = route.split(' ') as [string, string];
      expect(h.app.hasRoute({ method: method as 'POST', url }), route).toBe(true);
    }
  });

  it('refuses once the delay stayed at or above the target for a whole interval (CoDel), and admits once it stayed under it as long', () => {
    const rule = new QueueDelayRule(10, 100);
    rule.observe(50, 0);
    rule.observe(80, 99);
    expect(rule.overloaded).toBe(false);
    // A sample under the target ends the run: a burst the coordinator works off within the interval is not refused.
    rule.observe(5, 100);
    rule.observe(50, 150);
    rule.observe(10, 249);
    expect(rule.overloaded).toBe(false);
    rule.observe(12, 250);
    expect(rule.overloaded).toBe(true);
    // Refusals are cheap, so the delay falls at once; one low sample does not let the backlog back in.
    rule.observe(2, 260);
    rule.observe(400, 300);
    rule.observe(3, 310);
    rule.observe(3, 409);
    expect(rule.overloaded).toBe(true);
    rule.observe(3, 410);
    expect(rule.overloaded).toBe(false);
    // A new episode needs a whole interval of its own.
    rule.observe(40, 450);
    rule.observe(40, 549);
    expect(rule.overloaded).toBe(false);
    rule.observe(40, 550);
    expect(rule.overloaded).toBe(true);
  });

  it('samples the event loop lag plus the store queue, and forgets both once they are gone', async () => {
    let storeWait = 0;
    const samples: number[] = [];
    let sampled: (() => void) | undefined;
    const probe = new QueueDelayProbe(
      5,
      () => storeWait,
      (ms) => {
        samples.push(ms);
        sampled?.();
      },
    );
    const next = (): Promise<void> => new Promise((resolve) => (sampled = resolve));
    probe.start();
    try {
      await next();
      storeWait = 40;
      await next();
      expect(probe.last).toBeGreaterThanOrEqual(40);
      storeWait = 0;
      // Block the loop for 60 ms: the next sample is at least that late.
      const blocked = performance.now();
      while (performance.now() - blocked < 60);
      await next();
      expect(probe.last).toBeGreaterThanOrEqual(50);
      await next();
      await next();
      expect(Math.min(...samples.slice(-2))).toBeLessThan(40);
    } finally {
      probe.stop();
    }
  });

  it('is configured with generous defaults, positive integers, or null for unlimited', () => {
    const defaults = resolveConfig({});
    expect(defaults.maxInFlightRequests).toBeGreaterThanOrEqual(4_096);
    expect(defaults.maxInFlightPerTenant).toBeGreaterThanOrEqual(2_000);
    expect(defaults.maxPollsPerTenant).toBeGreaterThanOrEqual(2_000);
    expect(defaults.maxInFlightPerKey).toBeGreaterThanOrEqual(2_000);
    expect(defaults.maxPollsPerKey).toBeGreaterThanOrEqual(2_000);
    expect([defaults.admissionTargetMs, defaults.admissionIntervalMs]).toEqual([null, 100]);
    expect(resolveConfig({ admissionTargetMs: 10 }).admissionTargetMs).toBe(10);
    expect(resolveConfig({ maxInFlightRequests: null, admissionTargetMs: null }).admissionTargetMs).toBeNull();
    for (const bad of [0, -1, 1.5, '10']) {
      expect(() => resolveConfig({ maxInFlightRequests: bad })).toThrow(CoordinatorConfigError);
      expect(() => resolveConfig({ maxPollsPerKey: bad })).toThrow(CoordinatorConfigError);
    }
    expect(() => resolveConfig({ headersTimeoutMs: 5_000, requestTimeoutMs: 1_000 })).toThrow(CoordinatorConfigError);
    expect(() => resolveConfig({ idleTimeoutMs: 30_000 })).toThrow(CoordinatorConfigError);
  });
});
