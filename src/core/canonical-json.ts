/**
 * One canonical JSON form (object keys sorted, no whitespace) for payloads and
 * for the idempotency comparison, so that `{"a":1,"b":2}` and `{"b":2,"a":1}`
 * are the same request.
 */

export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const source = value as Record<string, unknown>;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(source).sort()) {
      Object.defineProperty(sorted, key, { value: sortKeys(source[key]), enumerable: true, writable: true, configurable: true });
    }
    return sorted;
  }
  return value;
}
