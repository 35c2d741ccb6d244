/**
 * The bounded document review, in process: what the trusted policy refuses
 * (send_email and unknown tools, parameters outside a tool's schema, another
 * tenant's document), the budgets that end a job `dead` with a stable code
 * (steps, time, refusals, attempts), and the HTTP surface that shows it.
 * Time budgets use an injected clock, so nothing here waits for a deadline.
 */

import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DeterministicPlanner, HttpPlanner, type PlannerView } from '../../../apps/documents/planner.js';
import { INVOICE, KEYS, ScriptedPlanner, startHarness, type DocumentView, type Harness } from './harness.js';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const send = (view: PlannerView): unknown => ({ action: 'tool', tool: 'send_email', params: { documentId: view.documentId, to: 'supplier@example.com' } });

async function finished(h: Harness, jobId: string): Promise<{ status: string; code: string | null }> {
  const job = await h.service.queue.waitFor(jobId, { timeoutMs: 20_000 });
  return { status: job.status, code: job.lastError?.code ?? null };
}

/** Submits acme's invoice, waits for its job to end, and reads it back over HTTP. */
async function reviewed(h: Harness): Promise<{ outcome: { status: string; code: string | null }; body: DocumentView; documentId: string; jobId: string }> {
  const { documentId, jobId } = await h.submit('acme');
  const outcome = await finished(h, jobId);
  const { body } = await h.read('acme', documentId);
  return { outcome, body, documentId, jobId };
}

const refusals = (body: DocumentView): (string | null)[][] => body.rejections.map((r) => [r.tool, r.reason]);

