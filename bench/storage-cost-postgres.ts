/**
 * What a group of store calls writes to PostgreSQL (bench/storage-cost.ts),
 * read back from the WAL itself with pg_walinspect (a contrib extension of
 * PostgreSQL 15, created in a schema of its own for the run and dropped with
 * it; it needs a superuser or pg_read_server_files). Only records that touch
 * the measured schema's relations count, with the commit records of their
 * transactions, so other sessions writing to the same server do not:
 *
 *   heap records      rows inserted, updated (HOT or not), deleted, locked
 *   Btree records     index entries inserted (INSERT_LEAF, INSERT_POST, and
 *                     the new entry a leaf split places), by index
 *   block references  pages written, counted once per transaction
 *   record lengths    WAL bytes, with the full-page images apart: those come
 *                     with the first change to a page after a checkpoint, so
 *                     they depend on when the server last checkpointed
 *
 * The counter triggers are statement triggers here: each fires once per
 * statement that writes its table, which this counts once per transaction
 * and event (every store call measured is one statement per table).
 */

import pg from 'pg';
import { randomBytes } from 'node:crypto';
import type { CostProbe, GroupCost } from './storage-cost-probe.js';

interface WalRecord {
  readonly xid: string;
  readonly resource_manager: string;
  readonly record_type: string;
  readonly record_length: number;
  readonly fpi_length: number;
  readonly description: string;
  readonly block_ref: string | null;
}

/** Bits of pg_trigger.tgtype. */
const TRIGGER_ROW = 1;
const TRIGGER_INSERT = 4;
const TRIGGER_DELETE = 8;
const TRIGGER_UPDATE = 16;

const add = (map: Map<string, number>, key: string, n: number): void => {
  if (n !== 0) map.set(key, (map.get(key) ?? 0) + n);
};

function heapEvent(type: string): 'INSERT' | 'UPDATE' | 'DELETE' | null {
  if (type.startsWith('INSERT') || type.startsWith('MULTI_INSERT')) return 'INSERT';
  if (type.startsWith('UPDATE') || type.startsWith('HOT_UPDATE')) return 'UPDATE';
  if (type.startsWith('DELETE')) return 'DELETE';
  return null;
}

export class PostgresCostProbe implements CostProbe {
  private start = '0/0';
  private relations = new Map<string, { readonly name: string; readonly kind: 'table' | 'index' | 'toast' }>();
  private triggers: { readonly name: string; readonly table: string; readonly type: number }[] = [];

  private constructor(
    private readonly client: pg.Client,
    private readonly schema: string,
    private readonly inspect: string,
    private readonly ownsInspect: boolean,
  ) {}

  /** `schema`: the store's schema, already migrated. */
  static async open(connectionString: string, schema: string): Promise<PostgresCostProbe> {
    const client = new pg.Client({ connectionString });
    await client.connect();
    const found = await client.query<{ schema: string }>(
      `SELECT n.nspname AS schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_walinspect'`,
    );
    let inspect = found.rows[0]?.schema;
    const ownsInspect = inspect === undefined;
    if (inspect === undefined) {
      inspect = `cost_walinspect_${randomBytes(4).toString('hex')}`;
      await client.query(`CREATE SCHEMA ${inspect}`);
      await client.query(`CREATE EXTENSION pg_walinspect SCHEMA ${inspect}`);
    }
    const probe = new PostgresCostProbe(client, schema, inspect, ownsInspect);
    await probe.readRelations();
    return probe;
  }

  private async readRelations(): Promise<void> {
    const rows = await this.client.query<{ name: string; kind: string; node: string }>(
      `SELECT c.relname AS name, c.relkind AS kind, pg_relation_filenode(c.oid)::text AS node
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')
       UNION ALL
       SELECT 'toast of ' || c.relname, 't', pg_relation_filenode(c.reltoastrelid)::text
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.reltoastrelid <> 0
       UNION ALL
       SELECT 'toast index of ' || c.relname, 't', pg_relation_filenode(t.reltoastrelid)::text
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid
        WHERE n.nspname = $1 AND t.reltoastrelid <> 0`,
      [this.schema],
    );
    this.relations = new Map(
      rows.rows.filter((r) => r.node !== null).map((r) => [r.node, { name: r.name, kind: r.kind === 'r' ? 'table' : r.kind === 'i' ? 'index' : 'toast' }]),
    );
    const triggers = await this.client.query<{ name: string; table: string; type: number }>(
      // Of the internal triggers only the foreign key checks of an insert: the others are skipped while no key changes.
      `SELECT CASE WHEN t.tgisinternal THEN 'foreign key check on ' || c.relname ELSE t.tgname END AS name, c.relname AS table, t.tgtype AS type
         FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND (NOT t.tgisinternal OR t.tgfoid = 'pg_catalog."RI_FKey_check_ins"'::regproc)`,
      [this.schema],
    );
    this.triggers = triggers.rows;
  }

