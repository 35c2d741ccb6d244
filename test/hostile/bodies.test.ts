/**
 * Hostile bodies on every endpoint (issue 5, item 4). For each route,
 * fast-check takes a valid body, applies a hostile mutation (a field replaced
 * by a wrong type, a huge or NUL-laden or SQL-injection string, a number
 * beyond 2^53, deep nesting, an unknown field, a duplicate key, a prototype
 * key, the whole body swapped) and sometimes damages the text itself, then
 * sends it through app.inject() with a hostile path segment now and then.
 *
 * Every answer is a 2xx only for a body the route's schema accepts, a 4xx
 * with a stable code and the error shape otherwise, never a 5xx, never a
 * stack trace or SQL text; a refused request — and any read — leaves the
 * database exactly as it was. Runs on every backend of test/support/backends.
 */

import fc from 'fast-check';
import { Type, type TSchema } from '@sinclair/typebox';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BulkRequest,
  CheckpointRequest,
  CompleteManyRequest,
  CompleteRequest,
  EnqueueBatchRequest,
  EnqueueRequest,
  FailRequest,
  KindDefinition,
  KindPauseRequest,
  LeaseRequest,
  ReconcileRequest,
  RenewRequest,
  RequeueRequest,
  ScheduleDefinition,
  TokenRequest,
} from '../../src/protocol/schemas.js';
import { contentType, hostileSegment, hostileString, jobIdRef, Ref, resolveRefs, toJsonText } from '../support/arbitraries.js';
import { PurgeRequest } from '../../src/protocol/retention.js';
import { applyMutation, damageText, mutation, textDamage, VALID_BODIES } from '../support/body-mutations.js';
import { backends, bearer, drainAfterAll, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { checkAnswer, ENDPOINTS, shortReport, storeSnapshot, Tally, World, type Endpoint, type SentRequest } from '../support/hostile-world.js';

const BODY_LIMIT = 256 * 1024;
const BATCH_BODY_LIMIT = 512 * 1024;
/** Runs per endpoint; the whole file stays well under a minute on two busy cores. */
/** LEASEHOLD_FUZZ_SCALE multiplies the runs for a longer hunt. */
const SCALE = Number(process.env['LEASEHOLD_FUZZ_SCALE'] ?? '') || 1;
const RUNS: Record<string, number> = { sqlite: 30 * SCALE, postgres: 15 * SCALE };

const SCHEMAS: Readonly<Record<string, TSchema>> = {
  'POST /jobs': EnqueueRequest,
  'POST /jobs/batch': EnqueueBatchRequest,
  'POST /lease': LeaseRequest,
  'POST /jobs/:id/renew': RenewRequest,
  'POST /jobs/:id/complete': CompleteRequest,
  'POST /complete': CompleteManyRequest,
  'POST /jobs/:id/fail': FailRequest,
  'POST /jobs/:id/effect': TokenRequest,
  'POST /jobs/:id/checkpoint': CheckpointRequest,
  'POST /jobs/:id/requeue': RequeueRequest,
  'POST /jobs/:id/cancel': Type.Object({}, { additionalProperties: false }),
  'POST /jobs/:id/reconcile': ReconcileRequest,
  'PUT /kinds/:kind': KindDefinition,
  'POST /kinds/:kind/pause': KindPauseRequest,
  'POST /kinds/:kind/resume': KindPauseRequest,
  'PUT /schedules/:name': ScheduleDefinition,
  'POST /jobs/bulk': BulkRequest,
  'POST /jobs/purge': PurgeRequest,
};
/** Routes whose body may be left out entirely. */
const OPTIONAL_BODY = new Set(['POST /jobs/:id/requeue', 'POST /jobs/:id/cancel', 'PUT /kinds/:kind', 'POST /kinds/:kind/pause', 'POST /kinds/:kind/resume']);
const BATCH_ROUTES = new Set(['POST /jobs/batch', 'POST /complete']);

/**
 * The expected answers come from the contract, not from the coordinator's own parser or validator:
 * JSON.parse, the rules docs/ERRORS.md states for bodies (no prototype keys, no integer beyond 2^53 - 1,
 * at most 128 levels of nesting), and the request schemas checked by an Ajv set up here.
 */
const MAX_DEPTH = 128;
const independentAjv = new Ajv({ coerceTypes: false, useDefaults: false, removeAdditional: false, strict: false });
addFormatsModule.default(independentAjv, ['date-time']);
const validators = new Map(Object.entries(SCHEMAS).map(([name, schema]) => [name, independentAjv.compile(schema)]));

/** Whether arrays and objects nest deeper than `max` (iterative: hostile bodies nest 100,000 deep). */
function deeperThan(root: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[root, 0]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (depth + 1 > max) return true;
    for (const child of Array.isArray(value) ? value : Object.values(value as Record<string, unknown>)) stack.push([child, depth + 1]);
  }
  return false;
}