describe('document review', () => {
  it('runs extract, validate and draft, checkpointing each, and shows the note behind 202 + Location', async () => {
    harness = await startHarness();
    const { documentId, jobId, location } = await harness.submit('acme');
    expect(location).toBe(`/documents/${documentId}`);
    expect(await finished(harness, jobId)).toEqual({ status: 'succeeded', code: null });
    const { status, body } = await harness.read('acme', documentId);
    expect(status).toBe(200);
    expect(body.steps.map((step) => [step.index, step.tool, step.checkpointed])).toEqual([
      [0, 'extract', true],
      [1, 'validate', true],
      [2, 'draft', true],
    ]);
    expect(body.rejections).toEqual([]);
    expect(body.reviewNote).toContain('All required supplier fields are present');
    expect(body.job).toMatchObject({ status: 'succeeded', attempts: 1, errorCode: null });
  });

  it('refuses send_email and an unknown tool with tool_not_allowed, and still drafts the note', async () => {
    const planner = new ScriptedPlanner([send, (view: PlannerView) => ({ action: 'tool', tool: 'delete_supplier', params: { documentId: view.documentId } })]);
    harness = await startHarness({ planner });
    const { outcome, body } = await reviewed(harness);
    expect(outcome).toEqual({ status: 'succeeded', code: null });
    expect(refusals(body)).toEqual([
      ['send_email', 'tool_not_allowed'],
      ['delete_supplier', 'tool_not_allowed'],
    ]);
    expect(body.steps.map((step) => step.tool)).toEqual(['extract', 'validate', 'draft']);
    // The planner is told what was refused, never given the power to override it.
    expect(planner.views[1]?.lastRejection).toEqual({ tool: 'send_email', reason: 'tool_not_allowed' });
  });

  it('refuses parameters outside the tool schema (an unknown field, a value not in the enum, a number out of range); the third refusal ends the job', async () => {
    const planner = new ScriptedPlanner([
      (view: PlannerView) => ({ action: 'tool', tool: 'extract', params: { documentId: view.documentId, url: 'http://elsewhere' } }),
      (view: PlannerView) => ({ action: 'tool', tool: 'extract', params: { documentId: view.documentId } }),
      (view: PlannerView) => ({ action: 'tool', tool: 'validate', params: { documentId: view.documentId, requiredFields: ['password'] } }),
      (view: PlannerView) => ({ action: 'tool', tool: 'validate', params: { documentId: view.documentId, requiredFields: ['iban'] } }),
      (view: PlannerView) => ({ action: 'tool', tool: 'draft', params: { documentId: view.documentId, maxWords: 5_000 } }),
    ]);
    harness = await startHarness({ planner });
    const { outcome, body } = await reviewed(harness);
    expect(outcome).toEqual({ status: 'dead', code: 'rejection_budget_exhausted' });
    expect(refusals(body)).toEqual([
      ['extract', 'invalid_parameters'],
      ['validate', 'invalid_parameters'],
      ['draft', 'invalid_parameters'],
    ]);
    expect(body.rejections[2]?.detail).toMatch(/maxWords/);
    expect(body.steps.map((step) => step.tool)).toEqual(['extract', 'validate']);
  });

  it("refuses another tenant's document and a document that does not exist alike; the other tenant cannot read this one", async () => {
    let theirs = '';
    const reach = (documentId: () => string) => () => ({ action: 'tool', tool: 'extract', params: { documentId: documentId() } });
    const planner = new ScriptedPlanner([reach(() => theirs), reach(() => 'doc_doesnotexist0000')], (view) => !view.text.includes('Globex'));
    harness = await startHarness({ planner });
    const globex = await harness.submit('globex', INVOICE.replace('ACME', 'Globex'));
    theirs = globex.documentId;
    expect(await finished(harness, globex.jobId)).toMatchObject({ status: 'succeeded' });
    const { outcome, body, documentId } = await reviewed(harness);
    expect(outcome).toEqual({ status: 'succeeded', code: null });
    expect(refusals(body)).toEqual([
      ['extract', 'outside_tenant_scope'],
      ['extract', 'outside_tenant_scope'],
    ]);
    expect(body.steps.map((step) => step.tool)).toEqual(['extract', 'validate', 'draft']);
    expect((await harness.read('globex', documentId)).status).toBe(404);
    expect((await harness.read('acme', globex.documentId)).status).toBe(404);
    expect((await harness.read('acme', 'doc_doesnotexist0000')).status).toBe(404);
  });

  it('ends dead with step_budget_exhausted when the planner asks for a fourth step', async () => {
    const planner = new ScriptedPlanner([
      (view: PlannerView) => ({ action: 'tool', tool: 'extract', params: { documentId: view.documentId } }),
      (view: PlannerView) => ({ action: 'tool', tool: 'extract', params: { documentId: view.documentId } }),
      (view: PlannerView) => ({ action: 'tool', tool: 'validate', params: { documentId: view.documentId, requiredFields: ['iban'] } }),
    ]);
    harness = await startHarness({ planner });
    const { outcome, body } = await reviewed(harness);
    expect(outcome).toEqual({ status: 'dead', code: 'step_budget_exhausted' });
    expect(body.steps.map((step) => step.tool)).toEqual(['extract', 'extract', 'validate']);
    expect(refusals(body)).toEqual([['draft', 'step_budget_exhausted']]);
    expect(body.reviewNote).toBeNull();
    expect(body.job.errorCode).toBe('step_budget_exhausted');
  });

  it('ends dead with time_budget_exhausted when the deadline leaves a step too little time', async () => {
    let skew = 0;
    const timeBudgetMs = 60_000;
    // After the first checkpoint the clock jumps to 50 ms before the deadline (less, by the time taken so far): validate needs 100.
    harness = await startHarness({
      timeBudgetMs,
      now: () => Date.now() + skew,
      afterCheckpoint: (step) => void (step === 0 ? (skew = timeBudgetMs - 50) : undefined),
    });
    const { outcome, body } = await reviewed(harness);
    expect(outcome).toEqual({ status: 'dead', code: 'time_budget_exhausted' });
    expect(body.steps.map((step) => step.tool)).toEqual(['extract']);
    expect(refusals(body)).toEqual([['validate', 'time_budget_exhausted']]);
  });

  it('ends dead with rejection_budget_exhausted after three refused proposals', async () => {
    harness = await startHarness({ planner: new ScriptedPlanner([send, send, send]) });
    const { outcome, body } = await reviewed(harness);
    expect(outcome).toEqual({ status: 'dead', code: 'rejection_budget_exhausted' });
    expect(body.rejections).toHaveLength(3);
    expect(body.steps).toEqual([]);
  });

  it('refuses a finish before the draft and a proposal that is not an object', async () => {
    harness = await startHarness({ planner: new ScriptedPlanner([{ action: 'finish' }, 'send it now']) });
    const { outcome, body } = await reviewed(harness);
    expect(outcome).toEqual({ status: 'succeeded', code: null });
    expect(body.rejections.map((r) => r.reason)).toEqual(['finish_before_draft', 'malformed_proposal']);
  });
});

