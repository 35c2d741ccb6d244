/**
 * Reading the coordinator's answers: their JSON bodies and headers, their
 * `{error:{code,message,details}}` bodies as LeaseholdApiError (with Retry-After), and
 * the driver's code of a request that got no answer, said in words.
 */

import { systemClock } from '../core/clock.js';
import type { ErrorDetails } from '../protocol/common.js';
import { LeaseholdApiError, parseRetryAfter } from './errors.js';
import type { Exchange, RawResponse } from './transport.js';

const NETWORK_CODES: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'nothing accepts connections there (is the coordinator running, on this host and port?)',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name could not be resolved (DNS did not answer)',
  ECONNRESET: 'the connection was reset',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  ETIMEDOUT: 'the connection timed out',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  UND_ERR_HEADERS_TIMEOUT: 'no answer within the timeout',
  UND_ERR_BODY_TIMEOUT: 'the answer stopped arriving within the timeout',
  UND_ERR_SOCKET: 'the connection closed before the answer',
};

export function describeNetworkCode(code: string | undefined): string {
  if (code === undefined) return 'connection error';
  const meaning = NETWORK_CODES[code];
  return meaning === undefined ? code : `${code}: ${meaning}`;
}

export function header(response: RawResponse, name: string): string | undefined {
  return response.headers[name];
}

export function parseJson<T>(response: RawResponse): T {
  // The coordinator serializes its answers with the same schemas the types come from.
  return JSON.parse(response.body.toString('utf8')) as T;
}

export function apiError(method: Exchange['method'], path: string, response: RawResponse): LeaseholdApiError {
  const retryAfter = parseRetryAfter(response.headers['retry-after'], systemClock.now());
  let code = `http_${response.status}`;
  let message = `${method} ${path.split('?')[0] ?? path} answered ${response.status}`;
  let details: ErrorDetails | undefined;
  try {
    const parsed = JSON.parse(response.body.toString('utf8')) as unknown;
    if (typeof parsed === 'object' && parsed !== null && 'error' in parsed) {
      const error = (parsed as { error: unknown }).error;
      if (typeof error === 'object' && error !== null) {
        const fields = error as { code?: unknown; message?: unknown; details?: unknown };
        if (typeof fields.code === 'string') code = fields.code;
        if (typeof fields.message === 'string') message = fields.message;
        details = errorDetails(fields.details);
      }
    }
  } catch {
    // Not JSON (a proxy's error page, say): keep the generic code.
  }
  return new LeaseholdApiError(response.status, code, message, retryAfter, details);
}

/** The details an error body names, as far as they have the expected types. */
function errorDetails(value: unknown): ErrorDetails | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const jobId = (value as { jobId?: unknown }).jobId;
  return typeof jobId === 'string' ? { jobId } : {};
}

export function networkCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
