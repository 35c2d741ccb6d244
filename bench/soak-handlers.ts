/**
 * The handler of the chaos soak (bench/soak.ts), loaded by real
 * `leasehold worker` processes. Every execution appends one line to the
 * effects ledger (SOAK_LEDGER) in the middle of its work, so a worker killed
 * after the line and before its completion leaves an execution whose result
 * was never committed. A successful result names its own ledger line (`exec`),
 * which is how the soak proves that each committed result came from exactly
 * one execution.
 *
 * The payload's `fate` is the failure policy under test:
 *   ok         succeeds
 *   flaky      fails retryably on attempts 1 and 2, then succeeds
 *   permanent  fails with a permanent error: dead at once
 *   exhaust    always fails retryably: dead when its attempts run out
 */

import { appendFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { JobContext } from '../src/worker/handler.js';
import { PermanentJobError } from '../src/worker/job-errors.js';

export const SOAK_FATES = ['ok', 'flaky', 'permanent', 'exhaust'] as const;
export type SoakFate = (typeof SOAK_FATES)[number];

export interface SoakPayload {
  readonly n: number;
  readonly fate: SoakFate;
  /** Handler time in ms, half before the ledger line and half after it. */
  readonly workMs: number;
}

export type ExecutionOutcome = 'ok' | 'retryable' | 'permanent';

/** One line of the effects ledger. */
export interface LedgerLine {
  readonly id: string;
  readonly exec: string;
  readonly fence: number;
  readonly attempt: number;
  readonly pid: number;
  readonly outcome: ExecutionOutcome;
}

/** The committed result of a successful execution. */
export interface SoakResult {
  readonly exec: string;
  readonly fence: number;
  readonly pid: number;
}

export const PERMANENT_CODE = 'soak_permanent';
export const RETRYABLE_CODE = 'soak_retryable';

function outcomeOf(fate: SoakFate, attempt: number): ExecutionOutcome {
  if (fate === 'permanent') return 'permanent';
  if (fate === 'exhaust' || (fate === 'flaky' && attempt <= 2)) return 'retryable';
  return 'ok';
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export const handlers = {
  soak: async (context: JobContext<SoakPayload>): Promise<SoakResult> => {
    const file = process.env['SOAK_LEDGER'];
    if (file === undefined) throw new Error('SOAK_LEDGER is not set');
    const { fate, workMs } = context.payload;
    await pause(workMs / 2);
    const line: LedgerLine = {
      id: context.id,
      exec: randomBytes(8).toString('hex'),
      fence: context.fence,
      attempt: context.attempt,
      pid: process.pid,
      outcome: outcomeOf(fate, context.attempt),
    };
    // One short O_APPEND write: lines from several processes do not interleave.
    appendFileSync(file, `${JSON.stringify(line)}\n`);
    await pause(workMs / 2);
    if (line.outcome === 'permanent') throw new PermanentJobError('the soak policy refuses this payload', PERMANENT_CODE);
    if (line.outcome === 'retryable') throw Object.assign(new Error('the soak policy fails this attempt'), { code: RETRYABLE_CODE });
    return { exec: line.exec, fence: line.fence, pid: line.pid };
  },
};

export default handlers;
