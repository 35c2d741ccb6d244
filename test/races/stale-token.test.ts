/**
 * The stale-token matrix (issue 5, item 2), over HTTP on every backend.
 * Worker A leases a job and its lease expires; worker B leases the job again.
 * Every call A can make with its old token — renew (with progress),
 * checkpoint, effect, complete (JSON and bytes), fail (retryable or not), and
 * a batch complete — is refused with 409 `stale_lease` (a `rejected` entry in
 * the batch), and B's attempt is untouched: epoch, lease, checkpoint,
 * progress, effect mark, attempts and result are exactly as B left them, and
 * B goes on to renew, checkpoint and complete. After B's success, A's calls
 * are still refused and B's result stands. The matrix runs with A and B under
 * different worker ids and under the same one (a worker name is not a
 * fence), with A's calls sent one after another and all at once.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobRecord } from '../../src/store/store.js';
import { backends, drainAfterAll, enqueue, errorCode, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';

interface Call {
  readonly name: string;
  readonly url: string;
  readonly body: unknown;
}

/** Everything A could send with its token, for job `id`. */
function staleCalls(id: string, token: string): Call[] {
  return [
    { name: 'renew', url: `/jobs/${id}/renew`, body: { token, leaseMs: 600_000, progress: { from: 'A' } } },
    { name: 'checkpoint', url: `/jobs/${id}/checkpoint`, body: { token, step: 99, state: { from: 'A' } } },
    { name: 'effect', url: `/jobs/${id}/effect`, body: { token } },
    { name: 'complete', url: `/jobs/${id}/complete`, body: { token, result: { from: 'A' } } },
    {
      name: 'complete bytes',
      url: `/jobs/${id}/complete`,
      body: { token, resultBytes: { contentType: 'text/plain', base64: Buffer.from('A').toString('base64') } },
    },
    { name: 'fail permanent', url: `/jobs/${id}/fail`, body: { token, error: { code: 'from_a' }, retryable: false } },
    { name: 'fail retryable', url: `/jobs/${id}/fail`, body: { token, error: { code: 'from_a' } } },
    { name: 'batch complete', url: '/complete', body: { completions: [{ id, token, result: { from: 'A' } }] } },
  ];
}

const lines: string[] = [];
afterAll(() => {
  for (const line of lines) console.log(line);
});

