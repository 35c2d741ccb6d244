/**
 * Query plans of the schedule statements on both backends, over 20,000
 * schedules of 50 tenants (most of them not due) and, on PostgreSQL, analyzed:
 * the due read walks schedules_due from its start to `now` only (never the
 * schedules that are not due, never jobs), the earliest next_at is one index
 * probe, and a tenant's listing seeks its primary key. PostgreSQL runs when
 * DATABASE_URL is set.
 */

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLANNER_SETTINGS } from '../../src/store/postgres/database.js';
import { dropSchema, migrate as migratePg } from '../../src/store/postgres/migrate.js';
import { SCHEDULE_DUE, SCHEDULE_EARLIEST, SCHEDULE_LIST } from '../../src/store/postgres/schedules.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { SCHEDULE_SQL } from '../../src/store/sqlite/schedules.js';

const url = process.env['DATABASE_URL'] ?? '';
const ROWS = `SELECT 't' || (g % 50), 'n' || g, 'o', 'k', 'null', 4, '* * * * *', 'UTC', 'skip', 0, g * 1000, 0, 0`;
const COLUMNS = '(tenant, name, owner, kind, payload, payload_bytes, cron, timezone, overlap, catch_up, next_at, created_at, updated_at)';

describe('SQLite plans of the schedule statements', () => {
  let dir: string;
  let db: Database.Database;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lh-schedule-plans-'));
    const path = join(dir, 'plans.db');
    await SqliteStore.open({ path }).close();
    db = new Database(path);
    db.exec(
      `WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < 20000) INSERT INTO schedules ${COLUMNS} ${ROWS.replace(/g \* 1000/, 'g * 1000')} FROM s`,
    );
    db.exec('ANALYZE');
  });
  afterAll(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const plan = (sql: string, params: Record<string, unknown>): string =>
    (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as { detail: string }[]).map((r) => r.detail).join(' | ');

  it('reads due schedules through schedules_due, bounded by now', () => {
    const text = plan(SCHEDULE_SQL.scheduleDue, { now: 5000, perTenant: 10, limit: 100 });
    expect(text).toMatch(/SEARCH s USING INDEX schedules_due \(next_at>\? AND next_at<\?\)/);
    expect(text).not.toMatch(/SCAN schedules|SCAN s\b|jobs/);
    expect(db.prepare(SCHEDULE_SQL.scheduleDue).all({ now: 5000, perTenant: 10, limit: 100 })).toHaveLength(5);
  });

  it('finds the earliest next_at with one probe of schedules_due, and lists a tenant by its primary key', () => {
    expect(plan(SCHEDULE_SQL.scheduleEarliest, {})).toBe('SEARCH schedules USING COVERING INDEX schedules_due (next_at>?)');
    expect(plan(SCHEDULE_SQL.scheduleList, { tenant: 't1', after: '', limit: 100 })).toBe('SEARCH schedules USING PRIMARY KEY (tenant=? AND name>?)');
  });
});

describe.skipIf(url === '')('PostgreSQL plans of the schedule statements', () => {
  const schema = `lh_splans_${randomBytes(4).toString('hex')}`;
  let client: pg.Client;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: url });
    await client.connect();
    await migratePg(client, schema);
    await client.query(`SET search_path = ${schema}`);
    await client.query(`INSERT INTO schedules ${COLUMNS} ${ROWS.replace("'null'", "'null'::json")} FROM generate_series(1, 20000) g`);
    await client.query('ANALYZE schedules');
  }, 60_000);
  afterAll(async () => {
    await client.end();
    await dropSchema(url, schema);
  });
  const plan = async (text: string, values: readonly unknown[]): Promise<string> => {
    await client.query({ name: '', text: `PREPARE p AS ${text}` });
    try {
      // The store's connections' planner settings (database.ts), so the plan measured is the one they make.
      for (const [setting, value] of PLANNER_SETTINGS) await client.query(`SET ${setting} = ${value}`);
      const args = values.length === 0 ? '' : `(${values.map((v) => (typeof v === 'string' ? `'${v}'` : String(v))).join(', ')})`;
      const rows = (await client.query(`EXPLAIN EXECUTE p${args}`)).rows as { 'QUERY PLAN': string }[];
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await client.query('DEALLOCATE p');
      for (const [setting] of PLANNER_SETTINGS) await client.query(`RESET ${setting}`);
    }
  };

  it('reads due schedules through schedules_due, bounded by now, with the generic plan', async () => {
    const text = await plan(SCHEDULE_DUE.text, [5000, 10, 100]);
    expect(text).toMatch(/(Index|Index Only) Scan using schedules_due|Bitmap Index Scan on schedules_due/);
    expect(text).toMatch(/Index Cond: \(next_at <= \$1\)/);
    expect(text).not.toMatch(/Seq Scan/);
  });

  it('finds the earliest next_at with one index probe, and lists a tenant by its primary key', async () => {
    expect(await plan(SCHEDULE_EARLIEST.text, [])).toMatch(/Limit[\s\S]*Index Only Scan using schedules_due/);
    const list = await plan(SCHEDULE_LIST.text, ['t1', '', 100]);
    expect(list).toMatch(/Index Scan using schedules_pkey/);
    expect(list).not.toMatch(/Seq Scan/);
  });
});
