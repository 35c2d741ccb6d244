/**
 * Request bodies for the hostile-input suites: a valid body for every route
 * that takes one (with hostile strings wherever the schema allows any
 * string), the mutations that make it hostile (a field replaced by any
 * hostile value, unknown, duplicate and prototype keys, a removed field, the
 * body wrapped or swapped) and damage to the JSON text itself. Built on the
 * generators and markers of arbitraries.ts.
 */

import fc, { type Arbitrary } from 'fast-check';
import {
  Entries,
  freeJson,
  hostileJson,
  hostileKey,
  hostileChar,
  hostileString,
  jobIdRef,
  RawJson,
  Ref,
  resolveRefs,
  tokenRef,
  toJsonText,
} from './arbitraries.js';

const rfc3339Past: Arbitrary<string> = fc
  .date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2025-01-01T00:00:00Z'), noInvalidDate: true })
  .map((d) => d.toISOString());
const workerId: Arbitrary<string> = fc.oneof(
  fc.string({ minLength: 1, maxLength: 20 }),
  hostileString.filter((s) => s.length >= 1 && s.length <= 200),
);
const idempotencyKey: Arbitrary<string> = fc.oneof(
  fc.uuid(),
  hostileString.filter((s) => s.length >= 1 && s.length <= 255),
);
/** Kinds registered by the seeded tenant, one it never registered, and the same spelled oddly. */
export const SEEDED_KINDS = ['email', 'typed', 'small', 'run', 'done'] as const;
const kindName: Arbitrary<string> = fc.constantFrom(...SEEDED_KINDS, 'nope', 'Email', 'email.v2');

const enqueueFields = {
  kind: kindName,
  payload: fc.oneof(freeJson, fc.record({ to: fc.string({ maxLength: 40 }) })),
  maxAttempts: fc.integer({ min: 1, max: 1000 }),
  runAfter: rfc3339Past,
  priority: fc.integer({ min: -1_000_000, max: 1_000_000 }),
  deadlineMs: fc.integer({ min: 60_000, max: 365 * 24 * 60 * 60_000 }),
};
const enqueueBody = fc.record(enqueueFields, { requiredKeys: ['kind', 'payload'] });

const resultBytes = fc.record({
  contentType: fc.constantFrom('application/octet-stream', 'text/plain; charset=utf-8', 'image/png'),
  base64: fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes).toString('base64')),
});

