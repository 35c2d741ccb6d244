/**
 * The app factory's edges: configuration validated once with every problem
 * listed; store failures mapped to 503 store_unavailable and bugs to a
 * generic 500; logs that never contain keys or tokens. The store-facing
 * parts run on every backend.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { CoordinatorConfigError, resolveConfig } from '../../src/engine/config.js';
import { StoreUnavailableError } from '../../src/core/errors.js';
import type { Store } from '../../src/store/store.js';
import { backends, bearer, drainAfterAll, enqueue, errorCode, get, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';

/** The same store with some methods replaced. */
function patched(store: Store, overrides: Partial<Record<keyof Store, (...args: never[]) => unknown>>): Store {
  return new Proxy(store, {
    get(target, property, receiver) {
      const override = overrides[property as keyof Store];
      if (override !== undefined) return override;
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('configuration', () => {
  it('has the documented defaults and is frozen', () => {
    const config = resolveConfig({});
    expect(config).toMatchObject({
      defaultLeaseMs: 30_000,
      defaultMaxAttempts: 5,
      reaperIntervalMs: 1_000,
      pollIntervalSeconds: 1,
      defaultBackoff: { baseMs: 1_000, maxMs: 300_000 },
      requireRegisteredKinds: false,
      backpressure: { maxPendingJobs: null, maxOldestAvailableAgeMs: null, maxStorageBytes: null },
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.backpressure)).toBe(true);
  });

  it('lists every problem in one error', () => {
    let caught: unknown;
    try {
      resolveConfig({ defaultLeaseMs: -1, defaultMaxAttempts: 'many', colour: 'red', backpressure: { maxPendingJobs: 0 } });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CoordinatorConfigError);
    const problems = (caught as CoordinatorConfigError).problems;
    expect(problems).toHaveLength(4);
    expect(problems.join('\n')).toMatch(/defaultLeaseMs[\s\S]*defaultMaxAttempts|colour/);
  });
});

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness | undefined;
  drainAfterAll(backend);
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  describe('store failures', () => {
    it('answers 503 store_unavailable with Retry-After when the store is down', async () => {
      h = await startCoordinator({}, { backend });
      const down = patched(h.store, {
        jobGet: async () => {
          throw new StoreUnavailableError();
        },
        ping: async () => {
          throw new Error('SQLITE_IOERR: disk I/O error');
        },
      });
      const app = await buildCoordinator({ store: down, logger: false, config: { reaperIntervalMs: 0 } });
      try {
        const response = await get(app, h.keys.producer, '/jobs/01900000-0000-7000-8000-000000000000');
        expect(response.statusCode).toBe(503);
        expect(errorCode(response)).toBe('store_unavailable');
        expect(response.headers['retry-after']).toBe('1');
        const health = await app.inject({ method: 'GET', url: '/healthz' });
        expect(health.statusCode).toBe(503);
        expect(errorCode(health)).toBe('store_unavailable');
        expect(health.body).not.toContain('SQLITE');
      } finally {
        await app.close();
      }
    });

    it('answers a generic 500 for a bug, logging it without keys', async () => {
      h = await startCoordinator({}, { backend });
      const lines: string[] = [];
      const logger = pino({ level: 'debug' }, new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
      const broken = patched(h.store, {
        jobGet: async () => {
          throw new TypeError('secret internals: SELECT * FROM jobs');
        },
      });
      const app = await buildCoordinator({ store: broken, logger, config: { reaperIntervalMs: 0 } });
      try {
        const response = await get(app, h.keys.producer, '/jobs/01900000-0000-7000-8000-000000000000');
        expect(response.statusCode).toBe(500);
        expect(response.json()).toEqual({ error: { code: 'internal_error', message: 'internal error' } });
        expect(response.body).not.toContain('SELECT');
        expect(lines.join('')).toContain('secret internals');
      } finally {
        await app.close();
      }
    });
  });

  describe('logging', () => {
    it('never writes an API key or a lease token to the log', async () => {
      h = await startCoordinator({}, { backend });
      const lines: string[] = [];
      const logger = pino({ level: 'trace' }, new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
      const app = await buildCoordinator({ store: h.store, logger, config: { reaperIntervalMs: 0 } });
      try {
        await enqueue(app, h.keys.producer, { kind: 'email', payload: { n: 1 } });
        const [leased] = await lease(app, h.keys.worker);
        await post(app, h.keys.worker, `/jobs/${leased?.id}/complete`, { token: leased?.token });
        await post(app, h.keys.worker, `/jobs/${leased?.id}/complete`, { token: 'forged-token-value' });
        await app.inject({ method: 'GET', url: '/jobs', headers: bearer('lh_not-a-real-key-0123456789') });
        await app.inject({ method: 'POST', url: '/lease', headers: bearer(h.keys.worker), payload: '{bad json' });
        const text = lines.join('');
        for (const secret of [h.keys.producer, h.keys.worker, leased?.token ?? 'x', 'forged-token-value', 'lh_not-a-real-key-0123456789']) {
          expect(text).not.toContain(secret);
        }
      } finally {
        await app.close();
      }
    });
  });
});
