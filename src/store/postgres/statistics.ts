/**
 * When the planner's statistics of a queue table are stale. The store does
 * not lean on them for its plans: its connections price sequential scans out
 * (PLANNER_SETTINGS, database.ts), so a plan made on a nearly empty table
 * goes by the indexes a large one needs, and the lease walks job_ready by
 * index whatever the statistics say. They still steer the planner's other
 * choices, so on a server whose autovacuum is off, retention.ts's upkeep
 * analyzes a table once it has changed by this rule (at most once a minute).
 * Every ANALYZE makes each connection plan again every statement that reads
 * the table, so the store runs none on its hot path.
 */

/** PostgreSQL autovacuum's rule: `changed` rows since the last ANALYZE of a table of `rows` make its statistics stale. */
export function statisticsStale(changed: number, rows: number): boolean {
  return changed > 50 + 0.1 * rows;
}
