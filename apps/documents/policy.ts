/**
 * The trusted check every planner proposal passes before anything runs. The
 * planner is outside the trust boundary (a hosted model in production), so
 * its answer arrives as `unknown` and this module alone decides: the tool is
 * on the allowlist, its parameters match the tool's schema, the document is
 * the job's own and in the job's tenant, the step budget has a step left and
 * the deadline leaves the step enough time. Each refusal has a stable reason.
 */

import { Value } from '@sinclair/typebox/value';
import { MIN_STEP_MS, PREREQUISITES, TOOL_NAMES, TOOL_PARAMS, type ToolName, type ToolParams } from './tools.js';

/** At most this many tool steps per job. */
export const MAX_STEPS = 3;
/** Refused proposals a job tolerates before it ends: a planner that keeps proposing the forbidden does not loop. */
export const MAX_REJECTIONS = 3;

export const REJECTION_REASONS = [
  'malformed_proposal',
  'tool_not_allowed',
  'invalid_parameters',
  'outside_tenant_scope',
  'not_this_document',
  'prerequisite_missing',
  'finish_before_draft',
  'step_budget_exhausted',
  'time_budget_exhausted',
] as const;
export type RejectionReason = (typeof REJECTION_REASONS)[number];

/** Refusals after which no proposal could be accepted: the job ends with the reason as its code. */
export const TERMINAL_REASONS: ReadonlySet<RejectionReason> = new Set(['step_budget_exhausted', 'time_budget_exhausted']);

export type Action =
  | { readonly [N in ToolName]: { readonly action: 'tool'; readonly tool: N; readonly params: ToolParams[N] } }[ToolName]
  | { readonly action: 'finish' };

/** An accepted tool step. */
export type ToolAction = Extract<Action, { readonly action: 'tool' }>;

export type Decision =
  | { readonly accepted: true; readonly action: Action }
  | { readonly accepted: false; readonly reason: RejectionReason; readonly tool: string | null; readonly detail: string };

/** What trusted code knows when it judges a proposal; none of it comes from the planner. */
export interface Scope {
  readonly tenant: string;
  readonly documentId: string;
  /** The tenant that owns a document id, or undefined when no such document exists. */
  readonly tenantOf: (documentId: string) => string | undefined;
  readonly stepsTaken: number;
  readonly toolsDone: ReadonlySet<ToolName>;
  /** Milliseconds left before the job's deadline (Infinity without one). */
  readonly remainingMs: number;
}

function isToolName(name: string): name is ToolName {
  return (TOOL_NAMES as readonly string[]).includes(name);
}

function reject(reason: RejectionReason, tool: string | null, detail: string): Decision {
  return { accepted: false, reason, tool, detail: detail.slice(0, 300) };
}

export function checkProposal(proposal: unknown, scope: Scope): Decision {
  if (typeof proposal !== 'object' || proposal === null || Array.isArray(proposal)) return reject('malformed_proposal', null, 'a proposal is a JSON object');
  const fields = proposal as Record<string, unknown>;
  if (fields['action'] === 'finish') {
    if (!scope.toolsDone.has('draft')) return reject('finish_before_draft', null, 'the review note has not been drafted');
    return { accepted: true, action: { action: 'finish' } };
  }
  const tool = fields['tool'];
  if (fields['action'] !== 'tool' || typeof tool !== 'string' || tool.length > 64)
    return reject('malformed_proposal', null, 'expected {action: "tool", tool, params} or {action: "finish"}');
  if (!isToolName(tool)) return reject('tool_not_allowed', tool, `only ${TOOL_NAMES.join(', ')} may run`);
  if (scope.stepsTaken >= MAX_STEPS) return reject('step_budget_exhausted', tool, `${MAX_STEPS} steps were taken`);
  const params = fields['params'];
  const schema = TOOL_PARAMS[tool];
  if (!Value.Check(schema, params)) {
    const first = Value.Errors(schema, params).First();
    return reject('invalid_parameters', tool, first === undefined ? 'parameters do not match the schema' : `${first.path || '/'}: ${first.message}`);
  }
  const { documentId } = params as { documentId: string };
  if (scope.tenantOf(documentId) !== scope.tenant) return reject('outside_tenant_scope', tool, "the document is not in this job's tenant");
  if (documentId !== scope.documentId) return reject('not_this_document', tool, 'a job works on its own document only');
  const missing = PREREQUISITES[tool].filter((before) => !scope.toolsDone.has(before));
  if (missing.length > 0) return reject('prerequisite_missing', tool, `run ${missing.join(', ')} first`);
  if (scope.remainingMs < MIN_STEP_MS[tool])
    return reject('time_budget_exhausted', tool, `${Math.max(0, Math.floor(scope.remainingMs))} ms left, ${tool} needs ${MIN_STEP_MS[tool]} ms`);
  return { accepted: true, action: { action: 'tool', tool, params } as Action };
}