function hasPrototypeKey(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(hasPrototypeKey);
  const record = value as Record<string, unknown>;
  if (Object.prototype.hasOwnProperty.call(record, '__proto__')) return true;
  const ctor = Object.prototype.hasOwnProperty.call(record, 'constructor') ? record['constructor'] : undefined;
  if (ctor !== null && typeof ctor === 'object' && Object.prototype.hasOwnProperty.call(ctor, 'prototype')) return true;
  return Object.values(record).some(hasPrototypeKey);
}

/** An integer literal (no fraction, no exponent) outside ±(2^53 - 1), found by tokenizing the text. */
function hasUnsafeIntegerLiteral(text: string): boolean {
  for (const [token] of text.matchAll(/"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g)) {
    if (token.startsWith('"') || /[.eE]/.test(token)) continue;
    const n = BigInt(token);
    if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < -BigInt(Number.MAX_SAFE_INTEGER)) return true;
  }
  return false;
}

/** What the coordinator must answer for a body, by the contract alone (undefined: either may be right). */
function expectedRefusal(name: string, sent: string, type: string | undefined, limit: number): string | undefined {
  if (type === undefined || type.split(';', 1)[0]?.trim().toLowerCase() !== 'application/json') return undefined;
  if (Buffer.byteLength(sent, 'utf8') > limit) return 'payload_too_large';
  // What the coordinator receives: UTF-8 has no lone surrogates, so encoding turned each into U+FFFD.
  const text = Buffer.from(sent, 'utf8').toString('utf8');
  let parsed: unknown;
  if (text.length > 0) {
    try {
      parsed = JSON.parse(text);
    } catch {
      return 'invalid_json';
    }
    if (deeperThan(parsed, MAX_DEPTH) || hasPrototypeKey(parsed) || hasUnsafeIntegerLiteral(text)) return 'invalid_request';
  }
  if (parsed === undefined && OPTIONAL_BODY.has(name)) parsed = {};
  const validate = validators.get(name);
  if (validate !== undefined && !validate(parsed)) return 'invalid_request';
  return undefined;
}

const tally = new Tally();

afterAll(() => {
  console.log(tally.line(`hostile input (bodies, ${backends.map((b) => b.name).join('+')})`));
});

