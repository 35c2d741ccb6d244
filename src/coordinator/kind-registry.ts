/**
 * The per-tenant kind registry as the coordinator sees it: the tenant's kinds
 * with their payload schemas compiled once. Enqueue consults it on every
 * request, so a tenant's kinds are read from the store at most once per
 * `cacheMs` (and re-read at once after this process registers a kind); a kind
 * registered by another process is seen within that time.
 *
 * The rule for unregistered kinds: a tenant that has registered no kinds
 * accepts any kind with the coordinator's defaults; once it registers one,
 * the registry is an allowlist (and `requireRegisteredKinds` makes it one
 * from the start).
 */

import { performance } from 'node:perf_hooks';
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import { canonicalJson } from '../core/canonical-json.js';
import { LeaseholdError } from '../core/errors.js';
import type { KindRecord, Store } from '../store/store.js';
import { payloadAjv } from './validation.js';

export interface ResolvedKind {
  readonly record: KindRecord;
  /** null when the kind has no payload schema. */
  readonly validate: ValidateFunction | null;
}

export interface TenantKinds {
  readonly byName: ReadonlyMap<string, ResolvedKind>;
  /** The smallest maxResultBytes of any kind: results up to it need no per-job lookup. */
  readonly smallestMaxResultBytes: number | null;
}

const MAX_COMPILED = 1_000;
const MAX_TENANTS = 10_000;

export class KindRegistry {
  private readonly ajv: Ajv = payloadAjv();
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly tenants = new Map<string, { readonly kinds: TenantKinds; readonly expiresAt: number }>();
  private readonly loading = new Map<string, Promise<TenantKinds>>();

  constructor(
    private readonly store: Store,
    private readonly cacheMs: number,
  ) {}

  async forTenant(tenant: string): Promise<TenantKinds> {
    const hit = this.tenants.get(tenant);
    if (hit !== undefined && hit.expiresAt > performance.now()) return hit.kinds;
    const pending = this.loading.get(tenant);
    if (pending !== undefined) return pending;
    const load = this.load(tenant).finally(() => this.loading.delete(tenant));
    this.loading.set(tenant, load);
    return load;
  }

  invalidate(tenant: string): void {
    this.tenants.delete(tenant);
  }

  /** Compiles a payload schema, or answers 400 naming why it is not a usable JSON Schema. */
  compile(schema: unknown): ValidateFunction {
    if (typeof schema !== 'boolean' && (schema === null || typeof schema !== 'object' || Array.isArray(schema))) {
      throw new LeaseholdError('invalid_request', 'body/payloadSchema must be a JSON Schema (an object or a boolean)');
    }
    const key = canonicalJson(schema);
    const cached = this.compiled.get(key);
    if (cached !== undefined) return cached;
    let validate: ValidateFunction;
    try {
      validate = this.ajv.compile(schema as object | boolean);
    } catch (error) {
      const reason = error instanceof Error ? error.message.slice(0, 300) : 'invalid schema';
      throw new LeaseholdError('invalid_request', `body/payloadSchema is not a valid JSON Schema: ${reason}`);
    }
    if (this.compiled.size >= MAX_COMPILED) this.compiled.clear();
    this.compiled.set(key, validate);
    return validate;
  }

  private async load(tenant: string): Promise<TenantKinds> {
    const records = await this.store.kindList({ tenant });
    const byName = new Map<string, ResolvedKind>();
    let smallest: number | null = null;
    for (const record of records) {
      let validate: ValidateFunction | null = null;
      if (record.payloadSchema !== null && record.payloadSchema !== undefined) {
        try {
          validate = this.compile(record.payloadSchema);
        } catch {
          // Stored before validation existed or written by hand: refuse every payload rather than accept unchecked ones.
          validate = this.compile(false);
        }
      }
      byName.set(record.kind, { record, validate });
      smallest = smallest === null ? record.maxResultBytes : Math.min(smallest, record.maxResultBytes);
    }
    const kinds: TenantKinds = { byName, smallestMaxResultBytes: smallest };
    if (this.cacheMs > 0) {
      if (this.tenants.size >= MAX_TENANTS) this.tenants.clear();
      this.tenants.set(tenant, { kinds, expiresAt: performance.now() + this.cacheMs });
    }
    return kinds;
  }
}

/** Names the first failing path of a payload, e.g. `payload/items/0/sku must be string`. */
export function describePayloadError(errors: readonly ErrorObject[] | null | undefined): string {
  const first = errors?.[0];
  if (first === undefined) return 'payload does not match the kind schema';
  const path = `payload${first.instancePath}`;
  const params = first.params as Record<string, unknown>;
  if (first.keyword === 'required' && typeof params['missingProperty'] === 'string') return `${path}/${params['missingProperty']} is required`;
  if (first.keyword === 'additionalProperties' && typeof params['additionalProperty'] === 'string') {
    return `${path}/${params['additionalProperty']} is not allowed`;
  }
  return `${path} ${first.message ?? 'is invalid'}`;
}
