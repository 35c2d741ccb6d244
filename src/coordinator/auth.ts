/**
 * Authentication and roles. Every route except the ones marked public needs
 * `Authorization: Bearer <key>`; the key is hashed and looked up in the store
 * (a revoked key is as good as an unknown one). Each route declares the roles
 * it admits in its config; a route that declares none admits only admins, so
 * a forgotten declaration fails closed.
 *
 * Looked-up keys are remembered for `authCacheMs` so that a busy producer does
 * not cost a store read per request; a revocation (possibly written by another
 * process) therefore takes effect within that time. Unknown keys are never
 * remembered. The key itself is never stored in memory beyond the request, and
 * never logged.
 *
 * A route marked `scrapeToken` (GET /metrics) also admits the coordinator's
 * scrape token, when one is configured: compared by hash in constant time,
 * and the request then has no principal (it belongs to no tenant).
 */

import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LeaseholdError } from '../core/errors.js';
import { constantTimeEqual, hashApiKey } from '../core/ids.js';
import type { Role } from '../core/states.js';
import type { ApiKeyRecord, Store } from '../store/store.js';
import type { Principal } from '../engine/principal.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    /** Roles admitted; admins only when absent. */
    roles?: readonly Role[];
    /** No key needed (health check, OpenAPI document). */
    public?: boolean;
    /** The scrape token (metricsToken) is admitted too. */
    scrapeToken?: boolean;
  }
}

const BEARER = /^Bearer +([A-Za-z0-9_\-.~+/=]{1,256})\s*$/i;
const MAX_CACHED_KEYS = 10_000;

export interface AuthOptions {
  readonly store: Store;
  readonly cacheMs: number;
  /** The token GET /metrics admits besides admin keys; null for none. */
  readonly scrapeToken?: string | null;
}

export function installAuth(app: FastifyInstance, options: AuthOptions): void {
  const scrapeTokenHash = options.scrapeToken === undefined || options.scrapeToken === null ? null : hashApiKey(options.scrapeToken);
  const cache = new Map<string, { readonly principal: Principal; readonly expiresAt: number }>();

  async function lookup(keyHash: string): Promise<Principal | null> {
    if (options.cacheMs > 0) {
      const hit = cache.get(keyHash);
      if (hit !== undefined && hit.expiresAt > performance.now()) return hit.principal;
    }
    const record: ApiKeyRecord | null = await options.store.apiKeyFindByHash(keyHash);
    // The index finds the row by the hash of a 192-bit secret, which reveals nothing useful about the key;
    // the stored hash is still compared in constant time before the key is trusted.
    if (record === null || record.revokedAt !== null || !constantTimeEqual(record.keyHash, keyHash)) {
      cache.delete(keyHash);
      return null;
    }
    const principal: Principal = Object.freeze({ keyId: record.id, tenant: record.tenant, user: record.user, role: record.role });
    if (options.cacheMs > 0) {
      if (cache.size >= MAX_CACHED_KEYS) cache.clear();
      cache.set(keyHash, { principal, expiresAt: performance.now() + options.cacheMs });
    }
    return principal;
  }

  app.decorateRequest('principal', null);
  // A refused request is answered before its body is read, and its connection closes: an unread
  // body (or one that never arrives) cannot hold the connection or anything behind it.
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.is404) return;
    const config = request.routeOptions.config;
    if (config.public === true) return;
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? BEARER.exec(header) : null;
    const key = match?.[1];
    if (key === undefined) {
      reply.header('connection', 'close');
      throw new LeaseholdError('unauthorized', 'missing or malformed Authorization header (expected "Bearer <key>")');
    }
    const keyHash = hashApiKey(key);
    if (config.scrapeToken === true && scrapeTokenHash !== null && constantTimeEqual(keyHash, scrapeTokenHash)) return;
    const principal = await lookup(keyHash);
    if (principal === null) {
      reply.header('connection', 'close');
      throw new LeaseholdError('unauthorized', 'invalid API key');
    }
    const roles = config.roles ?? ['admin'];
    if (!roles.includes(principal.role)) {
      reply.header('connection', 'close');
      throw new LeaseholdError('forbidden', `the ${principal.role} role may not call ${request.method} ${request.routeOptions.url ?? ''}`);
    }
    request.principal = principal;
  });
}

/** The principal of an authenticated route (the hook guarantees it). */
export function principalOf(request: FastifyRequest): Principal {
  const principal = request.principal;
  if (principal === null) throw new LeaseholdError('unauthorized', 'not authenticated');
  return principal;
}
