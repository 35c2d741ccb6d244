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
import type { ErrorObject, ValidateFunction } from 'ajv';
import { canonicalJson } from '../core/canonical-json.js';
import { LeaseholdError } from '../core/errors.js';
import type { KindRecord, Store } from '../store/store.js';
import { checkSchemaLimits } from './schema-limits.js';
import { SchemaCompileError, SchemaCompiler } from './schema-compiler.js';
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
  /** The smallest maxCheckpointBytes of any kind (worker-writes.ts). */
  readonly smallestMaxCheckpointBytes: number | null;
}

/** Compiled validators kept at once (least recently used first out); each tenant/kind holds at most one. */
const MAX_COMPILED = 4_096;
const MAX_TENANTS = 10_000;
/**
 * How long one schema may take to compile in the worker. A schema at the
 * 64 KiB cap took 1.7–3.4 s on a shared 2-core machine (2026-12-01); the
 * bound leaves room for load, since refusing a legal schema because the host
 * is busy would be worse, and the wait holds no other tenant's request.
 */
const COMPILE_TIMEOUT_MS = 10_000;

export interface KindRegistryLimits {
  /** Largest payload schema, in bytes of canonical JSON. */
  readonly maxSchemaBytes: number;
  /** Validators kept compiled at once. */
  readonly maxCompiled?: number;
  /** How long one schema may take to compile before it is refused. */
  readonly compileTimeoutMs?: number;
}

interface CompiledEntry {
  /** The registration the validator was compiled for (the record's updatedAt). */
  readonly version: number;
  readonly validate: ValidateFunction;
}

export class KindRegistry {
  /** Compiles in a worker thread: each validator is standalone code, freed with its entry (no shared Ajv keeps it). */
  private readonly compiler: SchemaCompiler;
  /** By tenant and kind, in least-recently-used order: replacing a kind replaces its entry. */
  private readonly compiled = new Map<string, CompiledEntry>();
  private readonly tenants = new Map<string, { readonly kinds: TenantKinds; readonly expiresAt: number }>();
  private readonly loading = new Map<string, Promise<TenantKinds>>();
  private readonly maxCompiled: number;

  constructor(
    private readonly store: Store,
    private readonly cacheMs: number,
    private readonly limits: KindRegistryLimits = { maxSchemaBytes: 64 * 1024 },
  ) {
    this.maxCompiled = limits.maxCompiled ?? MAX_COMPILED;
    this.compiler = new SchemaCompiler(limits.compileTimeoutMs ?? COMPILE_TIMEOUT_MS);
  }

  /** Stops the compiler's worker thread. */
  close(): Promise<void> {
    return this.compiler.close();
  }

  /**
   * The tenant's kinds as last loaded, without waiting (an enqueue inside an application's SQLite
   * transaction): an expired entry is still answered and reloaded in the background; undefined when never loaded.
   */
  loadedForTenant(tenant: string): TenantKinds | undefined {
    const hit = this.tenants.get(tenant);
    if (hit === undefined || hit.expiresAt <= performance.now()) void this.forTenant(tenant).catch(() => undefined);
    return hit?.kinds;
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
   * (not a usable JSON Schema, a pattern RE2 refuses, too complex to compile
   * in time) or 413 (over the size limit). The validator is not kept:
   * `remember` keeps it once stored.
   */
  async compile(schema: unknown): Promise<ValidateFunction> {
    if (typeof schema !== 'boolean' && (schema === null || typeof schema !== 'object' || Array.isArray(schema))) {
      throw new LeaseholdError('invalid_request', 'body/payloadSchema must be a JSON Schema (an object or a boolean)');
    }
    const text = canonicalJson(schema);
    // Each step takes up to about 10 ms of the event loop for a 64 KiB schema: other requests run between them.
    await new Promise((resolve) => setImmediate(resolve));
    checkSchemaLimits(schema, text, this.limits.maxSchemaBytes);
    try {
      return await this.compiler.compile(schema as object | boolean);
    } catch (error) {
      if (error instanceof SchemaCompileError && error.timedOut) throw new LeaseholdError('invalid_request', `body/payloadSchema is ${error.message}`);
      const reason = error instanceof Error ? error.message.slice(0, 300) : 'invalid schema';
      throw new LeaseholdError('invalid_request', `body/payloadSchema is not a valid JSON Schema: ${reason}`);
    }
  }

  /** Keeps the validator compiled for a just-stored registration, replacing the kind's previous one. */
  remember(record: KindRecord, validate: ValidateFunction | null): void {
    const key = cacheKey(record.tenant, record.kind);
    this.drop(key);
    if (validate === null) return;
    this.keep(key, { version: record.updatedAt, validate });
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
  }

  private async validatorFor(record: KindRecord): Promise<ValidateFunction | null> {
    if (record.payloadSchema === null || record.payloadSchema === undefined) return null;
    const key = cacheKey(record.tenant, record.kind);
    const hit = this.compiled.get(key);
    if (hit !== undefined && hit.version === record.updatedAt) {
      this.compiled.delete(key);
      this.compiled.set(key, hit);
      return hit.validate;
    }
    let validate: ValidateFunction;
    try {
      validate = await this.compile(record.payloadSchema);
    } catch (error) {
      // Stored before these checks, written by hand, or too complex: refuse every payload rather than accept unchecked
      // ones, and keep the refusal for this version so each enqueue does not compile it again.
      validate = refuseAll(error instanceof LeaseholdError ? error.message : 'body/payloadSchema is not a usable JSON Schema');
    }
    this.drop(key);
    this.keep(key, { version: record.updatedAt, validate });
    return validate;
  }

  private async load(tenant: string): Promise<TenantKinds> {
    const records = await this.store.kindList({ tenant });
    const byName = new Map<string, ResolvedKind>();
    let smallest: number | null = null;
    let smallestCheckpoint: number | null = null;
    for (const record of records) {
      byName.set(record.kind, { record, validate: await this.validatorFor(record) });
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

/** A validator that refuses every payload with a message naming why the kind's schema cannot check it. */
function refuseAll(reason: string): ValidateFunction {
  const message = `cannot be checked: the kind's payload schema could not be compiled (${reason.replace(/^body\/payloadSchema (is )?/, '')})`;
  const errors: ErrorObject[] = [{ instancePath: '', schemaPath: '#', keyword: 'false schema', params: {}, message }];
  return Object.assign((_data: unknown): _data is unknown => false, { errors, schema: false, schemaEnv: REFUSE_ALL.schemaEnv });
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
