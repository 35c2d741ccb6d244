/**
 * The lease statements, prepared on first use with their LIMIT written into
 * the text. SQLite's planner reads the value of a bound LIMIT (better-sqlite3
 * builds SQLite with STAT4), so binding @max marks the prepared statement
 * expired and every run prepared it again: about 0.25–0.4 ms a lease on a
 * 2-core VM, several times what the lease itself costs (bench/RESULTS.md, 2026-12-01).
 * One statement per (kind count, max) pair, the most recently used KEPT of
 * them, so a caller that varies max pays a prepare per new value and no more
 * memory than KEPT statements.
 *
 * The restricted path's capped statement keeps its caps bound (a cap per kind
 * would multiply the statements); only tenants with paused or limited kinds
 * take it.
 */

import type { Database as Db, Statement } from 'better-sqlite3';
import { jobLeaseKindsSql, jobLeaseTenantSql, withLeaseMax } from './queries.js';

/** What a lease statement binds, shared by the plain lease (lease.ts) and the fair one (group-lease.ts). */
export interface LeaseBindings {
  readonly tenant: string;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly max: number;
  readonly now: number;
}

/** How many unrestricted lease statements are kept prepared. */
const KEPT = 256;

export class LeaseStatements {
  private readonly unrestricted = new Map<string, Statement>();
  private readonly capped = new Map<number, Statement>();

  constructor(private readonly db: Db) {}

  /** The unrestricted lease of at most `max` jobs: of `kindCount` kinds bound as @k0, @k1, …, or the tenant-wide walk (kindCount 0). */
  lease(kindCount: number, max: number): Statement {
    const key = `${kindCount}/${max}`;
    const found = this.unrestricted.get(key);
    if (found !== undefined) {
      // Most recently used last: the first key is the one to drop.
      this.unrestricted.delete(key);
      this.unrestricted.set(key, found);
      return found;
    }
    const statement = this.db.prepare(withLeaseMax(kindCount === 0 ? jobLeaseTenantSql : jobLeaseKindsSql(kindCount), max));
    this.unrestricted.set(key, statement);
    if (this.unrestricted.size > KEPT) {
      const oldest = this.unrestricted.keys().next().value;
      if (oldest !== undefined) this.unrestricted.delete(oldest);
    }
    return statement;
  }

  /** The restricted path's lease of `kindCount` kinds with a cap each (jobLeaseKindsSql(n, true)). */
  cappedLease(kindCount: number): Statement {
    let statement = this.capped.get(kindCount);
    if (statement === undefined) {
      statement = this.db.prepare(jobLeaseKindsSql(kindCount, true));
      this.capped.set(kindCount, statement);
    }
    return statement;
  }
}
