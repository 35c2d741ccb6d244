/**
 * Admission control (src/coordinator/admission.ts) over real HTTP: requests
 * are held in flight by sending their headers and only part of the body over
 * a raw socket, so the coordinator has admitted them and waits. With the
 * limit reached, the next enqueue is refused at once with 503 `overloaded`
 * and Retry-After, nothing is stored, and reads and the worker's lease
 * protocol still pass; a slot comes back when a held request finishes or its
 * client goes away.
 */

import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UNCOUNTED_ROUTES } from '../../src/coordinator/admission.js';
import { CoordinatorConfigError, resolveConfig } from '../../src/coordinator/config.js';
import { bearer, enqueue, errorCode, get, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { waitFor } from '../support/wait-for.js';

const BODY = '{"kind":"held","payload":{"n":1}}';

interface HeldRequest {
  /** Sends the rest of the body; resolves with the status line's code. */
  finish(): Promise<number>;
  abort(): void;
}

/** A POST /jobs whose headers and first body byte are sent, the rest withheld. */
async function holdEnqueue(port: number, key: string, idempotencyKey: string): Promise<HeldRequest> {
  const socket: Socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  const answered = new Promise<number>((resolve, reject) => {
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(received);
      if (status !== null) resolve(Number(status[1]));
    });
    socket.once('error', reject);
  });
  answered.catch(() => undefined);
  socket.write(
    `POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nIdempotency-Key: ${idempotencyKey}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY.slice(0, 1)}`,
  );
  return {
    async finish() {
      socket.write(BODY.slice(1));
      const status = await answered;
      socket.destroy();
      return status;
    },
    abort() {
      socket.destroy();
    },
  };
}

/** Enqueue without an idempotency key: 400 when admitted (nothing stored), 503 when refused. */
function probe(h: Harness) {
  return h.app.inject({ method: 'POST', url: '/jobs', headers: bearer(h.keys.producer), payload: { kind: 'probe', payload: {} } });
}

async function untilFull(h: Harness): Promise<void> {
  await waitFor('the held requests to fill the limit', async () => (await probe(h)).statusCode === 503);
}

async function storedJobs(h: Harness): Promise<number> {
  const stats = await h.store.stats({ tenant: 't1' });
  return Object.values(stats.counts).reduce((sum, n) => sum + n, 0);
}

describe('admission control', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  async function listening(maxInFlightRequests: number): Promise<{ h: Harness; port: number }> {
    h = await startCoordinator({ maxInFlightRequests });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    return { h, port: (h.app.server.address() as AddressInfo).port };
  }

  it('refuses enqueues beyond the limit at once, stores nothing for them, and keeps reads and the lease protocol open', async () => {
    const { h, port } = await listening(3);
    const existing = await enqueue(h.app, h.keys.producer, { kind: 'seen', payload: {} });
    expect(existing.statusCode).toBe(202);
    const existingId = (existing.json() as { id: string }).id;

    const held = await Promise.all([0, 1, 2].map((i) => holdEnqueue(port, h.keys.producer, `held-${i}`)));
    await untilFull(h);
    const before = await storedJobs(h);

    const refused = await enqueue(h.app, h.keys.producer, { kind: 'refused', payload: {} }, 'refused-1');
    expect(refused.statusCode).toBe(503);
    expect(errorCode(refused)).toBe('overloaded');
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.body).not.toMatch(/stack|SELECT|INSERT|Bearer/i);
    const batch = await post(h.app, h.keys.producer, '/jobs/batch', { jobs: [{ idempotencyKey: 'b1', kind: 'refused', payload: {} }] });
    expect(batch.statusCode).toBe(503);
    // A bad key is refused too, before authentication: a refusal costs nothing but routing.
    const unauthenticated = await h.app.inject({ method: 'POST', url: '/jobs', headers: bearer('not-a-key'), payload: {} });
    expect(unauthenticated.statusCode).toBe(503);
    expect(await storedJobs(h)).toBe(before);

    expect((await h.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect((await get(h.app, h.keys.producer, `/jobs/${existingId}`)).statusCode).toBe(200);
    const leased = await lease(h.app, h.keys.worker, { kinds: ['seen'] });
    expect(leased.map((j) => j.id)).toEqual([existingId]);
    const [job] = leased;
    const renewed = await post(h.app, h.keys.worker, `/jobs/${existingId}/renew`, { token: job?.token });
    expect(renewed.statusCode).toBe(200);
    const completed = await post(h.app, h.keys.worker, `/jobs/${existingId}/complete`, { token: job?.token, result: { ok: true } });
    expect(completed.statusCode).toBe(200);

    // Finished held requests free their slots and are stored like any other.
    expect(await Promise.all(held.map((r) => r.finish()))).toEqual([202, 202, 202]);
    const admitted = await enqueue(h.app, h.keys.producer, { kind: 'after', payload: {} }, 'after-1');
    expect(admitted.statusCode).toBe(202);
    expect(await storedJobs(h)).toBe(before + 4);
  });

  it('frees the slot of a client that went away mid-request', async () => {
    const { h, port } = await listening(2);
    const held = await Promise.all([0, 1].map((i) => holdEnqueue(port, h.keys.producer, `gone-${i}`)));
    await untilFull(h);
    for (const r of held) r.abort();
    await waitFor('the aborted requests to free their slots', async () => (await probe(h)).statusCode === 400);
    const results = await Promise.all([0, 1].map((i) => enqueue(h.app, h.keys.producer, { kind: 'k', payload: {} }, `again-${i}`)));
    expect(results.map((r) => r.statusCode)).toEqual([202, 202]);
    expect(await storedJobs(h)).toBe(2);
  });

  it('does not count a parked long poll: an enqueue is admitted and wakes it', async () => {
    const { h } = await listening(1);
    const parked = lease(h.app, h.keys.worker, { kinds: ['wake'], waitMs: 20_000 });
    const admitted = await enqueue(h.app, h.keys.producer, { kind: 'wake', payload: {} }, 'wake-1');
    expect(admitted.statusCode).toBe(202);
    expect((await parked).map((j) => j.id)).toEqual([(admitted.json() as { id: string }).id]);
  });

  it('exempts only routes that exist, so a renamed lease-protocol route cannot turn counted unnoticed', async () => {
    h = await startCoordinator({});
    for (const route of UNCOUNTED_ROUTES) {
      const [method, url] = route.split(' ') as [string, string];
      expect(h.app.hasRoute({ method: method as 'POST', url }), route).toBe(true);
    }
  });

  it('is configured by maxInFlightRequests: a positive integer or null for unlimited', () => {
    expect(resolveConfig({}).maxInFlightRequests).toBe(64);
    expect(resolveConfig({ maxInFlightRequests: null }).maxInFlightRequests).toBeNull();
    expect(resolveConfig({ maxInFlightRequests: 5 }).maxInFlightRequests).toBe(5);
    for (const bad of [0, -1, 1.5, '10']) {
      expect(() => resolveConfig({ maxInFlightRequests: bad })).toThrow(CoordinatorConfigError);
    }
  });
});
