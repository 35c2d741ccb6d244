/**
 * How a handler's failure becomes the `{code, message}` the coordinator
 * stores, and why a job's signal was aborted. The stored message is read by
 * operators, so it is one short line: no stack, no control characters, no
 * secret this process knows of.
 */

import { LIMITS } from '../protocol/limits.js';

/**
 * Throw this (or any error with `retryable = false`) to fail a job for good:
 * it goes to `dead` at once instead of being retried.
 */
export class PermanentJobError extends Error {
  readonly code: string;
  readonly retryable = false;

  constructor(message: string, code = 'permanent_error') {
    super(message);
    this.name = 'PermanentJobError';
    this.code = code;
  }
}

export type AbortCode = 'stale_lease' | 'cancelled' | 'deadline_exceeded' | 'not_found' | 'lease_lost' | 'shutdown';

/** The reason on a handler's aborted signal. */
export class JobAbortedError extends Error {
  readonly code: AbortCode;

  constructor(code: AbortCode, message: string) {
    super(message);
    this.name = 'JobAbortedError';
    this.code = code;
  }
}

const MAX_MESSAGE_CHARS = 1_000;
const CODE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/;

export interface FailureReport {
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
}

/** Turns whatever a handler threw into a fail request body. `secrets` are redacted from the message. */
export function describeFailure(thrown: unknown, secrets: readonly string[]): FailureReport {
  let code = 'handler_error';
  let message: string;
  let retryable = true;
  if (thrown instanceof Error) {
    message = thrown.message;
  } else if (typeof thrown === 'string') {
    message = thrown;
  } else {
    message = `non-error value thrown: ${safeString(thrown)}`;
  }
  if (typeof thrown === 'object' && thrown !== null) {
    const fields = thrown as { code?: unknown; retryable?: unknown };
    if (typeof fields.code === 'string' && fields.code.length <= LIMITS.errorCodeLength && CODE_PATTERN.test(fields.code)) {
      code = fields.code;
    }
    if (fields.retryable === false) retryable = false;
  }
  return { code, message: sanitizeMessage(message, secrets), retryable };
}

/**
 * What the worker's own log says about a handler's failure: the error's
 * class, whole message and stack, with the secrets this process knows
 * redacted. It stays in this process's log; the coordinator gets only
 * describeFailure's one line.
 */
export function handlerFailureLogFields(thrown: unknown, secrets: readonly string[]): Record<string, unknown> {
  const redact = (text: string): string => secrets.reduce((acc, secret) => (secret.length >= 8 ? acc.split(secret).join('[redacted]') : acc), text);
  if (thrown instanceof Error) {
    return { errorName: thrown.name, errorMessage: redact(thrown.message), ...(thrown.stack === undefined ? {} : { stack: redact(thrown.stack) }) };
  }
  return { errorMessage: redact(typeof thrown === 'string' ? thrown : `non-error value thrown: ${safeString(thrown)}`) };
}

export function sanitizeMessage(message: string, secrets: readonly string[]): string {
  let text = message;
  for (const secret of secrets) {
    if (secret.length >= 8) text = text.split(secret).join('[redacted]');
  }
  // One line: a multi-line message is usually a message followed by a stack or a dump.
  text = text.split(/\r?\n/, 1)[0] ?? '';
  // eslint-disable-next-line no-control-regex
  text = text.replace(/[\u0000-\u001f\u007f]/g, ' ').trim();
  if (text.length > MAX_MESSAGE_CHARS) text = `${text.slice(0, MAX_MESSAGE_CHARS - 1)}…`;
  return text === '' ? 'handler failed without a message' : text;
}

function safeString(value: unknown): string {
  try {
    return String(value).slice(0, 200);
  } catch {
    return typeof value;
  }
}