/** A valid body for each route that takes one (routes are Fastify patterns). */
export const VALID_BODIES: Readonly<Record<string, Arbitrary<Record<string, unknown>>>> = {
  'POST /jobs': enqueueBody,
  'POST /jobs/batch': fc.record({
    jobs: fc.array(fc.record({ idempotencyKey, ...enqueueFields }, { requiredKeys: ['idempotencyKey', 'kind', 'payload'] }), { minLength: 1, maxLength: 3 }),
  }),
  'POST /lease': fc.record(
    {
      workerId,
      kinds: fc.subarray([...SEEDED_KINDS]),
      leaseMs: fc.integer({ min: 600_000, max: 86_400_000 }),
      max: fc.integer({ min: 1, max: 3 }),
    },
    { requiredKeys: ['workerId'] },
  ),
  'POST /jobs/:id/renew': fc.record(
    { token: tokenRef, leaseMs: fc.integer({ min: 600_000, max: 86_400_000 }), progress: freeJson },
    { requiredKeys: ['token'] },
  ),
  'POST /jobs/:id/complete': fc.oneof(
    fc.record({ token: tokenRef, result: freeJson }, { requiredKeys: ['token'] }),
    fc.record({ token: tokenRef, resultBytes }),
  ),
  'POST /complete': fc.record({
    completions: fc.array(fc.record({ id: jobIdRef, token: tokenRef, result: freeJson }, { requiredKeys: ['id', 'token'] }), { minLength: 1, maxLength: 3 }),
  }),
  'POST /jobs/:id/fail': fc.record(
    {
      token: tokenRef,
      error: fc.record(
        { code: hostileString.filter((s) => s.length >= 1 && s.length <= 128), message: hostileString.filter((s) => s.length <= 4096) },
        { requiredKeys: ['code'] },
      ),
      retryable: fc.boolean(),
    },
    { requiredKeys: ['token', 'error'] },
  ),
  'POST /jobs/:id/effect': fc.record({ token: tokenRef }),
  'POST /jobs/:id/checkpoint': fc.record({ token: tokenRef, step: fc.nat(), state: freeJson }),
  'POST /jobs/:id/requeue': fc.record({ maxAttempts: fc.integer({ min: 1, max: 1000 }) }, { requiredKeys: [] }),
  'POST /jobs/:id/cancel': fc.constant({}),
  'POST /jobs/:id/reconcile': fc.record({ outcome: fc.constantFrom('succeeded', 'dead', 'requeue') }),
  'POST /jobs/bulk': fc.record(
    {
      action: fc.constantFrom('requeue', 'cancel', 'reconcile'),
      outcome: fc.constantFrom('succeeded', 'dead', 'requeue'),
      filter: fc.record(
        {
          status: fc.constantFrom('queued', 'running', 'dead', 'unknown', 'succeeded'),
          kind: fc.constantFrom(...SEEDED_KINDS),
          errorCode: fc.constantFrom('boom', 'lease_expired'),
        },
        { requiredKeys: [] },
      ),
      limit: fc.integer({ min: 1, max: 3 }),
      dryRun: fc.boolean(),
    },
    { requiredKeys: ['action', 'filter'] },
  ),
  // A dry run over an hour: one mutation cannot turn it into a purge of the world's jobs (seconds old).
  'POST /jobs/purge': fc.record(
    {
      olderThanMs: fc.integer({ min: 3_600_000, max: 315_360_000_000 }),
      statuses: fc.subarray(['succeeded', 'cancelled', 'dead'], { minLength: 1 }),
      kind: fc.constantFrom('email', 'k1'),
      dryRun: fc.constant(true),
    },
    { requiredKeys: ['olderThanMs', 'dryRun'] },
  ),
  'PUT /schedules/:name': fc.record(
    {
      kind: fc.constantFrom('email', 'k1', 'report'),
      payload: fc.constantFrom<unknown>(null, 1, { to: 'a@b' }, [1, 2]),
      // Far from the test's clock, so a saved schedule enqueues nothing while the file runs.
      cron: fc.constantFrom('@yearly', '0 0 1 1 *', '0 3 29 2 *', '0 0 1 JAN-MAR MON'),
      timezone: fc.constantFrom('UTC', 'Europe/Berlin', 'America/New_York'),
      overlap: fc.constantFrom('skip', 'allow'),
      catchUp: fc.integer({ min: 0, max: 100 }),
    },
    { requiredKeys: ['kind', 'payload', 'cron'] },
  ),
  'PUT /kinds/:kind': fc.record(
    {
      payloadSchema: fc.constantFrom<unknown>(
        { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
        { type: 'string', maxLength: 10 },
        true,
        { pattern: '^(a+)+$' },
      ),
      maxPayloadBytes: fc.integer({ min: 1, max: 1024 * 1024 }),
      maxAttempts: fc.integer({ min: 1, max: 1000 }),
      leaseMs: fc.integer({ min: 100, max: 86_400_000 }),
      backoff: fc.integer({ min: 1, max: 10_000 }).map((baseMs) => ({ baseMs, maxMs: baseMs * 2 })),
      deadlineMs: fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 1_000_000_000 })),
      maxResultBytes: fc.integer({ min: 1, max: 1024 * 1024 }),
    },
    { requiredKeys: [] },
  ),
};

// ---------------------------------------------------------------- mutations

/** Every object and array inside a body, the body itself first. */
function containers(value: unknown, out: unknown[] = []): unknown[] {
  if (value instanceof RawJson || value instanceof Ref) return out;
  if (value instanceof Entries) {
    out.push(value);
    for (const [, inner] of value.entries) containers(inner, out);
    return out;
  }
  if (value !== null && typeof value === 'object') {
    out.push(value);
    for (const inner of Object.values(value)) containers(inner, out);
  }
  return out;
}

function replaceNode(root: unknown, target: unknown, make: (node: unknown) => unknown): unknown {
  if (root === target) return make(root);
  if (root instanceof RawJson || root instanceof Ref) return root;
  if (root instanceof Entries) return new Entries(root.entries.map(([key, inner]) => [key, replaceNode(inner, target, make)] as const));
  if (Array.isArray(root)) return root.map((inner) => replaceNode(inner, target, make));
  if (root !== null && typeof root === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(root)) out[key] = replaceNode(inner, target, make);
    return out;
  }
  return root;
}

function entriesOf(node: unknown): [string, unknown][] {
  if (node instanceof Entries) return node.entries.map(([key, value]) => [key, value]);
  if (Array.isArray(node)) return node.map((value, index) => [String(index), value]);
  return Object.entries(node as Record<string, unknown>);
}

function rebuild(original: unknown, entries: [string, unknown][]): unknown {
  if (Array.isArray(original)) return entries.map(([, value]) => value);
  return new Entries(entries);
}

export type Mutation =
  | { readonly op: 'none' }
  | { readonly op: 'replace'; readonly at: number; readonly field: number; readonly value: unknown }
  | { readonly op: 'add'; readonly at: number; readonly key: string; readonly value: unknown }
  | { readonly op: 'remove'; readonly at: number; readonly field: number }
  | { readonly op: 'duplicate'; readonly at: number; readonly field: number; readonly value: unknown; readonly hostileFirst: boolean }
  | { readonly op: 'prototype'; readonly at: number; readonly key: '__proto__' | 'constructor' | '\\u005f_proto__'; readonly value: unknown }
  | { readonly op: 'wrap'; readonly asArray: boolean }
  | { readonly op: 'whole'; readonly value: unknown };

