/**
 * PostgreSQL's EXPLAIN (ANALYZE, FORMAT JSON) plan tree, as the lease-cost
 * tests read it: each node with the rows it produced and filtered out.
 */

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
