/**
 * What a group of store calls writes to a SQLite file (bench/storage-cost.ts):
 * the WAL frames it appends (each a page of the file plus 24 bytes; one
 * commit writes each page it dirtied once), the B-tree each of those pages
 * belongs to (the `dbstat` virtual table, which better-sqlite3's SQLite is
 * built with), and the rows and index entries it wrote, from a snapshot of
 * every table taken before the group on a second connection.
 *
 * Index entries follow SQLite's rule for a row it writes: an INSERT adds an
 * entry to every index whose partial predicate the new row satisfies, a
 * DELETE removes one from every index the old row was in, and an UPDATE
 * rewrites an index only when a column of its key or predicate changes (the
 * old entry out if the old row was in, the new one in if the new row is).
 * The counter triggers write the same few counter rows again for every job,
 * so their writes are counted from the triggers that fired (a row trigger
 * whose WHEN holds), times the writes in each trigger's body.
 *
 * The store's connection runs with `wal_autocheckpoint = 0` while measured,
 * and the WAL is truncated before each group, so the -wal file holds exactly
 * the group's frames.
 */

import Database from 'better-sqlite3';
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import type { CostProbe, GroupCost } from './storage-cost-probe.js';

type Db = Database.Database;

interface TableInfo {
  readonly name: string;
  /** A WITHOUT ROWID table's primary key columns; empty for a rowid table. */
  readonly pk: readonly string[];
  readonly columns: readonly string[];
}

interface IndexInfo {
  readonly name: string;
  readonly table: string;
  readonly columns: readonly string[];
  readonly predicate: string;
}

interface TriggerInfo {
  readonly name: string;
  readonly table: string;
  readonly event: 'INSERT' | 'UPDATE' | 'DELETE';
  readonly when: string | null;
  /** The tables its body writes, once per statement of the body. */
  readonly writes: readonly string[];
}

const quote = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/** How a row of `table` is identified, as text: its rowid, or a json_array of its primary key; `alias` qualifies the columns. */
function keyOf(table: TableInfo, alias = ''): string {
  const at = alias === '' ? '' : `${alias}.`;
  return table.pk.length === 0 ? `CAST(${at}rowid AS TEXT)` : `json_array(${table.pk.map((c) => `${at}${c}`).join(', ')})`;
}

function readSchema(db: Db): { tables: TableInfo[]; indexes: IndexInfo[]; triggers: TriggerInfo[] } {
  const tableRows = db.prepare(`SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite_%'`).all() as {
    name: string;
    wr: number;
  }[];
  const tables = tableRows.map(({ name, wr }): TableInfo => {
    const info = db.prepare(`SELECT name, pk FROM pragma_table_info(?) ORDER BY cid`).all(name) as { name: string; pk: number }[];
    const pk = info
      .filter((c) => c.pk > 0)
      .sort((a, b) => a.pk - b.pk)
      .map((c) => quote(c.name));
    return { name, pk: wr === 1 ? pk : [], columns: info.map((c) => c.name) };
  });
  const indexes: IndexInfo[] = [];
  for (const table of tables) {
    for (const { name } of db.prepare(`SELECT name FROM pragma_index_list(?)`).all(table.name) as { name: string }[]) {
      const sql = (db.prepare(`SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?`).pluck().get(name) as string | null) ?? '';
      const columns = (db.prepare(`SELECT name FROM pragma_index_xinfo(?) WHERE key = 1 AND cid >= 0`).all(name) as { name: string }[]).map((c) => c.name);
      // A WITHOUT ROWID table's primary key is the table's own B-tree, not an index.
      if (
        name.startsWith('sqlite_autoindex_') &&
        table.pk.length > 0 &&
        db.prepare(`SELECT origin FROM pragma_index_list(?) WHERE name = ?`).pluck().get(table.name, name) === 'pk'
      )
        continue;
      indexes.push({ name, table: table.name, columns, predicate: /\bWHERE\b([\s\S]*)$/i.exec(sql)?.[1]?.trim() ?? '1' });
    }
  }
  const triggerRows = db.prepare(`SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'`).all() as {
    name: string;
    tbl_name: string;
    sql: string;
  }[];
  const triggers = triggerRows.map(({ name, tbl_name, sql }): TriggerInfo => {
    const event = (/\b(?:AFTER|BEFORE)\s+(INSERT|UPDATE|DELETE)\b/i.exec(sql)?.[1]?.toUpperCase() ?? 'UPDATE') as TriggerInfo['event'];
    const when = /\bWHEN\b([\s\S]*?)\bBEGIN\b/i.exec(sql)?.[1]?.trim() ?? null;
    const body = sql.slice(sql.search(/\bBEGIN\b/i));
    const writes = [...body.matchAll(/\b(?:INSERT\s+INTO|UPDATE)\s+(\w+)/gi)].map((m) => m[1] ?? '').filter((t) => t !== '' && !/^(SET|OF)$/i.test(t));
    return { name, table: tbl_name, event, when, writes };
  });
  return { tables, indexes, triggers };
}

