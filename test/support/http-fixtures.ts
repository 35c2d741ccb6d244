/**
 * Fixtures for coordinator tests driven by app.inject(): a coordinator over a
 * fresh store of any backend in test/support/backends.ts (SQLite when none is
 * named), API keys for each role in two tenants, the store's clock as the
 * tests see it, and small helpers for requests and bounded waiting.
 *
 * PostgreSQL stores come from reused-pg-schemas.ts (a migrated schema
 * emptied between tests) rather than the factory's create-and-drop, which
 * costs more than most of these tests; the factory still picks the backend.
 *
 * Tests that move time ask for `manualClock`: on SQLite the store then reads
 * a ManualClock and `time.advance` is instant; PostgreSQL's clock is the
 * server's now() and cannot be moved, so there `time.advance` waits in real
 * time until the store's clock has passed the mark. Written against
 * `h.time`, one test body runs on both.
 */

import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import type { CoordinatorConfigInput } from '../../src/engine/config.js';
import { ManualClock } from '../../src/core/clock.js';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import type { Role } from '../../src/core/states.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store, StoreBackend } from '../../src/store/store.js';
import { backends, sqliteFactory, type BackendFactory, type BackendInstance } from './backends.js';
import { reusedPgSchemas } from './reused-pg-schemas.js';

export { backends, type BackendFactory };

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

/** The store's clock as a test sees it. */
export interface StoreTime {
  now(): Promise<number>;
  /** Returns once the store's clock reads at least `ms` later than when called (at once on a ManualClock). */
  advance(ms: number): Promise<void>;
}

export interface Harness {
  readonly app: FastifyInstance;
  readonly store: Store;
  readonly backend: StoreBackend;
  readonly keys: Keys;
  readonly time: StoreTime;
  /** A second coordinator over the same database, standing in for another host (closed by close()). */
  openPeer(config?: CoordinatorConfigInput): Promise<FastifyInstance>;
  /** A second store over the same database, for a coordinator the test builds itself (closed by close()). */
  openPeerStore(): Promise<Store>;
  close(): Promise<void>;
}

export interface StartOptions {
  /** The backend to run on; a fresh SQLite file when absent. */
  readonly backend?: BackendFactory;
  /** SQLite: the store reads a ManualClock. PostgreSQL: ignored, time.advance waits in real time. */
  readonly manualClock?: boolean;
}

const SQLITE = backends.find((b) => b.name === 'sqlite');
const DATABASE_URL = process.env['DATABASE_URL'] ?? '';
const pgSchemas = DATABASE_URL === '' ? null : reusedPgSchemas(DATABASE_URL);

async function createInstance(factory: BackendFactory, clock: ManualClock | undefined): Promise<BackendInstance> {
  if (clock !== undefined) return sqliteWithClock(clock);
  if (factory.name === 'postgres' && pgSchemas !== null) return pgSchemas.create();
  return factory.create();
}

let keyCounter = 0;

export async function createKey(store: Store, tenant: string, user: string, role: Role): Promise<string> {
  const key = newApiKey();
  keyCounter += 1;
  await store.apiKeyInsert({ id: `key-${process.pid}-${keyCounter}-${Date.now()}`, tenant, user, role, keyHash: hashApiKey(key) });
  return key;
}

/** A SQLite store over a ManualClock (the shared factory's stores read the system clock). */
function sqliteWithClock(clock: ManualClock): Promise<BackendInstance> {
  return sqliteFactory('sqlite', async (path, random) => SqliteStore.open({ path, clock, random })).create();
}

function realTime(store: Store): StoreTime {
  return {
    now: () => store.now(),
    async advance(ms) {
      const mark = (await store.now()) + ms;
      const deadline = performance.now() + ms + 10_000;
      while ((await store.now()) < mark) {
        if (performance.now() > deadline) throw new Error(`the store clock did not move ${ms} ms on`);
        await new Promise((resolve) => setTimeout(resolve, Math.min(50, Math.max(5, ms / 10))));
      }
    },
  };
}

export async function startCoordinator(config: CoordinatorConfigInput = {}, options: StartOptions = {}): Promise<Harness> {
  const factory = options.backend ?? SQLITE;
  if (factory === undefined) throw new Error('no SQLite backend');
  const clock = options.manualClock === true && factory.name === 'sqlite' ? new ManualClock(Date.UTC(2026, 0, 1)) : undefined;
  const instance = await createInstance(factory, clock);
  const store = instance.store;
  const apps: FastifyInstance[] = [];
  let keys: Keys;
  try {
    // Created together so they share one commit (SQLite) or run side by side (PostgreSQL).
    const [producer, producer2, worker, admin, otherProducer, otherWorker, otherAdmin] = await Promise.all([
      createKey(store, 't1', 'alice', 'producer'),
      createKey(store, 't1', 'bob', 'producer'),
      createKey(store, 't1', 'worker-1', 'worker'),
      createKey(store, 't1', 'root', 'admin'),
      createKey(store, 't2', 'alice', 'producer'),
      createKey(store, 't2', 'worker-1', 'worker'),
      createKey(store, 't2', 'root', 'admin'),
    ]);
    keys = { producer, producer2, worker, admin, otherProducer, otherWorker, otherAdmin } as Keys;
    apps.push(await buildCoordinator({ store, logger: false, config: { reaperIntervalMs: 0, ...config } }));
  } catch (error) {
    await instance.cleanup();
    throw error;
  }
  const app = apps[0] as FastifyInstance;
  const time: StoreTime =
    clock === undefined
      ? realTime(store)
      : {
          now: async () => clock.now(),
          advance: async (ms) => clock.advance(ms),
        };
  let closed = false;
  return {
    app,
    store,
    backend: factory.name,
    keys,
    time,
    async openPeer(peerConfig: CoordinatorConfigInput = {}) {
      const peerStore = await instance.openPeer();
      const peer = await buildCoordinator({ store: peerStore, logger: false, config: { reaperIntervalMs: 0, ...config, ...peerConfig } });
      apps.push(peer);
      return peer;
    },
    openPeerStore: () => instance.openPeer(),
    async close() {
      if (closed) return;
      closed = true;
      for (const each of apps) await each.close();
      await instance.cleanup();
    },
  };
}

/**
 * Registers, in the calling describe block, an afterAll that drops what the
 * backend's tests left behind (PostgreSQL schemas), so the file's process does
 * not end with a schema still in the database.
 */
export function drainAfterAll(factory: BackendFactory): void {
  afterAll(async () => {
    await factory.drain();
    if (factory.name === 'postgres') await pgSchemas?.drain();
  });
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
  group: string | null;
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

/** PUT /kinds/{kind} with `body` as the kind's definition. */
export function putKind(app: FastifyInstance, key: string, kind: string, body: Record<string, unknown>): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'PUT', url: `/kinds/${kind}`, headers: bearer(key), payload: body });
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
