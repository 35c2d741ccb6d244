/**
 * PostgreSQL's EXPLAIN (ANALYZE, FORMAT JSON) plan tree, as the lease-cost
 * tests read it: each node with the rows it produced and filtered out; and
 * the schema of their own that each such test runs in.
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { expect } from 'vitest';
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

/**
 * Rows each scan of jobs read, over all its loops, for one statement run under EXPLAIN ANALYZE in a
 * transaction that is rolled back; a sequential scan of jobs fails the test.
 */
export async function jobRowsRead(client: pg.Client, text: string, values: readonly unknown[]): Promise<number[]> {
  await client.query('BEGIN');
  try {
    const explained = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, [...values]);
    const root = explained.rows[0]?.['QUERY PLAN'][0].Plan as PlanNode;
    const scans = [...planNodes(root)].filter((node) => node['Relation Name'] === 'jobs' && /Scan/.test(node['Node Type']));
    expect(scans.some((node) => node['Node Type'] === 'Seq Scan')).toBe(false);
    return scans.map((node) => (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']);
  } finally {
    await client.query('ROLLBACK');
  }
}

export interface PlanSchema {
  readonly store: PostgresStore;
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
    client,
    async close() {
      await client.end();
      await store.close();
      await PostgresStore.dropSchema({ connectionString: url, schema });
    },
  };
}