/** The frames of the -wal file: the page number of each and whether it ends a commit. */
function walFrames(path: string): { pageSize: number; frames: { page: number; commit: boolean }[] } {
  const size = statSync(path, { throwIfNoEntry: false })?.size ?? 0;
  if (size < 32) return { pageSize: 0, frames: [] };
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(32);
    readSync(fd, header, 0, 32, 0);
    const pageSize = header.readUInt32BE(8);
    const salt = header.readBigUInt64BE(16);
    const frames: { page: number; commit: boolean }[] = [];
    const frameHeader = Buffer.alloc(24);
    for (let at = 32; at + 24 + pageSize <= size; at += 24 + pageSize) {
      readSync(fd, frameHeader, 0, 24, at);
      if (frameHeader.readBigUInt64BE(8) !== salt) break;
      frames.push({ page: frameHeader.readUInt32BE(0), commit: frameHeader.readUInt32BE(4) !== 0 });
    }
    return { pageSize, frames };
  } finally {
    closeSync(fd);
  }
}

const add = (map: Map<string, number>, key: string, n: number): void => {
  if (n !== 0) map.set(key, (map.get(key) ?? 0) + n);
};

export class SqliteCostProbe implements CostProbe {
  private readonly db: Db;
  private readonly schema: ReturnType<typeof readSchema>;

  /** `store`: the store's own connection, which commits what is measured. */
  constructor(
    private readonly path: string,
    private readonly store: Db,
  ) {
    this.db = new Database(path);
    this.db.pragma('temp_store = MEMORY');
    this.store.pragma('wal_autocheckpoint = 0');
    this.schema = readSchema(this.db);
  }

  /** Snapshots every table and empties the WAL; `measure` then reads what was written since. */
  async before(): Promise<void> {
    for (const table of this.schema.tables) {
      this.db.exec(`DROP TABLE IF EXISTS temp.${quote(`snap_${table.name}`)}`);
      this.db.exec(`CREATE TEMP TABLE ${quote(`snap_${table.name}`)} AS SELECT ${keyOf(table)} AS __k, * FROM main.${quote(table.name)}`);
    }
    const [result] = this.store.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    if (result?.busy !== 0) throw new Error('the WAL could not be truncated before a measured group');
  }

  async measure(): Promise<GroupCost> {
    const { pageSize, frames } = walFrames(`${this.path}-wal`);
    const owners = new Map<number, string>();
    for (const row of this.db.prepare(`SELECT name, pageno FROM dbstat`).all() as { name: string; pageno: number }[]) owners.set(row.pageno, row.name);
    const pagesBy = new Map<string, number>();
    let commits = 0;
    let pages = 0;
    let seen = new Set<number>();
    for (const frame of frames) {
      if (!seen.has(frame.page)) {
        seen.add(frame.page);
        pages++;
        add(pagesBy, owners.get(frame.page) ?? (frame.page === 1 ? 'sqlite_schema' : 'other (pointer map, free list)'), 1);
      }
      if (frame.commit) {
        commits++;
        seen = new Set();
      }
    }
    const rowWrites = new Map<string, number>();
    const entryWrites = new Map<string, number>();
    const triggers = new Map<string, number>();
    for (const table of this.schema.tables) this.diffTable(table, rowWrites, entryWrites, triggers);
    return { commits, walBytes: frames.length === 0 ? 0 : 32 + frames.length * (24 + pageSize), pages, pagesBy, rowWrites, entryWrites, triggers };
  }