describe('document review over an HTTP planner', () => {
  let stub: Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => (stub === undefined ? resolve(undefined) : stub.close(resolve)));
    stub = undefined;
  });

  /** A planner endpoint on a random port; `answer` decides each reply from the view it was sent. */
  async function plannerStub(answer: (view: PlannerView, request: IncomingMessage) => Promise<{ status: number; body: unknown }>): Promise<string> {
    stub = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        void answer(JSON.parse(Buffer.concat(chunks).toString('utf8')) as PlannerView, request).then(({ status, body }) => {
          response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
        });
      });
    });
    await new Promise<void>((resolve) => stub?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(stub.address() as AddressInfo).port}/plan`;
  }

  it('follows the endpoint, still refusing what it proposes outside the allowlist', async () => {
    const deterministic = new DeterministicPlanner();
    const seen: string[] = [];
    const url = await plannerStub(async (view, request) => {
      seen.push(String(request.headers['authorization']));
      // A model that tries to send the note itself once the draft exists.
      if (view.stepsTaken.includes('draft') && view.lastRejection === null) return { status: 200, body: send(view) };
      return { status: 200, body: await deterministic.propose(view) };
    });
    harness = await startHarness({ planner: new HttpPlanner({ url, token: 'planner-token' }) });
    const { outcome, body } = await reviewed(harness);
    expect(outcome).toEqual({ status: 'succeeded', code: null });
    expect(refusals(body)).toEqual([['send_email', 'tool_not_allowed']]);
    expect(body.reviewNote).toContain('ACME Components Ltd');
    expect(seen).toHaveLength(5);
    expect(new Set(seen)).toEqual(new Set(['Bearer planner-token']));
  });

  it('retries an unavailable endpoint and ends dead with attempt_budget_exhausted on the last attempt', async () => {
    let calls = 0;
    const url = await plannerStub(async () => {
      calls += 1;
      return { status: 503, body: { error: 'overloaded' } };
    });
    harness = await startHarness({ planner: new HttpPlanner({ url }), maxAttempts: 2 });
    const { jobId } = await harness.submit('acme');
    expect(await finished(harness, jobId)).toEqual({ status: 'dead', code: 'attempt_budget_exhausted' });
    const attempts = await harness.service.queue.attempts(jobId);
    expect(attempts.map((a) => a.errorCode)).toEqual(['planner_unavailable', 'attempt_budget_exhausted']);
    expect(calls).toBe(2);
  });

  it('refuses an answer past the size limit as a planner failure', async () => {
    const url = await plannerStub(async () => ({ status: 200, body: { action: 'finish', padding: 'x'.repeat(100_000) } }));
    harness = await startHarness({ planner: new HttpPlanner({ url }), maxAttempts: 1 });
    const { outcome, body } = await reviewed(harness);
    expect(outcome).toEqual({ status: 'dead', code: 'attempt_budget_exhausted' });
    expect(body.rejections).toEqual([]);
  });
});

describe('document submission', () => {
  it('replays the same Idempotency-Key to the same job and refuses it with other text (409)', async () => {
    harness = await startHarness({ worker: false });
    const first = await harness.submit('acme', INVOICE, { 'idempotency-key': 'inv-42' });
    const again = await harness.submit('acme', INVOICE, { 'idempotency-key': 'inv-42' });
    expect(again).toEqual(first);
    const changed = await harness.service.app.inject({
      method: 'POST',
      url: '/documents',
      headers: { authorization: `Bearer ${KEYS.acme}`, 'idempotency-key': 'inv-42' },
      payload: {
        title: 'Invoice 42',
        text: `${INVOICE}
Note: changed`,
      },
    });
    expect(changed.statusCode).toBe(409);
    expect(changed.json()).toMatchObject({ code: 'idempotency_conflict' });
  });

  it('keeps the input immutable: the stored document refuses updates', async () => {
    harness = await startHarness({ worker: false });
    const { documentId } = await harness.submit('acme');
    expect(() => harness?.service.records.db.prepare("UPDATE documents SET body = 'Supplier: Mallory' WHERE id = ?").run(documentId)).toThrow(/immutable/);
  });

  it('answers 401 without a key and 400 for a body outside the limits', async () => {
    harness = await startHarness({ worker: false });
    const anonymous = await harness.service.app.inject({ method: 'POST', url: '/documents', payload: { title: 't', text: 'x' } });
    expect(anonymous.statusCode).toBe(401);
    const huge = await harness.service.app.inject({
      method: 'POST',
      url: '/documents',
      headers: { authorization: `Bearer ${KEYS.acme}` },
      payload: { title: 't', text: 'x'.repeat(70_000) },
    });
    expect(huge.statusCode).toBe(400);
    expect(huge.json()).toMatchObject({ code: 'invalid_request' });
  });
});