describe.each(backends)('stale tokens ($name)', (backend) => {
  let h: Harness;
  let refused = 0;
  drainAfterAll(backend);

  beforeAll(async () => {
    h = await startCoordinator({ authCacheMs: 60_000 }, { backend, manualClock: true });
  });
  afterAll(async () => {
    lines.push(`stale-token matrix (${backend.name}): ${refused} calls with a stale token, all refused with 409 stale_lease, B untouched`);
    await h?.close();
  });

  /** Sends A's calls and checks that each is refused as stale. */
  async function expectAllStale(calls: readonly Call[], together: boolean): Promise<void> {
    const send = (call: Call) => post(h.app, h.keys.worker, call.url, call.body);
    const answers = together
      ? await Promise.all(calls.map(send))
      : await calls.reduce(async (done, call) => [...(await done), await send(call)], Promise.resolve([] as Awaited<ReturnType<typeof send>>[]));
    answers.forEach((answer, i) => {
      const call = calls[i] as Call;
      if (call.name === 'batch complete') {
        expect(answer.statusCode, call.name).toBe(200);
        expect((answer.json() as { results: unknown[] }).results, call.name).toEqual([{ id: expect.any(String), status: 'rejected', code: 'stale_lease' }]);
      } else {
        expect(answer.statusCode, `${call.name}: ${answer.body}`).toBe(409);
        expect(errorCode(answer), call.name).toBe('stale_lease');
      }
      refused += 1;
    });
  }

  async function recordOf(id: string): Promise<{ job: JobRecord | null; attempts: unknown }> {
    return {
      job: await h.store.jobGet({ scope: { tenant: 't1' }, id }),
      attempts: await h.store.jobAttempts({ scope: { tenant: 't1' }, id }),
    };
  }

  for (const sameWorker of [false, true]) {
    for (const together of [false, true]) {
      it(`A and B ${sameWorker ? 'share a worker id' : 'have their own worker ids'}; A's calls ${together ? 'all at once' : 'one by one'}`, async () => {
        const workerA = sameWorker ? 'worker-x' : 'worker-a';
        const workerB = sameWorker ? 'worker-x' : 'worker-b';
        const kind = `stale-${sameWorker}-${together}`;
        const enqueued = await enqueue(h.app, h.keys.producer, { kind, payload: { n: 1 }, maxAttempts: 5 });
        expect(enqueued.statusCode).toBe(202);
        const id = (enqueued.json() as { id: string }).id;

        // A's lease is short; on PostgreSQL (a real clock) long enough for A's checkpoint on a loaded machine.
        const leaseMsA = backend.name === 'sqlite' ? 100 : 1_500;
        const [a] = await lease(h.app, h.keys.worker, { workerId: workerA, kinds: [kind], leaseMs: leaseMsA });
        expect(a?.id).toBe(id);
        const tokenA = a?.token ?? '';
        expect((await post(h.app, h.keys.worker, `/jobs/${id}/checkpoint`, { token: tokenA, step: 1, state: { from: 'A' } })).statusCode).toBe(200);
        await h.time.advance(leaseMsA + 50);

        // A's lease has run out and nobody holds the job: A is refused already, and stores nothing.
        await expectAllStale(
          staleCalls(id, tokenA).filter((call) => call.name === 'renew' || call.name === 'complete'),
          together,
        );
        const between = await recordOf(id);
        expect(between.job?.result).toBeNull();
        expect(between.job?.status === 'running' || between.job?.status === 'queued').toBe(true);

        const [b] = await lease(h.app, h.keys.worker, { workerId: workerB, kinds: [kind], leaseMs: 600_000 });
        expect(b?.id).toBe(id);
        expect(b?.epoch).toBe((a?.epoch ?? 0) + 1);
        expect(b?.token).not.toBe(tokenA);
        const tokenB = b?.token ?? '';
        expect((await post(h.app, h.keys.worker, `/jobs/${id}/checkpoint`, { token: tokenB, step: 5, state: { from: 'B' } })).statusCode).toBe(200);
        expect((await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token: tokenB, leaseMs: 600_000, progress: { from: 'B' } })).statusCode).toBe(200);
        const beforeA = await recordOf(id);
        expect(beforeA.job?.epoch).toBe(b?.epoch);
        expect(beforeA.job?.leaseOwner).toBe(workerB);

        await expectAllStale(staleCalls(id, tokenA), together);
        expect(await recordOf(id), "B's attempt after A's stale calls").toEqual(beforeA);

        // B goes on as if nothing happened.
        expect((await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token: tokenB, leaseMs: 600_000 })).statusCode).toBe(200);
        expect((await post(h.app, h.keys.worker, `/jobs/${id}/effect`, { token: tokenB })).statusCode).toBe(200);
        const completed = await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token: tokenB, result: { from: 'B' } });
        expect(completed.statusCode, completed.body).toBe(200);
        const afterB = await recordOf(id);
        expect(afterB.job?.status).toBe('succeeded');
        expect(JSON.parse(afterB.job?.result?.body.toString('utf8') ?? 'null')).toEqual({ from: 'B' });

        // After B's success A is still refused, and B's result stands.
        await expectAllStale(staleCalls(id, tokenA), together);
        expect(await recordOf(id), "the succeeded job after A's stale calls").toEqual(afterB);
        const attempts = (afterB.attempts ?? []) as { epoch: number; workerId: string; outcome: string | null }[];
        expect(attempts.map((x) => [x.epoch, x.workerId, x.outcome])).toEqual([
          [a?.epoch, workerA, 'expired'],
          [b?.epoch, workerB, 'succeeded'],
        ]);
      });
    }
  }
});
