/**
 * /openapi.json is generated from the route schemas: every route the app
 * serves appears with its method, and every route documents its responses.
 * SQLite only: the document is built from the route schemas and never asks
 * the store, so a second backend would test nothing new.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import { registerRoutes } from '../../src/coordinator/app.js';
import { registerUiRoutes } from '../../src/coordinator/routes/ui.js';
import { Backpressure } from '../../src/engine/backpressure.js';
import { resolveConfig } from '../../src/engine/config.js';
import { KindRegistry } from '../../src/engine/kind-registry.js';
import { FinishWaiters } from '../../src/engine/finish-waiters.js';
import { JobEvents } from '../../src/engine/job-events.js';
import { LeaseWaiters } from '../../src/engine/lease-waiters.js';
import { CoordinatorMetrics } from '../../src/engine/metrics.js';
import type { CoordinatorApp } from '../../src/coordinator/route-context.js';
import { Scheduler } from '../../src/engine/scheduler.js';
import { pino } from 'pino';
import { startCoordinator, type Harness } from '../support/http-fixtures.js';

let h: Harness;
let routes: { method: string; url: string }[];

beforeAll(async () => {
  h = await startCoordinator();
  // Enumerate the routes by registering them on a bare app that records each one.
  routes = [];
  const bare = Fastify({ exposeHeadRoutes: false });
  bare.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url.replace(/:(\w+)/g, '{$1}') });
  });
  const config = resolveConfig({});
  const metrics = new CoordinatorMetrics();
  const kinds = new KindRegistry(h.store, 0);
  const backpressure = new Backpressure(h.store, config.backpressure);
  const events = new JobEvents(metrics);
  const ctx = {
    store: h.store,
    config,
    kinds,
    waiters: new LeaseWaiters(),
    finishWaiters: new FinishWaiters(h.store, 1),
    backpressure,
    metrics,
    events,
    scheduler: new Scheduler({ store: h.store, config, kinds, events, backpressure, log: pino({ level: 'silent' }) }),
  };
  registerRoutes(bare as unknown as CoordinatorApp, ctx);
  registerUiRoutes(bare as unknown as CoordinatorApp);
  await bare.ready();
  await bare.close();
  metrics.close();
  expect(routes.length).toBeGreaterThanOrEqual(EXPECTED.length);
});
afterAll(async () => {
  await h.close();
});

interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, unknown>; security?: unknown[] }>>;
  components: { securitySchemes: Record<string, unknown>; schemas?: Record<string, unknown> };
}

const EXPECTED: [string, string][] = [
  ['post', '/jobs'],
  ['get', '/jobs'],
  ['get', '/jobs/{id}'],
  ['post', '/lease'],
  ['post', '/jobs/{id}/renew'],
  ['post', '/jobs/{id}/complete'],
  ['post', '/complete'],
  ['post', '/jobs/{id}/fail'],
  ['post', '/jobs/{id}/requeue'],
  ['get', '/stats'],
  ['get', '/healthz'],
  ['get', '/openapi.json'],
  ['post', '/jobs/batch'],
  ['get', '/jobs/{id}/result'],
  ['get', '/jobs/{id}/attempts'],
  ['post', '/jobs/{id}/cancel'],
  ['post', '/jobs/{id}/reconcile'],
  ['post', '/jobs/{id}/effect'],
  ['post', '/jobs/{id}/checkpoint'],
  ['put', '/kinds/{kind}'],
  ['get', '/kinds'],
  ['put', '/schedules/{name}'],
  ['get', '/schedules'],
  ['delete', '/schedules/{name}'],
  ['get', '/metrics'],
  ['post', '/jobs/bulk'],
  ['get', '/jobs/{id}/detail'],
  ['get', '/ui'],
  ['get', '/ui/assets/{file}'],
];

describe('GET /openapi.json', () => {
  it('is an OpenAPI 3 document listing every route with its responses', async () => {
    const response = await h.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(response.statusCode).toBe(200);
    const doc = response.json() as OpenApiDocument;
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.components.securitySchemes).toHaveProperty('bearer');
    for (const [method, path] of EXPECTED) {
      const operation = doc.paths[path]?.[method];
      expect(operation, `${method.toUpperCase()} ${path}`).toBeDefined();
      expect(Object.keys(operation?.responses ?? {}).some((status) => status.startsWith('2'))).toBe(true);
    }
    expect(doc.paths['/healthz']?.['get']?.security).toEqual([]);
  });

  it('has an operation for every route the app serves', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json() as OpenApiDocument;
    const documented = new Set(Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`)));
    const served = new Set(routes.map((route) => `${route.method} ${route.url}`));
    for (const [method, path] of EXPECTED) expect(served.has(`${method.toUpperCase()} ${path}`)).toBe(true);
    for (const entry of served) expect(documented.has(entry), entry).toBe(true);
    expect(documented.size).toBe(served.size);
  });

  it('spells every body out in place: the protocol schemas carry no $id, so none is lifted into components', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json() as OpenApiDocument;
    expect(doc.components.schemas ?? {}).toEqual({});
  });
});
