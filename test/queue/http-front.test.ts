/**
 * leaseholdRoutes: the HTTP API served from an application's own Fastify
 * instance over a library Queue, under a prefix, beside the application's
 * own routes; a job enqueued over HTTP is seen by the Queue and the other way
 * round, and a worker polling over HTTP is woken by the Queue's enqueue.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { afterEach, expect, it } from 'vitest';
import { LeaseholdClient, leaseholdRoutes, openQueue } from '../../src/index.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

it('serves the API under a prefix of the application’s instance, over the same Queue', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'lh-front-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const queue = await openQueue({ db: join(dir, 'app.db') });
  const app = Fastify();
  app.get('/hello', async () => ({ hello: 'world' }));
  await app.register(leaseholdRoutes, { queue, prefix: '/queue' });
  await app.listen({ port: 0, host: '127.0.0.1' });
  cleanups.push(async () => {
    await queue.close();
    await app.close();
  });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const producer = new LeaseholdClient({ baseUrl: `${base}/queue`, apiKey: (await queue.createApiKey('producer')).key });
  const worker = new LeaseholdClient({ baseUrl: `${base}/queue`, apiKey: (await queue.createApiKey('worker')).key });
  cleanups.push(() => producer.close());
  cleanups.push(() => worker.close());

  // The application's own routes and 404s are untouched.
  expect(await (await app.inject({ method: 'GET', url: '/hello' })).json()).toEqual({ hello: 'world' });
  expect((await app.inject({ method: 'GET', url: '/nothing-here' })).statusCode).toBe(404);
  // Without a key the API answers as the coordinator does.
  const anonymous = await app.inject({ method: 'GET', url: '/queue/stats' });
  expect(anonymous.statusCode).toBe(401);
  expect(anonymous.json()).toMatchObject({ error: { code: 'unauthorized' } });

  const overHttp = await producer.enqueue({ kind: 'k', payload: { n: 1 } }, { idempotencyKey: 'h1' });
  expect((await queue.get(overHttp.job.id)).status).toBe('queued');
  const leased = await worker.lease({ workerId: 'w', kinds: ['k'], max: 1, leaseMs: 30_000 });
  expect(leased.map((job) => job.id)).toEqual([overHttp.job.id]);

  // A poll parked over HTTP is woken by an enqueue through the Queue.
  const parked = worker.lease({ workerId: 'w', kinds: ['k'], max: 1, leaseMs: 30_000, waitMs: 10_000 });
  const inProcess = await queue.enqueue({ kind: 'k', payload: { n: 2 }, idempotencyKey: 'q1' });
  expect((await parked).map((job) => job.id)).toEqual([inProcess.id]);
});
