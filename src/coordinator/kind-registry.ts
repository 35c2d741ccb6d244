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
import { checkSchemaLimits } from './schema-limits.js';
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
  /** The smallest maxCheckpointBytes of any kind (checkpoint-limit.ts). */
  readonly smallestMaxCheckpointBytes: number | null;
}

/** Compiled validators kept at once (least recently used first out); each tenant/kind holds at most one. */
const MAX_COMPILED = 4_096;
const MAX_TENANTS = 10_000;
/**
 * Ajv keeps every schema it compiled, and every pattern it saw, for its own
 * lifetime; a fresh instance after this many compiles lets the old one (and
 * what it kept) go once its validators are evicted.
 */
const COMPILES_PER_AJV = 256;

export interface KindRegistryLimits {
  /** Largest payload schema, in bytes of canonical JSON. */
  readonly maxSchemaBytes: number;
  /** Validators kept compiled at once. */
  readonly maxCompiled?: number;
}

interface CompiledEntry {
  /** The registration the validator was compiled for (the record's updatedAt). */
  readonly version: number;
  readonly validate: ValidateFunction;
  readonly ajv: Ajv;
  readonly schema: object | boolean;
}

export class KindRegistry {
  private ajv: Ajv = payloadAjv();
  private ajvCompiles = 0;
  /** By tenant and kind, in least-recently-used order: replacing a kind replaces its entry. */
  private readonly compiled = new Map<string, CompiledEntry>();
  private readonly tenants = new Map<string, { readonly kinds: TenantKinds; readonly expiresAt: number }>();
  private readonly loading = new Map<string, Promise<TenantKinds>>();
  private readonly maxCompiled: number;
  /** Which Ajv compiled a validator handed out by compile(), so remember() frees it from the right one. */
  private readonly compiledBy = new WeakMap<ValidateFunction, Ajv>();

  constructor(
    private readonly store: Store,
    private readonly cacheMs: number,
    private readonly limits: KindRegistryLimits = { maxSchemaBytes: 64 * 1024 },
  ) {
    this.maxCompiled = limits.maxCompiled ?? MAX_COMPILED;
  }

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

  /** How many validators are compiled and kept (for tests and diagnostics). */
  compiledCount(): number {
    return this.compiled.size;
  }

  /**
   * Checks and compiles a payload schema for registration, or answers 400
   * (not a usable JSON Schema, a pattern RE2 refuses) or 413 (over the size
   * limit). The validator is not kept: `remember` keeps it once stored.
   */
  compile(schema: unknown): ValidateFunction {
    const fresh = this.compileFresh(schema);
    this.compiledBy.set(fresh.validate, fresh.ajv);
    return fresh.validate;
  }

  /** Keeps the validator compiled for a just-stored registration, replacing the kind's previous one. */
  remember(record: KindRecord, validate: ValidateFunction | null, schema: unknown): void {
    const key = cacheKey(record.tenant, record.kind);
    this.drop(key);
    if (validate === null) return;
    this.keep(key, { version: record.updatedAt, validate, ajv: this.compiledBy.get(validate) ?? this.ajv, schema: schema as object | boolean });
  }

  private compileFresh(schema: unknown): { validate: ValidateFunction; ajv: Ajv; schema: object | boolean } {
    if (typeof schema !== 'boolean' && (schema === null || typeof schema !== 'object' || Array.isArray(schema))) {
      throw new LeaseholdError('invalid_request', 'body/payloadSchema must be a JSON Schema (an object or a boolean)');
    }
    checkSchemaLimits(schema, canonicalJson(schema), this.limits.maxSchemaBytes);
    if (this.ajvCompiles >= COMPILES_PER_AJV) {
      this.ajv = payloadAjv();
      this.ajvCompiles = 0;
    }
    this.ajvCompiles += 1;
    const ajv = this.ajv;
    try {
      return { validate: ajv.compile(schema as object | boolean), ajv, schema: schema as object | boolean };
    } catch (error) {
      const reason = error instanceof Error ? error.message.slice(0, 300) : 'invalid schema';
      throw new LeaseholdError('invalid_request', `body/payloadSchema is not a valid JSON Schema: ${reason}`);
    }
  }

  private keep(key: string, entry: CompiledEntry): void {
    this.compiled.set(key, entry);
    while (this.compiled.size > this.maxCompiled) {
      const oldest = this.compiled.keys().next();
      if (oldest.done === true) break;
      this.drop(oldest.value);
    }
  }

  private drop(key: string): void {
    const entry = this.compiled.get(key);
    if (entry === undefined) return;
    this.compiled.delete(key);
    if (typeof entry.schema === 'object') entry.ajv.removeSchema(entry.schema);
  }

  private validatorFor(record: KindRecord): ValidateFunction | null {
    if (record.payloadSchema === null || record.payloadSchema === undefined) return null;
    const key = cacheKey(record.tenant, record.kind);
    const hit = this.compiled.get(key);
    if (hit !== undefined && hit.version === record.updatedAt) {
      this.compiled.delete(key);
      this.compiled.set(key, hit);
      return hit.validate;
    }
    let fresh: { validate: ValidateFunction; ajv: Ajv; schema: object | boolean };
    try {
      fresh = this.compileFresh(record.payloadSchema);
    } catch {
      // Stored before these checks or written by hand: refuse every payload rather than accept unchecked ones.
      return REFUSE_ALL;
    }
    this.drop(key);
    this.keep(key, { version: record.updatedAt, ...fresh });
    return fresh.validate;
  }

  private async load(tenant: string): Promise<TenantKinds> {
    const records = await this.store.kindList({ tenant });
    const byName = new Map<string, ResolvedKind>();
    let smallest: number | null = null;
    let smallestCheckpoint: number | null = null;
    for (const record of records) {
      byName.set(record.kind, { record, validate: this.validatorFor(record) });
      smallest = smallest === null ? record.maxResultBytes : Math.min(smallest, record.maxResultBytes);
      smallestCheckpoint = smallestCheckpoint === null ? record.maxCheckpointBytes : Math.min(smallestCheckpoint, record.maxCheckpointBytes);
    }
    const kinds: TenantKinds = { byName, smallestMaxResultBytes: smallest, smallestMaxCheckpointBytes: smallestCheckpoint };
    if (this.cacheMs > 0) {
      const now = performance.now();
      if (this.tenants.size >= MAX_TENANTS) for (const [name, entry] of this.tenants) if (entry.expiresAt <= now) this.tenants.delete(name);
      if (this.tenants.size >= MAX_TENANTS) this.tenants.clear();
      this.tenants.set(tenant, { kinds, expiresAt: now + this.cacheMs });
    }
    return kinds;
  }
}

function cacheKey(tenant: string, kind: string): string {
  return `${tenant}\u0000${kind}`;
}

const REFUSE_ALL: ValidateFunction = payloadAjv().compile(false);

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
