/**
 * One HTTP exchange over an undici Pool, through its low-level dispatch API.
 * `pool.request()` wraps every response body in a Readable stream; our bodies
 * are small JSON documents read whole, and skipping the stream takes about a
 * fifth off the client's CPU per request, which shows at tens of thousands of
 * requests a second on a two-core machine shared with the coordinator.
 */

import type { Pool } from 'undici';

export interface Exchange {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string | undefined;
  readonly signal: AbortSignal | undefined;
  readonly timeoutMs: number;
}

export interface RawResponse {
  readonly status: number;
  /** Lowercased names; a repeated header keeps its first value. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

const EMPTY = Buffer.alloc(0);

export function exchange(pool: Pool, request: Exchange): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const { signal } = request;
    if (signal?.aborted === true) {
      reject(signal.reason);
      return;
    }
    let status = 0;
    const headers: Record<string, string> = {};
    const chunks: Buffer[] = [];
    let abortRequest: ((error?: Error) => void) | undefined;
    const onAbort = (): void => abortRequest?.(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    const cleanup = (): void => signal?.removeEventListener('abort', onAbort);
    signal?.addEventListener('abort', onAbort, { once: true });
    pool.dispatch(
      {
        method: request.method,
        path: request.path,
        headers: request.headers,
        body: request.body ?? null,
        headersTimeout: request.timeoutMs,
        bodyTimeout: request.timeoutMs,
      },
      {
        onConnect(abort) {
          abortRequest = abort;
          if (signal?.aborted === true) onAbort();
        },
        onError(error) {
          cleanup();
          reject(error);
        },
        onHeaders(statusCode, raw) {
          status = statusCode;
          for (let i = 0; i + 1 < raw.length; i += 2) {
            const name = String(raw[i]).toLowerCase();
            if (headers[name] === undefined) headers[name] = String(raw[i + 1]);
          }
          return true;
        },
        onData(chunk) {
          chunks.push(chunk);
          return true;
        },
        onComplete() {
          cleanup();
          resolve({ status, headers, body: chunks.length === 0 ? EMPTY : chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks) });
        },
      },
    );
  });
}
