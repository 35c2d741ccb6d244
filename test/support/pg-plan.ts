/**
 * PostgreSQL's EXPLAIN (ANALYZE, FORMAT JSON) plan tree, as the lease-cost
 * tests read it: each node with the rows it produced and filtered out.
 */

import type pg from 'pg';
import { expect } from 'vitest';

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
