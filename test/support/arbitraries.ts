/**
 * fast-check generators for hostile input, shared by test/hostile and
 * test/races: strings that attack SQL, encodings and parsers; numbers at and
 * beyond every boundary; JSON texts that JSON.stringify cannot write
 * (duplicate keys, prototype keys, unsafe integers, deep nesting); hostile
 * path segments and content types.
 *
 * Valid bodies per endpoint and the mutations applied to them are in
 * body-mutations.ts. Bodies are built as values that may hold three markers: RawJson (text
 * written as is: unsafe integers, deep nesting), Entries (an object written
 * entry by entry, so duplicate and `__proto__` keys survive) and Ref (a job
 * id or lease token the test resolves against its seeded database when the
 * request is sent, so that generators stay independent of any one run).
 */

import fc, { type Arbitrary } from 'fast-check';

/** Strings that break naive SQL building, in every dialect we could meet. */
export const SQL_INJECTIONS: readonly string[] = [
  "' OR '1'='1",
  "' OR 1=1 --",
  "'; DROP TABLE jobs; --",
  '"; DROP TABLE jobs; --',
  "x'); DELETE FROM jobs; --",
  "1; UPDATE jobs SET status = 'succeeded'",
  "' UNION SELECT key_hash, tenant, role FROM api_keys --",
  "'||(SELECT key_hash FROM api_keys LIMIT 1)||'",
  "'; SELECT pg_sleep(10); --",
  '$$; DROP SCHEMA public CASCADE; $$',
  "E'\\x00'",
  "\\'; ATTACH DATABASE '/tmp/evil.db' AS evil; --",
  "'; PRAGMA writable_schema = 1; --",
  '*/ SELECT 1 /*',
  "%' AND tenant LIKE '%",
  '?',
  '$1',
  ':id',
  '@tenant',
  '\\',
  "'",
  '"',
  '`',
  ';',
  '--',
  '%',
  '_',
];

/** Short strings that mean something to a parser, a shell or a template engine. */
const MEANINGFUL: readonly string[] = [
  '',
  ' ',
  'null',
  'undefined',
  'true',
  'NaN',
  '-1',
  '1e309',
  '0x10',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  '[object Object]',
  '%00',
  '%2e%2e%2f',
  '../../etc/passwd',
  '${7*7}',
  '{{7*7}}',
  '<script>alert(1)</script>',
  '\r\nX-Injected: 1',
];

export const loneSurrogate: Arbitrary<string> = fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code));

/** One character that is trouble somewhere: controls, NUL, bidi, BOM, non-characters, lone surrogates. */
export const hostileChar: Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '\u0000',
    '\u0001',
    '\u0008',
    '\u001b',
    '\u007f',
    '\u0085',
    '\u00a0',
    '\u2028',
    '\u2029',
    '\u200b',
    '\u200d',
    '\u202e',
    '\ufeff',
    '\ufffd',
    '\uffff',
    '\ud83d\ude00',
    'e\u0301',
    '\r',
    '\n',
    '\t',
    '"',
    "'",
    '\\',
    '/',
    '{',
    ']',
  ),
  loneSurrogate,
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);

/** Long strings: the sizes straddle typical column and buffer limits, well under the body limits. */
export const hugeString: Arbitrary<string> = fc
  .tuple(fc.constantFrom(1_000, 10_000, 40_000), fc.constantFrom('x', 'é', '\u0000', '\ud83d\ude00', "'", '\\'))
  .map(([length, unit]) => unit.repeat(length));

export const hostileString: Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...SQL_INJECTIONS) },
  { weight: 2, arbitrary: fc.constantFrom(...MEANINGFUL) },
  { weight: 3, arbitrary: fc.string({ unit: hostileChar, maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom(...SQL_INJECTIONS), fc.string({ unit: hostileChar, maxLength: 4 })).map(([a, b]) => a + b) },
  { weight: 1, arbitrary: hugeString },
);

/** Keys for objects: names that exist on Object.prototype, that we use, and hostile strings. */
export const hostileKey: Arbitrary<string> = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__', 'then', 'length', ''),
  fc.constantFrom('kind', 'token', 'payload', 'id', 'status', 'tenant', 'owner', 'epoch', 'role'),
  hostileString.filter((s) => s.length < 200),
);

/** Numbers at and beyond the edges of every integer field we have. */
export const hostileNumber: Arbitrary<number> = fc.oneof(
  fc.constantFrom(
    -1,
    -0,
    0,
    0.5,
    -0.5,
    1.5,
    1e-7,
    99.99,
    1e21,
    1e308,
    -1e308,
    2 ** 31 - 1,
    2 ** 31,
    -(2 ** 31),
    2 ** 32,
    Number.MAX_SAFE_INTEGER,
    -Number.MAX_SAFE_INTEGER,
    Number.MIN_VALUE,
    Number.EPSILON,
    1000,
    1001,
    1_000_001,
    86_400_001,
  ),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** JSON number literals as text: integers JSON.parse would round, out-of-range exponents, odd spellings. */
export const numberText: Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '9007199254740992',
    '9007199254740993',
    '-9007199254740993',
    '18446744073709551616',
    '123456789012345678901234567890',
    '1e400',
    '-1e400',
    '1e-400',
    '1E+2',
    '1.0',
    '-0',
    '-0.0',
    '5e0',
  ),
  fc.bigInt({ min: 2n ** 53n, max: 2n ** 70n }).map((n) => n.toString()),
  fc.bigInt({ min: -(2n ** 70n), max: -(2n ** 53n) - 1n }).map((n) => n.toString()),
);

/** Text written into the JSON as is. */
export class RawJson {
  constructor(readonly text: string) {}
}

