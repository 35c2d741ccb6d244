/**
 * The clock seam. Lease decisions read time from the store's clock (the
 * coordinator host for SQLite, the database server for PostgreSQL); this
 * module is the one place the process clock is read.
 */

export interface Clock {
  now(): number;
}

export const systemClock: Clock = Object.freeze({ now: () => Date.now() });

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  private current: number;
  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}

export function toRfc3339(ms: number): string {
  return new Date(ms).toISOString();
}

export function toRfc3339OrNull(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** Parses an RFC 3339 timestamp with an explicit offset or Z; returns null if it is not one. */
export function parseRfc3339(value: string): number | null {
  if (!/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/.test(value)) return null;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : null;
}