  private diffTable(table: TableInfo, rowWrites: Map<string, number>, entryWrites: Map<string, number>, triggers: Map<string, number>): void {
    const snap = `temp.${quote(`snap_${table.name}`)}`;
    const live = `main.${quote(table.name)}`;
    const columns = table.columns.map(quote);
    const rowOf = (source: string): Map<string, string> =>
      new Map(
        (
          this.db
            .prepare(`SELECT ${source === snap ? '__k' : keyOf(table)} AS k, json_array(${columns.map((c) => `quote(${c})`).join(', ')}) AS r FROM ${source}`)
            .all() as { k: unknown; r: string }[]
        ).map((row) => [String(row.k), row.r]),
      );
    const before = rowOf(snap);
    const after = rowOf(live);
    const inserted = [...after.keys()].filter((k) => !before.has(k));
    const deleted = [...before.keys()].filter((k) => !after.has(k));
    const updated = [...after.keys()].filter((k) => before.has(k) && before.get(k) !== after.get(k));
    add(rowWrites, table.name, inserted.length + deleted.length + updated.length);
    if (inserted.length + deleted.length + updated.length === 0) return;
    const changed = JSON.stringify([...inserted, ...deleted, ...updated]);
    const keyIn = (expression: string): string => `${expression} IN (SELECT value FROM json_each(?))`;
    for (const index of this.schema.indexes.filter((i) => i.table === table.name)) {
      const entries = (source: string, key: string): Map<string, string | null> =>
        new Map(
          (
            this.db
              .prepare(
                `SELECT ${key} AS k, CASE WHEN (${index.predicate}) THEN json_array(${index.columns.map(quote).join(', ')}) END AS e FROM ${source} WHERE ${keyIn(key)}`,
              )
              .all(changed) as { k: unknown; e: string | null }[]
          ).map((row) => [String(row.k), row.e]),
        );
      const old = entries(snap, '__k');
      const now = entries(live, keyOf(table));
      let writes = 0;
      for (const k of [...inserted, ...deleted, ...updated]) {
        const was = old.get(k) ?? null;
        const is = now.get(k) ?? null;
        if (was !== is) writes += (was === null ? 0 : 1) + (is === null ? 0 : 1);
      }
      add(entryWrites, index.name, writes);
    }
    for (const trigger of this.schema.triggers.filter((t) => t.table === table.name)) {
      const keys = JSON.stringify(trigger.event === 'INSERT' ? inserted : trigger.event === 'DELETE' ? deleted : updated);
      const when = (trigger.when ?? '1').replace(/\bOLD\./g, 'o.').replace(/\bNEW\./g, 'n.');
      const sql =
        trigger.event === 'INSERT'
          ? `SELECT count(*) FROM ${live} n WHERE ${keyIn(keyOf(table, 'n'))} AND (${when})`
          : trigger.event === 'DELETE'
            ? `SELECT count(*) FROM ${snap} o WHERE ${keyIn('o.__k')} AND (${when})`
            : `SELECT count(*) FROM ${snap} o JOIN ${live} n ON ${table.pk.length === 0 ? 'n.rowid = CAST(o.__k AS INTEGER)' : `${keyOf(table, 'n')} = o.__k`}
                WHERE ${keyIn('o.__k')} AND (${when})`;
      const fired = this.db.prepare(sql).pluck().get(keys) as number;
      if (fired === 0) continue;
      add(triggers, trigger.name, fired);
      // The counter rows take one write per statement of the body, though the same few rows change.
      for (const target of trigger.writes) add(rowWrites, `${target} (by trigger)`, fired);
    }
  }

  /** The indexes a statement opens for writing (its OpenWrite cursors), from EXPLAIN. */
  indexesWritten(sql: string): string[] {
    const roots = new Map(
      (this.db.prepare(`SELECT rootpage, name FROM sqlite_master WHERE type IN ('index', 'table')`).all() as { rootpage: number; name: string }[]).map((r) => [
        r.rootpage,
        r.name,
      ]),
    );
    if (!this.registered) {
      this.db.function('lh_token', { deterministic: false }, () => 'token');
      this.registered = true;
    }
    // EXPLAIN compiles without running, but better-sqlite3 still wants every parameter bound.
    const named = Object.fromEntries([...sql.matchAll(/@(\w+)/g)].map((m) => [m[1], null]));
    const positional = Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => null);
    const explain = this.db.prepare(`EXPLAIN ${sql}`);
    const program = (Object.keys(named).length > 0 ? explain.all(named) : explain.all(...positional)) as { opcode: string; p2: number }[];
    return [...new Set(program.filter((op) => op.opcode === 'OpenWrite').map((op) => roots.get(op.p2) ?? `page ${op.p2}`))];
  }

  private registered = false;

  async close(): Promise<void> {
    this.store.pragma('wal_autocheckpoint = 1000');
    this.db.close();
  }
}
