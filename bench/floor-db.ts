/**
 * What every candidate of `npm run floor` offers the driver (sql-floor.ts),
 * whatever its backend (floor-sqlite.ts, floor-postgres.ts): one tenant, one
 * kind, no-op jobs with a small payload, and a call per transaction.
 */

import type Database from 'better-sqlite3';

export const TENANT = 'bench';
export const KIND = 'noop';
export const LEASE_MS = 600_000;

export interface NewJob {
  readonly n: number;
}

export interface Leased {
  readonly seq: number;
  readonly id: string;
  readonly token: string;
}

/** One candidate on an open database: each call is one durable transaction. */
export interface FloorDb {
  /** The enqueue of `jobs.length` single requests in one commit: each job its own statements, as the group commit runs them. */
  enqueue(jobs: readonly NewJob[]): void | Promise<void>;
  /** One batch request (enqueueMany) in one commit. */
  enqueueBatch(jobs: readonly NewJob[]): void | Promise<void>;
  lease(max: number): Leased[] | Promise<Leased[]>;
  complete(jobs: readonly Leased[]): void | Promise<void>;
  /** The completion of `jobs` and the next lease in one commit (issue 28's "a completion and the next lease in one transaction"). */
  completeAndLease(jobs: readonly Leased[], max: number): Leased[] | Promise<Leased[]>;
  close(): void | Promise<void>;
  /** SQLite: the connection that commits, for the WAL count (storage-cost-sqlite.ts). */
  readonly connection?: Database.Database;
  /** PostgreSQL: the server process of this connection, whose CPU time the floor adds to its own. */
  readonly serverPid?: number;
}

export function payloadOf(job: NewJob): string {
  return `{"n":${job.n}}`;
}
