/**
 * A tenant's payload schema at the size cap takes seconds to compile; it is
 * compiled off the event loop and in bounded time. While one tenant registers
 * a 64 KiB schema, and while a coordinator that has not seen it compiles it
 * on a cache miss, /healthz and another tenant's enqueues keep answering
 * within PROBE_BOUND_MS (real HTTP, on every backend). A compile beyond the time bound
 * is refused at registration and makes the kind's enqueues answer a clear
 * error at load.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/core/canonical-json.js';
import { describePayloadError, KindRegistry } from '../../src/engine/kind-registry.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { backends, drainAfterAll, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { kindParams } from '../support/kind-records.js';

/**
 * Compiled on the event loop, the schema held every probe for the whole compile (slowest probe 1,473–1,573 ms,
 * 2026-12-01, this 2-core machine). Off it, the slowest probe measured 17–50 ms with the file alone and up to
 * 96 ms beside other test files: what remains on the main thread is canonical JSON and the size checks (2–14 ms
 * each at 64 KiB), loading the generated code from V8's cache (11–13 ms) and garbage collection.
 */
const PROBE_BOUND_MS = 250;

const MAX_SCHEMA_BYTES = 64 * 1024;

/** 1,530 string properties with a maxLength each: just under 64 KiB, 1.4–2.4 s for Ajv to compile on this machine. */
/** 1,530 properties make a schema just under the 64 KiB cap. */
function heavySchema(count = 1_530): { schema: Record<string, unknown>; bytes: number } {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < count; i++) properties[`p${i}`] = { type: 'string', maxLength: 1_000 + i };
  const schema = { type: 'object', properties };
  return { schema, bytes: Buffer.byteLength(canonicalJson(schema), 'utf8') };
}

let probeCount = 0;

interface Answer {
  readonly status: number;
  readonly body: string;
  readonly ms: number;
}