describe.each(backends)('hostile bodies ($name)', (backend) => {
  let h: Harness;
  let world: World;
  let baseline: string;
  drainAfterAll(backend);

  beforeAll(async () => {
    h = await startCoordinator(
      {
        bodyLimitBytes: BODY_LIMIT,
        batchBodyLimitBytes: BATCH_BODY_LIMIT,
        authCacheMs: 60_000,
        kindCacheMs: 0,
        defaultLeaseMs: 86_400_000,
        schedulerMaxSleepMs: 0,
      },
      { backend, manualClock: true },
    );
    world = await World.seed(h);
    baseline = await storeSnapshot(h.store);
  });
  afterAll(async () => {
    await h?.close();
  });

  function keyFor(endpoint: Endpoint, pick: number): string {
    // Kinds are registered in the other tenant, so that t1's allowlist stays the one the world was seeded with.
    if (endpoint.route.startsWith('/kinds/:kind') || endpoint.route === '/schedules/:name') return h.keys.otherAdmin;
    const roles = endpoint.roles === 'public' ? ['admin' as const] : endpoint.roles;
    const role = roles[pick % roles.length] ?? 'admin';
    return role === 'producer' ? h.keys.producer : role === 'worker' ? h.keys.worker : h.keys.admin;
  }

  /** Sends one request, checks the answer, and checks or moves the baseline. */
  async function send(endpoint: Endpoint, sent: SentRequest, expected: string | undefined, note: string): Promise<void> {
    const response = await h.app.inject({
      method: sent.method as 'GET',
      url: sent.url,
      headers: sent.headers as Record<string, string>,
      ...(sent.payload === undefined ? {} : { payload: sent.payload }),
    });
    const code = checkAnswer(response, sent, tally);
    const context = `${note} → ${response.statusCode} ${response.body.slice(0, 300)}`;
    if (expected !== undefined) expect(code, context).toBe(expected);
    const changedNothing = response.statusCode >= 400 || endpoint.method === 'GET' || response.statusCode === 204;
    if (changedNothing) {
      const after = await storeSnapshot(h.store);
      if (after !== baseline) expect(JSON.parse(after), `the database changed after ${context}`).toEqual(JSON.parse(baseline));
      return;
    }
    if (endpoint.route === '/lease') world.noteLeased(response.body);
    await world.refresh();
    baseline = await storeSnapshot(h.store);
  }

  it('lists every route of /openapi.json', async () => {
    const document = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, unknown>> };
    const served = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
    );
    expect(served.sort()).toEqual(ENDPOINTS.map((e) => `${e.method} ${e.route}`).sort());
  });

  for (const endpoint of ENDPOINTS) {
    const name = `${endpoint.method} ${endpoint.route}`;
    const bodyArb = VALID_BODIES[name];
    it(`${name}: hostile bodies and path segments`, async () => {
      const segment =
        endpoint.route.includes(':kind') || endpoint.route.includes(':name')
          ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom('k1', 'email2', 'a:b.c-d_e') }, { weight: 1, arbitrary: hostileSegment })
          : fc.oneof({ weight: 5, arbitrary: jobIdRef }, { weight: 1, arbitrary: hostileSegment });
      await fc.assert(
        fc.asyncProperty(
          segment,
          bodyArb ?? fc.constant(undefined),
          bodyArb === undefined ? fc.oneof(fc.constant({ op: 'none' as const }), mutation) : mutation,
          textDamage,
          contentType,
          fc.nat(),
          fc.oneof(
            fc.uuid(),
            hostileString.filter((s) => s.length > 0 && s.length <= 255),
          ),
          async (rawSegment, valid, change, damage, type, pick, idempotencyKey) => {
            world.beginRequest();
            const pathValue = rawSegment instanceof Ref ? world.resolve(rawSegment) : rawSegment;
            const url = endpoint.route.replace(/:(id|kind|name)/, pathValue);
            const mutated = valid === undefined && change.op === 'none' ? undefined : applyMutation(valid, change);
            const text = mutated === undefined ? undefined : damageText(toJsonText(resolveRefs(mutated, (ref) => world.resolve(ref))), damage);
            const headers: Record<string, string> = {
              ...bearer(keyFor(endpoint, pick)),
              'idempotency-key': idempotencyKey,
              ...(text === undefined || type === undefined ? {} : { 'content-type': type }),
            };
            const sent: SentRequest = { method: endpoint.method, url, headers, ...(text === undefined ? {} : { payload: text }) };
            // A valid route with a well-formed path: the answer follows from the parser and the schema.
            const routed = rawSegment instanceof Ref || (/:(kind|name)/.test(endpoint.route) && /^[a-z0-9][a-z0-9:._-]{0,127}$/i.test(String(rawSegment)));
            const limit = BATCH_ROUTES.has(name) ? BATCH_BODY_LIMIT : BODY_LIMIT;
            const expected = routed && endpoint.method !== 'GET' && text !== undefined ? expectedRefusal(name, text, type, limit) : undefined;
            await send(endpoint, sent, expected, `${name} ${url.slice(0, 120)} ${text?.slice(0, 300) ?? ''}`);
          },
        ),
        { numRuns: RUNS[backend.name] ?? 20, endOnFailure: true, reporter: shortReport },
      );
    });
  }
});
