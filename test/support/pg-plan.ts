/**
 * PostgreSQL's EXPLAIN (ANALYZE, FORMAT JSON) plan tree, as the lease-cost
 * tests read it: each node with the rows it produced and filtered out; and
 * the schema of their own that each such test runs in.
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { expect } from 'vitest';
import { PLANNER_SETTINGS } from '../../src/store/postgres/database.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';

export interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Actual Rows': number;
  readonly 'Actual Loops': number;
  readonly 'Rows Removed by Filter'?: number;
  readonly Plans?: readonly PlanNode[];
}

/** Every node of the tree, the root first. */
export function* planNodes(node: PlanNode): Generator<PlanNode> {
  yield node;
  for (const child of node.Plans ?? []) yield* planNodes(child);
}

/** A value as an SQL literal for EXECUTE: null, numbers, booleans, strings and arrays of those. */
function literal(client: pg.Client, value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return client.escapeLiteral(value);
  if (Array.isArray(value)) {
    const items = value.map((item: unknown) => (item === null ? 'NULL' : `"${String(item).replace(/["\\]/g, (c) => `\\${c}`)}"`));
    return client.escapeLiteral(`{${items.join(',')}}`);
  }
  throw new TypeError(`no literal for ${typeof value}`);
}

/** `values` as the argument list of an EXECUTE: `(v1, v2, …)`, or nothing. */
function executeArgs(client: pg.Client, values: readonly unknown[]): string {
  return values.length === 0 ? '' : `(${values.map((value) => literal(client, value)).join(', ')})`;
}

let prepared = 0;

/**
 * Runs `client`'s prepared statement `name` once in a transaction that is rolled back, under EXPLAIN ANALYZE:
 * the nodes of the plan the connection has cached for it (under plan_cache_mode force_generic_plan, the generic
 * plan made at its first execution, kept until the statistics of a table it reads change).
 */
export async function explainPrepared(client: pg.Client, name: string, values: readonly unknown[]): Promise<PlanNode[]> {
  await client.query('BEGIN');
  try {
    const explained = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${name}${executeArgs(client, values)}`,
    );
    return [...planNodes(explained.rows[0]?.['QUERY PLAN'][0].Plan as PlanNode)];
  } finally {
    await client.query('ROLLBACK');
  }
}

/** The tables that hold jobs on PostgreSQL (migration 14): the record, the queued, the running and the ended ones. */
export const JOB_TABLES = ['jobs', 'job_ready', 'job_leases', 'job_endings'] as const;

/** Rows each scan of `tables` in `nodes` read, over all its loops, whether the scan's filter kept them or not. */
export function scanRowsRead(nodes: readonly PlanNode[], tables: readonly string[]): number[] {
  return nodes
    .filter((node) => tables.includes(node['Relation Name'] ?? '') && /Scan/.test(node['Node Type']))
    .map((node) => (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']);
}

/** JOB_COMPLETE_MANY's arguments for completing `jobs` of `tenant` with no result. */
export function completeManyValues(tenant: string, jobs: readonly { readonly id: string; readonly token: string }[]): unknown[] {
  return [jobs.map((j) => j.id), jobs.map(() => tenant), jobs.map((j) => j.token), jobs.map(() => null), jobs.map(() => null), jobs.map(() => null)];
}

/**
 * Rows each scan of `tables` (jobs unless given) read, over all its loops, for one statement run under EXPLAIN
 * ANALYZE in a transaction that is rolled back; a sequential scan of jobs fails the test. (The planner may
 * scan a small job_ready or job_leases: the rows such a scan reads, filtered out or not, are counted like any
 * others, so a bound on the sum still fails when it reads a backlog.) The statement is prepared and
 * run with its generic plan, as the store's connections run their named statements (plan_cache_mode
 * force_generic_plan, database.ts): the plan chosen without the values is the one measured.
 */
export async function jobRowsRead(client: pg.Client, text: string, values: readonly unknown[], tables: readonly string[] = ['jobs']): Promise<number[]> {
  const name = `lh_plan_test_${++prepared}`;
  await client.query('BEGIN');
  try {
    for (const [setting, value] of PLANNER_SETTINGS) await client.query(`SET LOCAL ${setting} = ${value}`);
    await client.query(`PREPARE ${name} AS ${text}`);
    const explained = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${name}${executeArgs(client, values)}`,
    );
    const root = explained.rows[0]?.['QUERY PLAN'][0].Plan as PlanNode;
    const nodes = [...planNodes(root)];
    expect(nodes.filter((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'jobs')).toEqual([]);
    return scanRowsRead(nodes, tables);
  } finally {
    await client.query('ROLLBACK');
    await client.query(`DEALLOCATE ${name}`).catch(() => undefined);
  }
}

export interface PlanSchema {
  readonly store: PostgresStore;
  /** The schema's name. */
  readonly schema: string;
  /** A connection of its own on the schema, for EXPLAIN and ANALYZE. */
  readonly client: pg.Client;
  /** Closes both and drops the schema. */
  close(): Promise<void>;
}

/** A PostgreSQL store in a new schema named `${prefix}_<random>`, with a plain client on it (the plan tests' setup). */
export async function storeInNewSchema(url: string, prefix: string): Promise<PlanSchema> {
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  const store = await PostgresStore.connect({ connectionString: url, schema, poolSize: 2 });
  const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
  await client.connect();
  return {
    store,
    schema,
    client,
    async close() {
      await client.end();
      await store.close();
      await PostgresStore.dropSchema({ connectionString: url, schema });
    },
  };
}
