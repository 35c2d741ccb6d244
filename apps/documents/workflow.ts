/**
 * The `document.review` job: prepares one supplier document for a person's
 * review in at most three tool steps. Each turn asks the planner for the next
 * action, lets policy.ts judge it, runs an accepted tool, and stores the step
 * index and the outputs so far as the job's checkpoint before the next turn.
 * A later attempt (after a crash, a lost lease or a transient failure) starts
 * from that checkpoint, never from the planner's memory, so a checkpointed
 * step never runs again.
 */

import { createHash } from 'node:crypto';
import { PermanentJobError, type JobContext } from '../../src/index.js';
import { checkProposal, MAX_REJECTIONS, MAX_STEPS, TERMINAL_REASONS, type RejectionReason, type ToolAction } from './policy.js';
import type { Planner } from './planner.js';
import type { DocumentRecords } from './records.js';
import { draft, extract, validate, type StepOutputs, type ToolName } from './tools.js';

export const REVIEW_KIND = 'document.review';

/** The job's payload: fixed at submission, frozen in the handler, checked against the stored document. */
export interface ReviewInput {
  readonly tenant: string;
  readonly documentId: string;
  readonly sha256: string;
}

export const REVIEW_PAYLOAD_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['tenant', 'documentId', 'sha256'],
  properties: {
    tenant: { type: 'string', minLength: 1, maxLength: 64 },
    documentId: { type: 'string', minLength: 1, maxLength: 80 },
    sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
  },
} as const;

/** The checkpoint's state: what a later attempt needs, and nothing from the planner but accepted actions. */
export interface ReviewState {
  readonly steps: readonly { readonly tool: ToolName; readonly attempt: number }[];
  readonly outputs: StepOutputs;
  readonly rejections: number;
  readonly lastRejection: { readonly tool: string | null; readonly reason: RejectionReason } | null;
}

/** The job's result: the draft note for the reviewer. */
export interface ReviewResult {
  readonly documentId: string;
  readonly note: string;
  readonly steps: readonly ToolName[];
}

/** Where a finished draft goes besides the job's result, e.g. the reviewer's inbox: an external effect. */
export type NoteDelivery = (
  delivery: { readonly tenant: string; readonly documentId: string; readonly note: string; readonly fence: number },
  signal: AbortSignal,
) => Promise<void>;

export interface ReviewDeps {
  readonly records: DocumentRecords;
  readonly planner: Planner;
  /** When set, the draft step delivers its note and so has an external effect, declared before it happens. */
  readonly deliverNote?: NoteDelivery;
  /** Milliseconds since the epoch; injected so budgets can be tested without waiting. */
  readonly now?: () => number;
  /** Called after a step's checkpoint is stored (tests stop a process here). */
  readonly afterCheckpoint?: (step: number, tool: ToolName) => Promise<void> | void;
}

