/**
 * Planners propose the next action of a review. A planner is advice, not
 * authority: whatever it answers goes through policy.ts before anything
 * runs, so its answer is typed `unknown`. `DeterministicPlanner` stands in
 * for a hosted model; `HttpPlanner` asks one over HTTP with the same view.
 */

import type { RejectionReason } from './policy.js';
import type { ToolName } from './tools.js';

/** What a planner is shown: the document's id and text, the steps so far, and the last refusal. */
export interface PlannerView {
  readonly documentId: string;
  readonly title: string;
  readonly text: string;
  readonly stepsTaken: readonly ToolName[];
  readonly stepsLeft: number;
  readonly lastRejection: { readonly tool: string | null; readonly reason: RejectionReason } | null;
}

export interface Planner {
  propose(view: PlannerView, signal: AbortSignal): Promise<unknown>;
}

/** A planner failure a later attempt may not meet (the endpoint down, slow or answering nonsense). */
export class PlannerUnavailableError extends Error {
  readonly code = 'planner_unavailable';
}

/** extract, validate the required supplier fields, draft, finish: what a well-behaved model would propose. */
export class DeterministicPlanner implements Planner {
  async propose(view: PlannerView): Promise<unknown> {
    const documentId = view.documentId;
    if (!view.stepsTaken.includes('extract')) return { action: 'tool', tool: 'extract', params: { documentId } };
    if (!view.stepsTaken.includes('validate')) {
      return { action: 'tool', tool: 'validate', params: { documentId, requiredFields: ['supplierName', 'taxId', 'iban', 'invoiceTotal'] } };
    }
    if (!view.stepsTaken.includes('draft')) return { action: 'tool', tool: 'draft', params: { documentId, maxWords: 120 } };
    return { action: 'finish' };
  }
}

export interface HttpPlannerOptions {
  /** The endpoint: POSTed the view as JSON, answers the proposal as JSON. */
  readonly url: string;
  /** Per request; the job's own signal also ends it. Default 10 s. */
  readonly timeoutMs?: number;
  /** Sent as `Authorization: Bearer …` when set; never logged. */
  readonly token?: string;
}

/** Larger answers are refused unread: a proposal is a few hundred bytes. */
const MAX_ANSWER_BYTES = 64 * 1024;

export class HttpPlanner implements Planner {
  private readonly timeoutMs: number;

  constructor(private readonly options: HttpPlannerOptions) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  async propose(view: PlannerView, signal: AbortSignal): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(this.options.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(this.options.token === undefined ? {} : { authorization: `Bearer ${this.options.token}` }) },
        body: JSON.stringify(view),
        signal: AbortSignal.any([signal, AbortSignal.timeout(this.timeoutMs)]),
      });
    } catch (error) {
      throw new PlannerUnavailableError(`the planner could not be reached: ${error instanceof Error ? error.name : 'error'}`);
    }
    const body = await readBounded(response);
    if (!response.ok) throw new PlannerUnavailableError(`the planner answered ${response.status}`);
    try {
      return JSON.parse(body) as unknown;
    } catch {
      // Not JSON is still an answer: policy.ts refuses it as malformed.
      return body;
    }
  }
}

async function readBounded(response: Response): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > MAX_ANSWER_BYTES) {
    await response.body?.cancel();
    throw new PlannerUnavailableError('the planner answer is too large');
  }
  const bytes = Buffer.from(await response.arrayBuffer());
  if (bytes.length > MAX_ANSWER_BYTES) throw new PlannerUnavailableError('the planner answer is too large');
  return bytes.toString('utf8');
}