async function call(pool: Pool, method: 'GET' | 'POST' | 'PUT', path: string, key: string | null, body?: unknown): Promise<Answer> {
  const started = performance.now();
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (key !== null) headers['authorization'] = `Bearer ${key}`;
  if (method === 'POST') headers['idempotency-key'] = `probe-${(probeCount += 1)}`;
  const response = await pool.request({ method, path, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await response.body.text();
  return { status: response.statusCode, body: text, ms: performance.now() - started };
}

/** Probes /healthz and another tenant's enqueue, one after the other, until `work` settles; returns the probes' answers. */
async function probeWhile(pool: Pool, otherProducer: string, work: Promise<unknown>): Promise<Answer[]> {
  let settled = false;
  void work.finally(() => {
    settled = true;
  });
  const answers: Answer[] = [];
  while (!settled) {
    answers.push(await call(pool, 'GET', '/healthz', null));
    answers.push(await call(pool, 'POST', '/jobs', otherProducer, { kind: 'other', payload: { n: answers.length } }));
  }
  return answers;
}

async function listen(app: FastifyInstance): Promise<Pool> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return new Pool(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, { connections: 4 });
}

describe.each(backends)('compiling a 64 KiB kind schema ($name)', (backend) => {
  let h: Harness | undefined;
  const pools: Pool[] = [];
  drainAfterAll(backend);
  afterEach(async () => {
    for (const pool of pools.splice(0)) await pool.close();
    await h?.close();
    h = undefined;
  });

  it(`keeps /healthz and another tenant under ${PROBE_BOUND_MS} ms while one tenant registers it and a peer compiles it on a cache miss`, async () => {
    h = await startCoordinator({}, { backend });
    const pool = await listen(h.app);
    pools.push(pool);
    const { schema, bytes } = heavySchema();
    expect(bytes).toBeGreaterThan(60 * 1024);
    expect(bytes).toBeLessThanOrEqual(MAX_SCHEMA_BYTES);
    // Warm the routes, the other tenant's registry entry and the compiler's worker, so the probes measure waiting
    // behind the 64 KiB compile, not first use.
    expect((await call(pool, 'POST', '/jobs', h.keys.otherProducer, { kind: 'other', payload: {} })).status).toBe(202);
    expect((await call(pool, 'PUT', '/kinds/warm', h.keys.admin, { payloadSchema: { type: 'object', required: ['a'] } })).status).toBe(200);

    const registration = call(pool, 'PUT', '/kinds/big', h.keys.admin, { payloadSchema: schema });
    const during = await probeWhile(pool, h.keys.otherProducer, registration);
    const registered = await registration;
    expect(registered.status).toBe(200);
    const slowest = Math.max(...during.map((answer) => answer.ms));
    console.log(`register ${bytes} B schema: ${registered.ms.toFixed(0)} ms; ${during.length} probes, slowest ${slowest.toFixed(1)} ms (${backend.name})`);
    expect(during.every((answer) => answer.status === 200 || answer.status === 202)).toBe(true);
    expect(during.length).toBeGreaterThanOrEqual(4);
    expect(slowest).toBeLessThan(PROBE_BOUND_MS);
    expect((await call(pool, 'POST', '/jobs', h.keys.producer, { kind: 'big', payload: { p7: 'x'.repeat(1_008) } })).status).toBe(400);

    // Another coordinator has not compiled it: its first enqueue of the kind compiles it on the registry's load path.
    const peer = await h.openPeer();
    const peerPool = await listen(peer);
    pools.push(peerPool);
    expect((await call(peerPool, 'POST', '/jobs', h.keys.otherProducer, { kind: 'other', payload: {} })).status).toBe(202);
    // Warms the peer's worker on the other tenant's own kind (its probes enqueue objects, so they still pass).
    expect((await call(peerPool, 'PUT', '/kinds/other', h.keys.otherAdmin, { payloadSchema: { type: 'object' } })).status).toBe(200);
    const miss = call(peerPool, 'POST', '/jobs', h.keys.producer, { kind: 'big', payload: { p7: 'x'.repeat(1_007) } });
    const duringMiss = await probeWhile(peerPool, h.keys.otherProducer, miss);
    const missed = await miss;
    expect(missed.status).toBe(202);
    const slowestMiss = Math.max(...duringMiss.map((answer) => answer.ms));
    console.log(`compile on a cache miss: ${missed.ms.toFixed(0)} ms; ${duringMiss.length} probes, slowest ${slowestMiss.toFixed(1)} ms (${backend.name})`);
    expect(duringMiss.every((answer) => answer.status === 200 || answer.status === 202)).toBe(true);
    expect(duringMiss.length).toBeGreaterThanOrEqual(4);
    expect(slowestMiss).toBeLessThan(PROBE_BOUND_MS);
  });
});

describe('a schema that cannot compile within the time bound', () => {
  let dir: string | undefined;
  let store: SqliteStore | undefined;
  let registry: KindRegistry | undefined;
  afterEach(async () => {
    await registry?.close();
    await store?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    registry = undefined;
    store = undefined;
    dir = undefined;
  });

  it('is refused with invalid_request at registration, and refuses every payload with a clear message at load', async () => {
    dir = mkdtempSync(join(tmpdir(), 'leasehold-compile-'));
    store = SqliteStore.open({ path: join(dir, 'jobs.db') });
    // Four times the cap's schema (seconds to compile) against a 1 s bound: the bound, not the schema, ends it,
    // and a fresh worker still has the time to compile a small schema on a loaded machine.
    registry = new KindRegistry(store, 0, { maxSchemaBytes: 4 * MAX_SCHEMA_BYTES, compileTimeoutMs: 1_000 });
    const { schema } = heavySchema(4 * 1_530);
    const started = performance.now();
    await expect(registry.compile(schema)).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'body/payloadSchema is too complex to compile within 1000 ms',
    });
    expect(performance.now() - started).toBeLessThan(3_000);
    // The terminated worker is replaced: the next schema compiles.
    const small = await registry.compile({ type: 'object', required: ['a'] });
    expect(small({ a: 1 })).toBe(true);

    await store.kindUpsert(kindParams('t1', 'big', schema));
    const validate = (await registry.forTenant('t1')).byName.get('big')?.validate;
    expect(validate?.({})).toBe(false);
    expect(describePayloadError(validate?.errors)).toContain('too complex to compile within 1000 ms');
  });
});