/** The digest a job's input carries: of the title and the text, as submitted. */
export function documentDigest(title: string, text: string): string {
  return createHash('sha256').update(`${title}\n${text}`).digest('hex');
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

const EMPTY: ReviewState = { steps: [], outputs: {}, rejections: 0, lastRejection: null };

/** The checkpoint as stored by an earlier attempt; its step index must agree with its state. */
function stateOf(checkpoint: JobContext['checkpoint']): ReviewState {
  if (checkpoint === null) return EMPTY;
  const state = checkpoint.state as ReviewState;
  if (typeof state !== 'object' || state === null || !Array.isArray(state.steps) || state.steps.length !== checkpoint.step) {
    throw new PermanentJobError('the stored checkpoint does not describe a review', 'checkpoint_corrupt');
  }
  return state;
}

/** A failure a retry may cure; on the last attempt the job ends instead, with a stable code. */
function transient(ctx: JobContext<ReviewInput>, error: unknown): Error {
  const message = error instanceof Error ? error.message : 'step failed';
  if (ctx.attempt >= ctx.maxAttempts) return new PermanentJobError(`attempt budget exhausted: ${message}`, 'attempt_budget_exhausted');
  return error instanceof Error ? error : new Error(message);
}

export function reviewHandler(deps: ReviewDeps): (ctx: JobContext<ReviewInput>) => Promise<ReviewResult> {
  const now = deps.now ?? Date.now;
  return async (ctx) => {
    const input = deepFreeze(structuredClone(ctx.payload));
    const doc = deps.records.document(input.documentId);
    if (doc === undefined || doc.tenant !== input.tenant || doc.sha256 !== input.sha256 || documentDigest(doc.title, doc.body) !== input.sha256) {
      throw new PermanentJobError('the document is missing or differs from the one submitted', 'document_mismatch');
    }
    let state = stateOf(ctx.checkpoint);
    // A crash between storing a checkpoint and marking its step loses only the mark.
    state.steps.forEach((step, index) => deps.records.stepCheckpointed(ctx.id, index, step.attempt));

    for (;;) {
      ctx.signal.throwIfAborted();
      const stepsTaken = state.steps.map((step) => step.tool);
      let proposal: unknown;
      try {
        proposal = await deps.planner.propose(
          { documentId: doc.id, title: doc.title, text: doc.body, stepsTaken, stepsLeft: MAX_STEPS - stepsTaken.length, lastRejection: state.lastRejection },
          ctx.signal,
        );
      } catch (error) {
        ctx.signal.throwIfAborted();
        throw transient(ctx, error);
      }
      const decision = checkProposal(proposal, {
        tenant: input.tenant,
        documentId: input.documentId,
        tenantOf: (id) => deps.records.tenantOf(id),
        stepsTaken: stepsTaken.length,
        toolsDone: new Set(stepsTaken),
        remainingMs: ctx.deadlineAt === null ? Infinity : ctx.deadlineAt.getTime() - now(),
      });
      if (!decision.accepted) {
        deps.records.reject(ctx.id, ctx.attempt, decision);
        if (TERMINAL_REASONS.has(decision.reason)) throw new PermanentJobError(decision.detail, decision.reason);
        state = { ...state, rejections: state.rejections + 1, lastRejection: { tool: decision.tool, reason: decision.reason } };
        if (state.rejections >= MAX_REJECTIONS) throw new PermanentJobError(`${state.rejections} proposals were refused`, 'rejection_budget_exhausted');
        await ctx.saveCheckpoint(state.steps.length, state);
        continue;
      }
      const { action } = decision;
      if (action.action === 'finish') {
        const note = state.outputs.draft?.note ?? '';
        return { documentId: doc.id, note, steps: stepsTaken };
      }
      const index = state.steps.length;
      deps.records.stepStarted(ctx.id, index, ctx.attempt, action.tool);
      let outputs: StepOutputs;
      try {
        outputs = await runTool(action, state.outputs, doc.title, doc.body, ctx, input, deps.deliverNote);
      } catch (error) {
        ctx.signal.throwIfAborted();
        if (error instanceof PermanentJobError) throw error;
        throw transient(ctx, error);
      }
      deps.records.stepFinished(ctx.id, index, ctx.attempt, outputs[action.tool]);
      state = { steps: [...state.steps, { tool: action.tool, attempt: ctx.attempt }], outputs, rejections: state.rejections, lastRejection: null };
      await ctx.saveCheckpoint(index + 1, state);
      deps.records.stepCheckpointed(ctx.id, index, ctx.attempt);
      await deps.afterCheckpoint?.(index, action.tool);
    }
  };
}

async function runTool(
  action: ToolAction,
  outputs: StepOutputs,
  title: string,
  body: string,
  ctx: JobContext<ReviewInput>,
  input: ReviewInput,
  deliverNote: NoteDelivery | undefined,
): Promise<StepOutputs> {
  switch (action.tool) {
    case 'extract':
      return { ...outputs, extract: extract(body) };
    case 'validate':
      // The policy checked the prerequisites: extract ran before.
      return { ...outputs, validate: validate(outputs.extract ?? { fields: {}, characters: 0 }, action.params.requiredFields) };
    case 'draft': {
      const note = draft(title, outputs.extract ?? { fields: {}, characters: 0 }, outputs.validate ?? { missing: [], invalid: [] }, action.params.maxWords);
      if (deliverNote !== undefined) {
        // From here a lost lease cannot be retried safely: the queue makes the job `unknown`.
        await ctx.effectStarted();
        await deliverNote({ tenant: input.tenant, documentId: input.documentId, note: note.note, fence: ctx.fence }, ctx.signal);
      }
      return { ...outputs, draft: note };
    }
  }
}
