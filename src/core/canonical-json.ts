/**
 * One canonical JSON form (object keys sorted, no whitespace) for payloads and
 * for the idempotency comparison, so that `{"a":1,"b":2}` and `{"b":2,"a":1}`
 * are the same request.
 */

export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(sortKeys);
  const source = value as Record<string, unknown>;
  // Without a prototype, a key named "__proto__" is stored as an ordinary property instead of setting one.
  const sorted = Object.create(null) as Record<string, unknown>;
  for (const key of Object.keys(source).sort()) sorted[key] = sortKeys(source[key]);
  return sorted;
}
