/**
 * Secrets never reach a log, with a positive control: real objects that carry
 * an `authorization` header, a lease token and an API key are logged at every
 * level through each logger leasehold creates (the coordinator's, its request
 * loggers and error log, and the CLI's logger used by `serve`, `worker` and
 * `dev`). Each secret must appear only as [redacted]. The same objects through
 * a logger without redaction do show the secrets, so the search can find them.
 */

import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { cliLogger } from '../../src/cli/logger.js';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { newApiKey, newLeaseToken } from '../../src/core/ids.js';
import type { Store } from '../../src/store/store.js';
import { backends, bearer, drainAfterAll, startCoordinator, type Harness } from '../support/http-fixtures.js';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
const API_KEY = newApiKey();
const TOKEN = newLeaseToken();
const REDACTED = '[redacted]';

/** What a request, a lease and a key look like where code might log them. */
function secretBearing(): Record<string, unknown> {
  return {
    req: { method: 'POST', url: '/lease', headers: { authorization: `Bearer ${API_KEY}`, host: 'x' } },
    headers: { authorization: `Bearer ${API_KEY}` },
    request: { headers: { authorization: `Bearer ${API_KEY}` } },
    authorization: `Bearer ${API_KEY}`,
    token: TOKEN,
    apiKey: API_KEY,
    key: API_KEY,
    lease: { id: 'job-1', token: TOKEN },
    client: { apiKey: API_KEY },
  };
}

function capture(): { readonly lines: string[]; readonly stream: Writable } {
  const lines: string[] = [];
  return { lines, stream: new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) }) };
}

function logAtEveryLevel(logger: Pick<Logger, (typeof LEVELS)[number]>, tag: string): void {
  for (const level of LEVELS) logger[level](secretBearing(), `${tag} at ${level}`);
}

/** Every level wrote its line, every secret-bearing field says [redacted], and no secret is anywhere in the text. */
function expectRedactedAtEveryLevel(lines: readonly string[], tag: string): void {
  const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => String(entry['msg']).startsWith(`${tag} at `));
  expect(entries.map((entry) => entry['msg'])).toEqual(LEVELS.map((level) => `${tag} at ${level}`));
  for (const entry of entries) {
    // Fastify's own serializer writes `req` without its headers; pino's keeps them, redacted.
    const req = entry['req'] as { method?: unknown; headers?: { authorization?: unknown } } | undefined;
    expect(req?.method).toBe('POST');
    expect([undefined, REDACTED]).toContain(req?.headers?.authorization);
    expect(entry).toMatchObject({
      headers: { authorization: REDACTED },
      request: { headers: { authorization: REDACTED } },
      authorization: REDACTED,
      token: REDACTED,
      apiKey: REDACTED,
      key: REDACTED,
      lease: { id: 'job-1', token: REDACTED },
      client: { apiKey: REDACTED },
    });
  }
  const text = lines.join('');
  expect(text).not.toContain(API_KEY);
  expect(text).not.toContain(TOKEN);
}

it('the control: without redaction the same objects show the key and the token', () => {
  const { lines, stream } = capture();
  logAtEveryLevel(pino({ level: 'trace' }, stream), 'plain');
  expect(lines).toHaveLength(LEVELS.length);
  for (const line of lines) {
    expect(line).toContain(API_KEY);
    expect(line).toContain(TOKEN);
  }
});

it("redacts at every level through the CLI's logger (serve, worker, dev)", async () => {
  for (const name of ['leasehold', 'leasehold-worker', 'leasehold-dev']) {
    const { lines, stream } = capture();
    logAtEveryLevel(await cliLogger(name, 'trace', stream), name);
    expectRedactedAtEveryLevel(lines, name);
  }
});

describe.each(backends)('coordinator logs ($label)', (backend) => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });
  drainAfterAll(backend);

  it('redacts at every level through the app logger, a request logger and the error log of a failed request', async () => {
    h = await startCoordinator({}, { backend });
    const { lines, stream } = capture();
    // A store whose lease fails with an error that carries the secrets, as a driver error might: the error handler logs it.
    const failing = new Proxy(h.store, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as unknown;
        if (property === 'jobLeaseWithNextDue') {
          return () => Promise.reject(Object.assign(new Error('lease exploded'), { token: TOKEN, apiKey: API_KEY, authorization: `Bearer ${API_KEY}` }));
        }
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    }) as Store;
    const app = await buildCoordinator({ store: failing, logger: pino({ level: 'trace' }, stream), config: { reaperIntervalMs: 0 } });
    try {
      app.addHook('onRequest', async (request) => logAtEveryLevel(request.log, 'request'));
      logAtEveryLevel(app.log, 'app');
      const answer = await app.inject({
        method: 'POST',
        url: '/lease',
        headers: { ...bearer(h.keys.worker), 'content-type': 'application/json' },
        payload: { workerId: 'w1' },
      });
      expect(answer.statusCode).toBe(500);
      expectRedactedAtEveryLevel(lines, 'app');
      expectRedactedAtEveryLevel(lines, 'request');
      const failed = lines.map((line) => JSON.parse(line) as { msg?: string; err?: Record<string, unknown> }).filter((entry) => entry.msg === 'request failed');
      expect(failed).toHaveLength(1);
      expect(failed[0]?.err).toMatchObject({ message: 'lease exploded', token: REDACTED, apiKey: REDACTED, authorization: REDACTED });
      const text = lines.join('');
      for (const secret of [API_KEY, TOKEN, h.keys.worker]) expect(text).not.toContain(secret);
    } finally {
      await app.close();
    }
  });
});