  async before(): Promise<void> {
    this.start = (await this.client.query<{ lsn: string }>(`SELECT pg_current_wal_insert_lsn()::text AS lsn`)).rows[0]?.lsn ?? '0/0';
  }

  async measure(): Promise<GroupCost> {
    // Every measured commit returned after its flush (synchronous_commit = on), so the flush LSN covers them.
    const end = (await this.client.query<{ lsn: string }>(`SELECT pg_current_wal_flush_lsn()::text AS lsn`)).rows[0]?.lsn ?? '0/0';
    const records = (
      await this.client.query<WalRecord>(
        `SELECT xid::text AS xid, resource_manager, record_type, record_length, fpi_length, description, block_ref
           FROM ${this.inspect}.pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)`,
        [this.start, end],
      )
    ).rows;
    const ours = (record: WalRecord): { node: string; block: string }[] =>
      [...(record.block_ref ?? '').matchAll(/rel \d+\/\d+\/(\d+)(?: fork (\w+))? blk (\d+)/g)]
        .filter((m) => (m[2] ?? 'main') === 'main' && this.relations.has(m[1] ?? ''))
        .map((m) => ({ node: m[1] ?? '', block: m[3] ?? '' }));
    const xids = new Set(records.filter((r) => ours(r).length > 0 && r.xid !== '0').map((r) => r.xid));
    let walBytes = 0;
    let fpiBytes = 0;
    let commits = 0;
    const pagesBy = new Map<string, number>();
    const rowWrites = new Map<string, number>();
    const entryWrites = new Map<string, number>();
    const triggers = new Map<string, number>();
    const blocksOf = new Map<string, Set<string>>();
    // Per transaction, rows written per table and event: a row trigger fires per row, a statement trigger once.
    const eventsOf = new Map<string, Map<string, number>>();
    for (const record of records) {
      const blocks = ours(record);
      if (blocks.length === 0 && !xids.has(record.xid)) continue;
      walBytes += record.record_length;
      fpiBytes += record.fpi_length;
      if (record.resource_manager === 'Transaction' && record.record_type.startsWith('COMMIT')) commits++;
      const seen = blocksOf.get(record.xid) ?? new Set<string>();
      blocksOf.set(record.xid, seen);
      for (const { node, block } of blocks) {
        const key = `${node}/${block}`;
        if (seen.has(key)) continue;
        seen.add(key);
        add(pagesBy, this.relations.get(node)?.name ?? node, 1);
      }
      const first = blocks[0];
      const relation = first === undefined ? undefined : this.relations.get(first.node);
      if (relation === undefined) continue;
      if (record.resource_manager === 'Heap' || record.resource_manager === 'Heap2') {
        const event = heapEvent(record.record_type);
        if (event === null) {
          if (record.record_type.startsWith('LOCK')) add(rowWrites, `${relation.name} (row locks)`, 1);
          continue;
        }
        const counted = /^(job_counters|tenant_sums)$/.test(relation.name) ? `${relation.name} (counters)` : relation.name;
        add(rowWrites, counted, record.record_type.startsWith('MULTI_INSERT') ? Number(/ntuples:? (\d+)/.exec(record.description)?.[1] ?? 1) : 1);
        const events = eventsOf.get(record.xid) ?? new Map<string, number>();
        eventsOf.set(record.xid, events);
        add(events, `${relation.name}\u0000${event}`, 1);
      } else if (record.resource_manager === 'Btree') {
        const leafSplit = record.record_type.startsWith('SPLIT') && /level 0\b/.test(record.description);
        if (record.record_type === 'INSERT_LEAF' || record.record_type === 'INSERT_POST' || leafSplit) add(entryWrites, relation.name, 1);
      }
    }
    for (const events of eventsOf.values()) {
      for (const trigger of this.triggers) {
        const bit = (event: string): number => (event === 'INSERT' ? TRIGGER_INSERT : event === 'UPDATE' ? TRIGGER_UPDATE : TRIGGER_DELETE);
        for (const [entry, rows] of events) {
          const [table, event] = entry.split('\u0000');
          const perRow = (trigger.type & TRIGGER_ROW) !== 0;
          if (table === trigger.table && event !== undefined && (trigger.type & bit(event)) !== 0) add(triggers, trigger.name, perRow ? rows : 1);
        }
      }
    }
    const pages = [...blocksOf.values()].reduce((sum, blocks) => sum + blocks.size, 0);
    return { commits, walBytes, fpiBytes, pages, pagesBy, rowWrites, entryWrites, triggers };
  }

  async close(): Promise<void> {
    if (this.ownsInspect) await this.client.query(`DROP SCHEMA ${this.inspect} CASCADE`);
    await this.client.end();
  }
}