export const mutation: Arbitrary<Mutation> = fc.oneof(
  { weight: 1, arbitrary: fc.constant({ op: 'none' as const }) },
  { weight: 6, arbitrary: fc.record({ op: fc.constant('replace' as const), at: fc.nat(), field: fc.nat(), value: hostileJson }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('add' as const), at: fc.nat(), key: hostileKey, value: hostileJson }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('remove' as const), at: fc.nat(), field: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('duplicate' as const), at: fc.nat(), field: fc.nat(), value: hostileJson, hostileFirst: fc.boolean() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('prototype' as const),
      at: fc.nat(),
      key: fc.constantFrom('__proto__' as const, 'constructor' as const, '\\u005f_proto__' as const),
      value: fc.oneof(fc.constant(new RawJson('{"prototype":{"admin":true}}')), fc.constant(new RawJson('{"isAdmin":true}')), hostileJson),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('wrap' as const), asArray: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('whole' as const), value: hostileJson }) },
);

/** Applies a mutation to a body; indexes wrap around the nodes and fields that exist. */
export function applyMutation(body: unknown, m: Mutation): unknown {
  if (m.op === 'none') return body;
  if (m.op === 'wrap') return m.asArray ? [body] : { body };
  if (m.op === 'whole') return m.value;
  const nodes = containers(body);
  const node = nodes[m.at % Math.max(1, nodes.length)];
  if (node === undefined) return m.op === 'add' ? new Entries([[m.key, m.value]]) : body;
  return replaceNode(body, node, (target) => {
    const entries = entriesOf(target);
    const index = entries.length === 0 ? -1 : ('field' in m ? m.field : 0) % entries.length;
    const picked = entries[index];
    switch (m.op) {
      case 'replace':
        if (picked === undefined) return target;
        picked[1] = m.value;
        return rebuild(target, entries);
      case 'remove':
        if (index >= 0) entries.splice(index, 1);
        return rebuild(target, entries);
      case 'add':
        if (Array.isArray(target)) return [...target, m.value];
        return new Entries([...entries, [m.key, m.value]]);
      case 'duplicate':
        if (picked === undefined || Array.isArray(target)) return target;
        return new Entries(m.hostileFirst ? [[picked[0], m.value], ...entries] : [...entries, [picked[0], m.value]]);
      case 'prototype': {
        if (Array.isArray(target)) return [...target, new Entries([[m.key === '\\u005f_proto__' ? '__proto__' : m.key, m.value]])];
        // The escaped spelling is written raw, so the server sees `"\u005f_proto__"` in the text.
        if (m.key === '\\u005f_proto__')
          return new RawJson(`{"\\u005f_proto__":${toJsonText(m.value)}${entries.map(([k, v]) => `,${JSON.stringify(k)}:${toJsonTextLoose(v)}`).join('')}}`);
        return new Entries([...entries, [m.key, m.value]]);
      }
    }
  });
}

/** toJsonText for a subtree that may still hold Refs: they are written as placeholders the test never sees resolved. */
function toJsonTextLoose(value: unknown): string {
  return toJsonText(resolveRefs(value, (ref) => `unresolved-${ref.choice}`));
}

// ---------------------------------------------------------------- raw text damage

export type TextDamage =
  | { readonly op: 'none' }
  | { readonly op: 'truncate'; readonly at: number }
  | { readonly op: 'insert'; readonly at: number; readonly text: string }
  | { readonly op: 'append'; readonly text: string }
  | { readonly op: 'replace'; readonly text: string };

const junkText: Arbitrary<string> = fc.oneof(
  fc.constantFrom('\ufeff', ',', '}', ']', '{', '[', 'NaN', 'Infinity', 'undefined', "'", '//', '/* */', '\u0000', ',}', 'x', '"', '\\'),
  fc.string({ unit: hostileChar, maxLength: 6 }),
);

export const textDamage: Arbitrary<TextDamage> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ op: 'none' as const }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('insert' as const), at: fc.nat(), text: junkText }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('append' as const), text: junkText }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('replace' as const),
      text: fc.oneof(
        fc.constantFrom(
          '',
          ' ',
          'null',
          'true',
          '0',
          '""',
          '[]',
          '{}',
          '{"a":1,}',
          "{'a':1}",
          '{a:1}',
          '[1,2',
          '{"a":NaN}',
          '\ufeff{}',
          '{"a":01}',
          '{"a":.5}',
          '{"a":+1}',
        ),
        fc.string({ unit: 'binary', maxLength: 40 }),
      ),
    }),
  },
);

export function damageText(text: string, damage: TextDamage): string {
  switch (damage.op) {
    case 'none':
      return text;
    case 'truncate':
      return text.slice(0, text.length === 0 ? 0 : damage.at % text.length);
    case 'insert': {
      const at = text.length === 0 ? 0 : damage.at % text.length;
      return text.slice(0, at) + damage.text + text.slice(at);
    }
    case 'append':
      return text + damage.text;
    case 'replace':
      return damage.text;
  }
}
