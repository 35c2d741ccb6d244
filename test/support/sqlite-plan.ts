/**
 * SQLite's EXPLAIN QUERY PLAN of one statement, as the cost tests read it: the
 * plan's lines (`SEARCH jobs USING INDEX …`, `SCAN jobs`) joined by newlines.
 */

import type Database from 'better-sqlite3';

export function sqlitePlan(db: Database.Database, sql: string, bindings: Record<string, unknown>): string {
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(bindings) as { detail: string }[]).map((row) => row.detail).join('\n');
}
