/**
 * The document review across real process deaths: a worker process
 * (test/fixtures/documents-worker.ts) is SIGKILLed right after a step's
 * checkpoint, and a second process resumes from it without running a
 * checkpointed step again; a worker SIGKILLed inside the draft step, after it
 * declared the external effect, leaves the job `unknown` when its lease runs
 * out, never retried. This process submits and watches; it runs no worker.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.js';

const FIXTURE = join(import.meta.dirname, '..', '..', '..', 'dist', 'test', 'fixtures', 'documents-worker.js');
/** Short, so a killed worker's job comes back quickly; renewed every third, enough on a loaded machine. */
const LEASE_MS = 600;

interface Child {
  readonly process: ChildProcess;
  /** Resolves with the first stdout line that matches. */
  line(pattern: RegExp): Promise<string>;
  readonly exited: Promise<NodeJS.Signals | number | null>;
}

const children: ChildProcess[] = [];

function startWorker(path: string, env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, [FIXTURE], {
    env: { ...process.env, DOCUMENTS_DB: path, LEASE_MS: String(LEASE_MS), ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const lines = createInterface({ input: child.stdout });
  const seen: string[] = [];
  const waiting: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  lines.on('line', (text) => {
    seen.push(text);
    for (const wait of waiting.filter((w) => w.pattern.test(text))) {
      waiting.splice(waiting.indexOf(wait), 1);
      wait.resolve(text);
    }
  });
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  return {
    process: child,
    exited,
    line: (pattern) =>
      new Promise((resolve, reject) => {
        const found = seen.find((text) => pattern.test(text));
        if (found !== undefined) return resolve(found);
        waiting.push({ pattern, resolve });
        void exited.then((how) => reject(new Error(`the worker exited (${String(how)}) before printing ${pattern}`)));
      }),
  };
}

async function kill(child: Child): Promise<void> {
  child.process.kill('SIGKILL');
  expect(await child.exited).toBe('SIGKILL');
}

let harness: Harness | undefined;
let inbox: Server | undefined;
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await harness?.close();
  harness = undefined;
  inbox?.closeAllConnections();
  await new Promise((resolve) => (inbox === undefined ? resolve(undefined) : inbox.close(resolve)));
  inbox = undefined;
});

describe('document review across SIGKILL', () => {
  it('resumes from the checkpoint after a worker is killed between steps; no checkpointed step runs twice', async () => {
    harness = await startHarness({ worker: false });
    const first = startWorker(harness.path, { PAUSE_AFTER_STEP: '1' });
    const { documentId, jobId } = await harness.submit('acme');
    await first.line(/^checkpointed 1$/);
    await kill(first);

    const second = startWorker(harness.path);
    const job = await harness.service.queue.waitFor(jobId, { timeoutMs: 20_000 });
    expect(job).toMatchObject({ status: 'succeeded', attempts: 2 });
    const steps = harness.service.records.steps(jobId);
    expect(steps.map((step) => [step.stepIndex, step.tool, step.attempt, step.pid, step.checkpointed])).toEqual([
      [0, 'extract', 1, first.process.pid, true],
      [1, 'validate', 1, first.process.pid, true],
      [2, 'draft', 2, second.process.pid, true],
    ]);
    const { body } = await harness.read('acme', documentId);
    expect(body.reviewNote).toContain('All required supplier fields are present');
    expect((await harness.service.queue.attempts(jobId)).map((a) => a.errorCode)).toEqual(['lease_expired', null]);
  });

  it("a worker killed after declaring the draft step's effect leaves the job unknown when its lease runs out", async () => {
    let delivered: () => void = () => undefined;
    const arrived = new Promise<void>((resolve) => (delivered = resolve));
    // The reviewer's inbox takes the note and never answers: the worker dies with the effect's outcome unknown.
    inbox = createServer(() => delivered());
    await new Promise<void>((resolve) => inbox?.listen(0, '127.0.0.1', resolve));
    harness = await startHarness({ worker: false });
    const worker = startWorker(harness.path, { INBOX_URL: `http://127.0.0.1:${(inbox.address() as AddressInfo).port}/notes` });
    const { jobId } = await harness.submit('acme');
    await arrived;
    await kill(worker);

    const job = await harness.service.queue.waitFor(jobId, { timeoutMs: 20_000 });
    expect(job).toMatchObject({ status: 'unknown', attempts: 1, lastError: { code: 'effect_unknown' } });
    const steps = harness.service.records.steps(jobId);
    expect(steps.map((step) => [step.tool, step.checkpointed])).toEqual([
      ['extract', true],
      ['validate', true],
      ['draft', false],
    ]);
  });
});
