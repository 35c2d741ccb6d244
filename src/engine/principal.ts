/**
 * Who calls an engine operation: a key's tenant, user and role. The HTTP
 * front takes it from the API key (coordinator/auth.ts); a library Queue is
 * its tenant's admin, or a producer when it was opened with an owner.
 */

import type { Role } from '../core/states.js';
import type { JobScope } from '../store/store.js';

export interface Principal {
  readonly keyId: string;
  readonly tenant: string;
  readonly user: string;
  readonly role: Role;
}

/** Which jobs a principal can see: its tenant, and only its own jobs for producers. */
export function scopeOf(principal: Principal): JobScope {
  return principal.role === 'producer' ? { tenant: principal.tenant, owner: principal.user } : { tenant: principal.tenant };
}