/** An object written entry by entry, so that duplicate keys and `__proto__` reach the server. */
export class Entries {
  constructor(readonly entries: readonly (readonly [string, unknown])[]) {}
}

export type JobIdChoice = 'queued' | 'running' | 'succeeded' | 'dead' | 'cancelled' | 'unknown' | 'otherUser' | 'otherTenant' | 'missing';
export type TokenChoice = 'live' | 'stale' | 'otherLive' | 'otherTenant';

/** A job id or lease token, resolved by the test at send time. */
export class Ref {
  constructor(
    readonly what: 'jobId' | 'token',
    readonly choice: JobIdChoice | TokenChoice,
  ) {}
}

export const JOB_ID_CHOICES: readonly JobIdChoice[] = ['queued', 'running', 'succeeded', 'dead', 'cancelled', 'unknown', 'otherUser', 'otherTenant', 'missing'];

export const jobIdRef: Arbitrary<Ref> = fc.constantFrom(...JOB_ID_CHOICES).map((choice) => new Ref('jobId', choice));
/** Mostly the live token of the addressed job, so that requests get past the fence to the deeper checks. */
export const tokenRef: Arbitrary<Ref | string> = fc.oneof(
  { weight: 4, arbitrary: fc.constant(new Ref('token', 'live')) },
  { weight: 1, arbitrary: fc.constantFrom<TokenChoice>('stale', 'otherLive', 'otherTenant').map((choice) => new Ref('token', choice)) },
  { weight: 1, arbitrary: hostileString },
);

/** Deep nesting of arrays and objects, beyond the coordinator's depth limit or just at it. */
export const deepNesting: Arbitrary<RawJson> = fc
  .tuple(fc.constantFrom(127, 129, 1_000, 5_000, 50_000), fc.boolean())
  .map(([depth, objects]) => new RawJson(objects ? '{"a":'.repeat(depth) + '1' + '}'.repeat(depth) : '['.repeat(depth) + ']'.repeat(depth)));

/** Any JSON value, with hostile strings, keys and numbers, raw number texts and deep or wide structures. */
export const hostileJson: Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', maxDepth: 3 },
    hostileString,
    hostileNumber,
    fc.boolean(),
    fc.constant(null),
    numberText.map((text) => new RawJson(text)),
    deepNesting,
    fc.constantFrom(1_000, 20_000).map((n) => new RawJson(`[${new Array<string>(n).fill('0').join(',')}]`)),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.array(fc.tuple(hostileKey, tie('value')), { maxLength: 4 }).map((entries) => new Entries(entries)),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** Plain JSON that any endpoint taking free-form JSON must accept. */
export const benignJson: Arbitrary<unknown> = fc.jsonValue({ maxDepth: 3 });

/** Free-form JSON as valid bodies carry it: mostly benign, sometimes hostile strings in valid places. */
export const freeJson: Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: benignJson },
  { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), hostileString, { maxKeys: 3 }) },
  { weight: 1, arbitrary: hostileString },
);

/** Writes a body (with RawJson, Entries and resolved Refs) as JSON text. */
export function toJsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (value instanceof Entries) return `{${value.entries.map(([key, inner]) => `${JSON.stringify(key)}:${toJsonText(inner)}`).join(',')}}`;
  if (value instanceof Ref) throw new Error('unresolved Ref');
  if (Array.isArray(value)) return `[${value.map((inner) => (inner === undefined ? 'null' : toJsonText(inner))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const parts: string[] = [];
    for (const key of Object.keys(value)) {
      const inner = (value as Record<string, unknown>)[key];
      if (inner !== undefined) parts.push(`${JSON.stringify(key)}:${toJsonText(inner)}`);
    }
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Replaces every Ref in a body by what `resolve` says it is. */
export function resolveRefs(value: unknown, resolve: (ref: Ref) => string): unknown {
  if (value instanceof Ref) return resolve(value);
  if (value instanceof RawJson) return value;
  if (value instanceof Entries) return new Entries(value.entries.map(([key, inner]) => [key, resolveRefs(inner, resolve)] as const));
  if (Array.isArray(value)) return value.map((inner) => resolveRefs(inner, resolve));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) out[key] = resolveRefs(inner, resolve);
    return out;
  }
  return value;
}

/** Content types a client might send with a JSON body; only application/json (any case, any parameters) is JSON. */
export const contentType: Arbitrary<string | undefined> = fc.oneof(
  { weight: 12, arbitrary: fc.constant('application/json') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/json; charset=utf-16',
      'application/json;;;',
      'application/jsonx',
      'application/problem+json',
      'text/json',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/octet-stream',
      '',
      '*/*',
      undefined,
    ),
  },
);

/** A path segment as it would appear in a URL: hostile strings percent-encoded, and raw oddities. */
export const hostileSegment: Arbitrary<string> = fc.oneof(
  hostileString.filter((s) => s.length > 0 && s.length < 2_000).map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, '\ufffd'))),
  fc.constantFrom(
    '%',
    '%zz',
    '%00',
    '%2F',
    '%2e%2e',
    '..',
    '.',
    '%25',
    '%C0%80',
    '%ED%A0%80',
    '%FF',
    'a'.repeat(64),
    'a'.repeat(65),
    'a'.repeat(201),
    'A'.repeat(10_000),
    '01900000-0000-7000-8000-000000000000',
    '01900000-0000-7000-8000-00000000000G',
    '01900000-0000-7000-8000-000000000000%00',
    '01900000-0000-7000-8000-000000000000;select',
    "01900000-0000-7000-8000-000000000000'",
    'ffffffff-ffff-ffff-ffff-ffffffffffff',
    '00000000-0000-0000-0000-000000000000',
  ),
);
