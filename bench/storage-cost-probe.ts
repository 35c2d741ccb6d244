/**
 * What bench/storage-cost.ts reads after a group of store calls, whatever the
 * backend: commits, WAL, pages dirtied, and the rows, index entries and
 * trigger firings behind them. Each backend's probe fills it its own way
 * (storage-cost-sqlite.ts, storage-cost-postgres.ts).
 */

export interface GroupCost {
  readonly commits: number;
  /** WAL appended by the group: SQLite's frames (a page and 24 bytes each), PostgreSQL's records. */
  readonly walBytes: number;
  /** PostgreSQL: the part of walBytes that is full-page images (the first change to a page after a checkpoint). */
  readonly fpiBytes?: number;
  /** Pages written, each page counted once per commit (SQLite) or per transaction (PostgreSQL). */
  readonly pages: number;
  readonly pagesBy: ReadonlyMap<string, number>;
  /** Rows inserted, updated or deleted, by table; `name (by trigger)` for rows a SQLite trigger wrote, `name (counters)` for PostgreSQL's counter rows. */
  readonly rowWrites: ReadonlyMap<string, number>;
  /** Index entries inserted or deleted, by index (a table's own B-tree is in rowWrites). */
  readonly entryWrites: ReadonlyMap<string, number>;
  /** Trigger firings by trigger (SQLite: row triggers whose WHEN held; PostgreSQL: statement triggers). */
  readonly triggers: ReadonlyMap<string, number>;
}

export interface CostProbe {
  /** Marks the start of a measured group. */
  before(): Promise<void>;
  /** What was written since `before`. */
  measure(): Promise<GroupCost>;
  close(): Promise<void>;
}
