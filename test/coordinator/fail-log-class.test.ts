/**
 * The log line of a worker's fail carries the failure class the store decided
 * and stored with the ending, the same one GET /jobs/{id} shows: a retryable
 * fail whose next retry would pass the job's deadline is `deadline_exceeded`,
 * a retryable fail on the last attempt `attempts_exhausted`, a non-retryable
 * one `permanent`. Runs on every backend.
 */

import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { backends, bearer, drainAfterAll, enqueue, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';

describe.each(backends)('the failure class of a fail in the log ($name)', (backend) => {
  let h: Harness | undefined;
  let app: FastifyInstance | undefined;
  drainAfterAll(backend);
  afterEach(async () => {
    await app?.close();
    await h?.close();
    app = undefined;
    h = undefined;
  });

  const cases = [
    { name: 'deadline_exceeded', job: { deadlineMs: 60_000 }, retryable: true },
    { name: 'attempts_exhausted', job: { maxAttempts: 1 }, retryable: true },
    { name: 'permanent', job: {}, retryable: false },
  ] as const;

  for (const { name, job, retryable } of cases) {
    it(`logs ${name} when the store ends the job so`, async () => {
      h = await startCoordinator({ reaperIntervalMs: 0 }, { backend });
      const lines: string[] = [];
      const stream = new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) });
      app = await buildCoordinator({ store: h.store, logger: pino({ level: 'info' }, stream), config: { reaperIntervalMs: 0 } });
      // A backoff of an hour: the retry of a job with a minute's deadline would come after it.
      await app.inject({ method: 'PUT', url: '/kinds/k', headers: bearer(h.keys.admin), payload: { backoff: { baseMs: 3_600_000, maxMs: 3_600_000 } } });
      const id = ((await enqueue(app, h.keys.producer, { kind: 'k', payload: {}, ...job })).json() as { id: string }).id;
      const [leased] = await lease(app, h.keys.worker, { workerId: 'w', kinds: ['k'] });
      expect(leased?.id).toBe(id);
      const failed = await post(app, h.keys.worker, `/jobs/${id}/fail`, { token: leased?.token, error: { code: 'boom' }, retryable });
      expect(failed.json()).toMatchObject({ status: 'dead' });
      const stored = (await app.inject({ method: 'GET', url: `/jobs/${id}`, headers: bearer(h.keys.admin) })).json() as { lastError: { class: string } };
      expect(stored.lastError.class).toBe(name);
      const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((entry) => entry['msg'] === 'job dead' && entry['jobId'] === id);
      expect(logged).toMatchObject({ failureClass: name, errorCode: 'boom' });
    });
  }
});
