/**
 * What a tenant's payload schema may be before the coordinator compiles it:
 * at most `maxSchemaBytes` of canonical JSON (compilation time and the
 * compiled code grow with the schema), and every `pattern` and
 * `patternProperties` key a regular expression RE2 accepts. RE2 matches in
 * time linear in the input, and refuses exactly what it could not run that
 * way (lookaround, backreferences); the refusal names the schema path, so the
 * admin sees which pattern to rewrite.
 *
 * `uniqueItems` is the other keyword whose cost is not linear: Ajv compares
 * every pair of items unless the items have a scalar `type` (then it hashes),
 * and 8,000 one-element arrays took 5.5 s (measured 2026-12-01, this
 * machine). It is allowed only with scalar item types or `maxItems` up to
 * 256 (about 9 ms for 256 nested arrays).
 *
 * `$async: true` is refused anywhere in the schema: Ajv then compiles a
 * validator that answers a promise, which enqueue's synchronous check would
 * read as a pass for every payload.
 */

import { RE2JS } from 're2js';
import { LeaseholdError } from '../core/errors.js';

/** Keywords whose values are data, not subschemas: a `pattern` inside them is not a regular expression. */
const DATA_KEYWORDS = new Set(['const', 'enum', 'default', 'examples', 'example', 'description', 'title', '$comment']);
/** Keywords whose values map names to subschemas: the names are property names, not keywords. */
const SCHEMA_MAPS = new Set(['properties', '$defs', 'definitions', 'dependentSchemas', 'dependencies']);
const SCALAR_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null']);
export const MAX_PAIRWISE_UNIQUE_ITEMS = 256;

/** Throws 413 payload_too_large for an oversized schema, 400 invalid_request for a pattern RE2 refuses or an asynchronous schema. */
export function checkSchemaLimits(schema: unknown, schemaText: string, maxSchemaBytes: number): void {
  const bytes = Buffer.byteLength(schemaText, 'utf8');
  if (bytes > maxSchemaBytes) {
    throw new LeaseholdError('payload_too_large', `body/payloadSchema is ${bytes} bytes of JSON; at most ${maxSchemaBytes} are allowed`);
  }
  checkKeywords(schema, 'body/payloadSchema');
}

function checkKeywords(node: unknown, path: string): void {
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    node.forEach((item, index) => checkKeywords(item, `${path}/${index}`));
    return;
  }
  checkUniqueItems(node as Record<string, unknown>, path);
  for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
    const at = `${path}/${escapePointer(key)}`;
    if (key === '$async' && value !== false) {
      throw new LeaseholdError('invalid_request', `${at} is not supported: payloads are checked synchronously at enqueue`);
    }
    if (key === 'pattern' && typeof value === 'string') requireLinear(value, at);
    else if (key === 'patternProperties' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [source, subschema] of Object.entries(value as Record<string, unknown>)) {
        const entry = `${at}/${escapePointer(source)}`;
        requireLinear(source, entry);
        checkKeywords(subschema, entry);
      }
    } else if (SCHEMA_MAPS.has(key) && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [name, subschema] of Object.entries(value as Record<string, unknown>)) checkKeywords(subschema, `${at}/${escapePointer(name)}`);
    } else if (!DATA_KEYWORDS.has(key)) checkKeywords(value, at);
  }
}

function checkUniqueItems(schema: Record<string, unknown>, path: string): void {
  if (schema['uniqueItems'] !== true) return;
  const items = schema['items'];
  const itemType = items !== null && typeof items === 'object' && !Array.isArray(items) ? (items as Record<string, unknown>)['type'] : undefined;
  const types = typeof itemType === 'string' ? [itemType] : Array.isArray(itemType) ? itemType : [];
  if (types.length > 0 && types.every((t) => typeof t === 'string' && SCALAR_TYPES.has(t))) return;
  const maxItems = schema['maxItems'];
  if (typeof maxItems === 'number' && maxItems <= MAX_PAIRWISE_UNIQUE_ITEMS) return;
  throw new LeaseholdError(
    'invalid_request',
    `${path}/uniqueItems needs items of a scalar type (string, number, integer, boolean, null) or maxItems of at most ${MAX_PAIRWISE_UNIQUE_ITEMS}: otherwise every pair of items is compared`,
  );
}

function requireLinear(source: string, path: string): void {
  try {
    RE2JS.compile(source);
  } catch (error) {
    const reason = error instanceof Error ? error.message.slice(0, 200) : 'unsupported syntax';
    throw new LeaseholdError('invalid_request', `${path} is not a linear-time regular expression (RE2 syntax; no lookaround or backreferences): ${reason}`);
  }
}

/** JSON Pointer escaping (RFC 6901), so a path names keys containing `/` or `~` unambiguously. */
function escapePointer(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}
