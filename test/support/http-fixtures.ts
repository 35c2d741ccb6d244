/**
 * Fixtures for coordinator tests driven by app.inject(): a fresh SQLite file
 * in a temporary directory, API keys for each role in two tenants, and small
 * helpers for requests and bounded waiting.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildCoordinator } from '../../src/coordinator/app.js';
import type { CoordinatorConfigInput } from '../../src/coordinator/config.js';
import type { Clock } from '../../src/core/clock.js';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import type { Role } from '../../src/core/states.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

export interface Keys {
  readonly producer: string;
  /** Another user of the same tenant. */
  readonly producer2: string;
  readonly worker: string;
  readonly admin: string;
  /** Keys of another tenant. */
  readonly otherProducer: string;
  readonly otherWorker: string;
  readonly otherAdmin: string;
}

export interface Harness {
  readonly app: FastifyInstance;
  readonly store: SqliteStore;
  readonly dir: string;
  readonly keys: Keys;
  close(): Promise<void>;
}

let keyCounter = 0;

export async function createKey(store: SqliteStore, tenant: string, user: string, role: Role): Promise<string> {
  const key = newApiKey();
  keyCounter += 1;
  await store.apiKeyInsert({ id: `key-${process.pid}-${keyCounter}-${Date.now()}`, tenant, user, role, keyHash: hashApiKey(key) });
  return key;
}

export async function startCoordinator(
  config: CoordinatorConfigInput = {},
  options: { readonly clock?: Clock } = {},
): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-coord-'));
  const store = SqliteStore.open({ path: join(dir, 'jobs.db'), ...(options.clock === undefined ? {} : { clock: options.clock }) });
  // Created together so they share one commit.
  const [producer, producer2, worker, admin, otherProducer, otherWorker, otherAdmin] = await Promise.all([
    createKey(store, 't1', 'alice', 'producer'),
    createKey(store, 't1', 'bob', 'producer'),
    createKey(store, 't1', 'worker-1', 'worker'),
    createKey(store, 't1', 'root', 'admin'),
    createKey(store, 't2', 'alice', 'producer'),
    createKey(store, 't2', 'worker-1', 'worker'),
    createKey(store, 't2', 'root', 'admin'),
  ]);
  const keys = { producer, producer2, worker, admin, otherProducer, otherWorker, otherAdmin } as Keys;
  const app = await buildCoordinator({ store, logger: false, config: { reaperIntervalMs: 0, ...config } });
  return {
    app,
    store,
    dir,
    keys,
    async close() {
      await app.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function bearer(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

let idempotencyCounter = 0;

/** POST /jobs with a fresh (or given) idempotency key. */
export function enqueue(
  app: FastifyInstance,
  key: string,
  body: Record<string, unknown>,
  idempotencyKey = `idem-${++idempotencyCounter}`,
): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'POST', url: '/jobs', headers: { ...bearer(key), 'idempotency-key': idempotencyKey }, payload: body });
}

export interface LeasedWire {
  id: string;
  kind: string;
  payload: unknown;
  attempt: number;
  epoch: number;
  token: string;
  leaseExpiresAt: string;
}

/** POST /lease and return the jobs (empty on 204). */
export async function lease(app: FastifyInstance, key: string, body: Record<string, unknown> = {}): Promise<LeasedWire[]> {
  const response = await app.inject({ method: 'POST', url: '/lease', headers: bearer(key), payload: { workerId: 'w1', ...body } });
  if (response.statusCode === 204) return [];
  if (response.statusCode !== 200) throw new Error(`lease answered ${response.statusCode}: ${response.body}`);
  return (response.json() as { jobs: LeasedWire[] }).jobs;
}

export function post(app: FastifyInstance, key: string, url: string, payload?: unknown): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'POST', url, headers: bearer(key), ...(payload === undefined ? {} : { payload: payload as object }) });
}

export function get(app: FastifyInstance, key: string, url: string): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'GET', url, headers: bearer(key) });
}

export function errorCode(response: LightMyRequestResponse): string | undefined {
  try {
    return (response.json() as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

/** Polls `condition` until it holds or `timeoutMs` passes (then throws). */
export async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000, intervalMs = 10): Promise<void> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (performance.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
