/**
 * A handler's failure is logged at the worker with its message and stack
 * (secrets redacted), while the coordinator stores one sanitized line: the
 * stack never leaves the worker process.
 */

import { afterEach, expect, it } from 'vitest';
import { Worker } from '../../src/worker/worker.js';
import type { WorkerLogger } from '../../src/worker/logger.js';
import { startLiveCoordinator, type LiveCoordinator } from '../client/live-coordinator.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

interface Entry {
  readonly level: string;
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

function capturingLogger(entries: Entry[]): WorkerLogger {
  const at = (level: string) => (fields: Record<string, unknown>, message: string) => {
    entries.push({ level, fields, message });
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

function failInvoice(): never {
  throw Object.assign(new Error('the invoice service answered 502 for key SECRET-KEY-123456\nbody: <html>bad gateway</html>'), {
    code: 'upstream_502',
    retryable: false,
  });
}

it('logs a failing handler with its message and stack at the worker, and sends the coordinator one line without the stack', async () => {
  const live: LiveCoordinator = await startLiveCoordinator({});
  cleanups.push(() => live.close());
  const entries: Entry[] = [];
  const worker = new Worker({
    client: live.client('worker'),
    handlers: { invoice: () => failInvoice() },
    concurrency: 1,
    waitMs: 1_000,
    logger: capturingLogger(entries),
    secrets: ['SECRET-KEY-123456'],
  });
  const running = worker.run();
  cleanups.push(async () => {
    await worker.stop({ graceMs: 0 });
    await running.catch(() => undefined);
  });
  const producer = live.client('producer');
  const { job } = await producer.enqueue({ kind: 'invoice', payload: {} });
  const dead = await producer.waitForJob(job.id, { timeoutMs: 20_000 });
  expect(dead.status).toBe('dead');

  const logged = entries.find((e) => e.message === 'handler failed');
  expect(logged?.level).toBe('warn');
  expect(logged?.fields).toMatchObject({ jobId: job.id, code: 'upstream_502', retryable: false, errorName: 'Error' });
  expect(String(logged?.fields['errorMessage'])).toContain('the invoice service answered 502 for key [redacted]\nbody: <html>bad gateway</html>');
  const stack = String(logged?.fields['stack']);
  expect(stack).toContain('failInvoice');
  expect(stack).toMatch(/failure-logging\.test\.ts:\d+:\d+/);
  expect(JSON.stringify(entries)).not.toContain('SECRET-KEY-123456');

  expect(dead.lastError).toEqual({ code: 'upstream_502', message: 'the invoice service answered 502 for key [redacted]', class: 'permanent' });
  expect(JSON.stringify(dead)).not.toContain('failure-logging.test.ts');
});
