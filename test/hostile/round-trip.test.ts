/**
 * Hostile strings where the API accepts any string are data, never code
 * (issue 5, item 4): SQL-injection strings, NUL, lone surrogates, bidi
 * controls and huge strings in a payload, a worker id, a checkpoint, a
 * progress value, a fail's error code and a result travel through the store
 * and come back exactly as sent, on every backend. JSON values come back
 * bit for bit (lone surrogates and NUL included, as JSON escapes); plain text
 * columns come back exactly when the text is storable everywhere (PostgreSQL
 * text holds no NUL and no unpaired surrogate: those become U+FFFD there).
 */

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostileString } from '../support/arbitraries.js';
import { backends, bearer, drainAfterAll, get, post, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { shortReport, Tally } from '../support/hostile-world.js';

/** LEASEHOLD_FUZZ_SCALE multiplies the runs for a longer hunt. */
const SCALE = Number(process.env['LEASEHOLD_FUZZ_SCALE'] ?? '') || 1;
const RUNS: Record<string, number> = { sqlite: 40 * SCALE, postgres: 20 * SCALE };
const tally = new Tally();
afterAll(() => {
  console.log(tally.line(`hostile input (round trips, ${backends.map((b) => b.name).join('+')})`));
});

/** Text every backend stores exactly. */
const storable = (s: string): boolean => !/[\u0000\ud800-\udfff]/u.test(s);
const json = fc.oneof(
  hostileString,
  fc.dictionary(
    hostileString.filter((s) => s.length < 50 && s !== '__proto__'),
    hostileString,
    { maxKeys: 3 },
  ),
  fc.array(hostileString, { maxLength: 3 }),
);
const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value), 'utf8');
/** Progress is for display: at most 4096 bytes of JSON (limits.test.ts checks the edge). */
const smallJson = json.filter((value) => jsonBytes(value) <= 4096);
/**
 * A checkpoint's state is at most 256 KiB of JSON (maxCheckpointBytes; shared-service.test.ts checks the limit): three
 * huge strings of NUL, each character six bytes as a JSON escape, would pass it.
 */
const checkpointJson = json.filter((value) => jsonBytes(value) <= 256 * 1024);
const short = hostileString.filter((s) => s.length >= 1 && s.length <= 128);

describe.each(backends)('round trips ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeAll(async () => {
    h = await startCoordinator({ authCacheMs: 60_000 }, { backend });
  });
  afterAll(async () => {
    await h?.close();
  });

  function ok(response: { statusCode: number; body: string }, what: string): void {
    tally.cases += 1;
    if (response.statusCode >= 500) tally.serverErrors += 1;
    expect(response.statusCode, `${what}: ${response.body.slice(0, 300)}`).toBeLessThan(300);
    tally.accepted += 1;
  }

  it('payload, worker id, checkpoint, progress, error code and result come back as sent', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        json,
        short.filter((s) => s.length <= 200),
        checkpointJson,
        smallJson,
        short,
        json,
        async (payload, workerId, state, progress, code, result) => {
          n += 1;
          const kind = `rt-${n}`;
          // A retry due at once, so the same job can be leased again straight after its fail.
          ok(
            await h.app.inject({ method: 'PUT', url: `/kinds/${kind}`, headers: bearer(h.keys.admin), payload: { backoff: { baseMs: 1, maxMs: 1 } } }),
            'kind',
          );
          const enqueued = await h.app.inject({
            method: 'POST',
            url: '/jobs',
            headers: { ...bearer(h.keys.producer), 'idempotency-key': `rt-${n}`, 'content-type': 'application/json' },
            payload: JSON.stringify({ kind, payload }),
          });
          ok(enqueued, 'enqueue');
          const id = (enqueued.json() as { id: string }).id;
          const leased = await post(h.app, h.keys.worker, '/lease', { workerId, kinds: [kind], leaseMs: 600_000 });
          ok(leased, 'lease');
          const first = (leased.json() as { jobs: { id: string; token: string; payload: unknown }[] }).jobs[0];
          expect(first?.id).toBe(id);
          expect(first?.payload).toEqual(payload);
          const token = first?.token ?? '';
          ok(await post(h.app, h.keys.worker, `/jobs/${id}/checkpoint`, { token, step: 3, state }), 'checkpoint');
          ok(await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token, leaseMs: 600_000, progress }), 'renew');
          const running = (await get(h.app, h.keys.producer, `/jobs/${id}`)).json() as { progress: unknown };
          expect(running.progress).toEqual(progress);
          ok(await post(h.app, h.keys.worker, `/jobs/${id}/fail`, { token, error: { code, message: 'x' }, retryable: true }), 'fail');
          const failed = (await get(h.app, h.keys.producer, `/jobs/${id}`)).json() as { lastError: { code: string } | null };
          if (storable(code)) expect(failed.lastError?.code).toBe(code);
          const again = await post(h.app, h.keys.worker, '/lease', { workerId, kinds: [kind], leaseMs: 600_000 });
          ok(again, 'lease again');
          const second = (again.json() as { jobs: { id: string; token: string; checkpoint: unknown }[] }).jobs[0];
          if (second === undefined) throw new Error('the failed job was not leased again');
          expect(second.checkpoint).toEqual({ step: 3, state });
          ok(await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token: second.token, result }), 'complete');
          const done = (await get(h.app, h.keys.producer, `/jobs/${id}`)).json() as { status: string; result: unknown };
          expect(done.status).toBe('succeeded');
          expect(done.result).toEqual(result);
          const attempts = (await get(h.app, h.keys.producer, `/jobs/${id}/attempts`)).json() as { attempts: { workerId: string; errorCode: string | null }[] };
          if (storable(workerId)) expect(attempts.attempts.map((a) => a.workerId)).toEqual([workerId, workerId]);
          if (storable(code)) expect(attempts.attempts[0]?.errorCode).toBe(code);
        },
      ),
      { numRuns: RUNS[backend.name] ?? 20, reporter: shortReport },
    );
  });
});
