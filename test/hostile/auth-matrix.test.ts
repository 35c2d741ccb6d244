/**
 * The authentication and scoping matrix (issue 5, item 4), on every backend:
 *
 * - every authenticated endpoint answers 401 `unauthorized` to a missing,
 *   malformed, unknown or revoked key (of every role), before it looks at
 *   the body; a key revoked after it was used is refused at once with the
 *   auth cache off;
 * - every endpoint answers 403 `forbidden` to a role it does not admit;
 * - every endpoint that addresses a job answers a job of another tenant —
 *   and, for producers, of another user — exactly as it answers an id that
 *   does not exist (same status, same body), in every state the job can be
 *   in, even when the caller presents the job's live lease token;
 *
 * and none of these requests changes anything in the database.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey, newApiKey, newJobId } from '../../src/core/ids.js';
import { ROLES, type Role } from '../../src/core/states.js';
import { Ref, type JobIdChoice } from '../support/arbitraries.js';
import { backends, bearer, createKey, drainAfterAll, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { checkAnswer, ENDPOINTS, storeSnapshot, Tally, World, type Endpoint, type SentRequest } from '../support/hostile-world.js';

const tally = new Tally();

afterAll(() => {
  console.log(tally.line(`hostile input (auth matrix, ${backends.map((b) => b.name).join('+')})`));
});

const AUTHENTICATED = ENDPOINTS.filter((e): e is Endpoint & { roles: readonly Role[] } => e.roles !== 'public');
const ADDRESSING_A_JOB = AUTHENTICATED.filter((e) => e.route.includes(':id') || e.route === '/complete');
const STATES: readonly JobIdChoice[] = ['queued', 'running', 'succeeded', 'dead', 'cancelled', 'unknown'];

/** A valid body for each endpoint, for the job `id` under `token`. */
function validBody(endpoint: Endpoint, id: string, token: string): unknown {
  switch (endpoint.route) {
    case '/jobs':
      return { kind: 'email', payload: { auth: true } };
    case '/jobs/batch':
      return { jobs: [{ idempotencyKey: 'auth-batch', kind: 'email', payload: 1 }] };
    case '/lease':
      return { workerId: 'intruder', leaseMs: 60_000 };
    case '/jobs/:id/renew':
      return { token, leaseMs: 60_000, progress: { done: 1 } };
    case '/jobs/:id/effect':
      return { token };
    case '/jobs/:id/checkpoint':
      return { token, step: 7, state: { evil: true } };
    case '/jobs/:id/complete':
      return { token, result: { evil: true } };
    case '/complete':
      return { completions: [{ id, token, result: { evil: true } }] };
    case '/jobs/:id/fail':
      return { token, error: { code: 'evil' }, retryable: false };
    case '/jobs/:id/reconcile':
      return { outcome: 'succeeded' };
    case '/jobs/bulk':
      return { action: 'requeue', filter: {} };
    case '/kinds/:kind':
      return { maxAttempts: 1 };
    case '/schedules/:name':
      return endpoint.method === 'PUT' ? { kind: 'email', payload: 1, cron: '@yearly' } : undefined;
    case '/jobs/purge':
      return { olderThanMs: 3_600_000, dryRun: true };
    default:
      return endpoint.method === 'GET' ? undefined : {};
  }
}

describe.each(backends)('auth matrix ($name)', (backend) => {
  let h: Harness;
  let world: World;
  let baseline: string;
  const revoked: Partial<Record<Role, string>> = {};
  drainAfterAll(backend);

  beforeAll(async () => {
    h = await startCoordinator({ authCacheMs: 0, kindCacheMs: 0, defaultLeaseMs: 86_400_000, schedulerMaxSleepMs: 0 }, { backend, manualClock: true });
    world = await World.seed(h);
    for (const role of ROLES) {
      const key = newApiKey();
      const id = `revoked-${role}-${Date.now()}`;
      await h.store.apiKeyInsert({ id, tenant: 't1', user: role === 'producer' ? 'alice' : `${role}-x`, role, keyHash: hashApiKey(key) });
      expect(await h.store.apiKeyRevoke({ id })).toBe(true);
      revoked[role] = key;
    }
    baseline = await storeSnapshot(h.store);
  });
  afterAll(async () => {
    await h?.close();
  });

  function request(endpoint: Endpoint, headers: Record<string, string>, id: string, token: string): SentRequest {
    const body = validBody(endpoint, id, token);
    return {
      method: endpoint.method,
      url: endpoint.route.replace(':id', id).replace(':kind', 'email').replace(':name', 'auth-schedule'),
      headers: { 'idempotency-key': 'auth-matrix', ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    };
  }

  async function send(sent: SentRequest): Promise<{ status: number; code: string | undefined; body: string }> {
    const response = await h.app.inject({
      method: sent.method as 'GET',
      url: sent.url,
      headers: sent.headers as Record<string, string>,
      ...(sent.payload === undefined ? {} : { payload: sent.payload }),
    });
    return { status: response.statusCode, code: checkAnswer(response, sent, tally), body: response.body };
  }

  async function expectUnchanged(context: string): Promise<void> {
    const after = await storeSnapshot(h.store);
    if (after !== baseline) expect(JSON.parse(after), `the database changed after ${context}`).toEqual(JSON.parse(baseline));
  }

  it('covers every route of /openapi.json', async () => {
    const document = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, unknown>> };
    const served = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
    );
    expect(served.sort()).toEqual(ENDPOINTS.map((e) => `${e.method} ${e.route}`).sort());
    expect(AUTHENTICATED.length).toBe(ENDPOINTS.length - 4);
  });

  it('401 for a missing, malformed, unknown or revoked key on every authenticated endpoint, whatever the body', async () => {
    const unknown = newApiKey();
    const credentials: [string, Record<string, string>][] = [
      ['missing', {}],
      ['empty', { authorization: '' }],
      ['scheme only', { authorization: 'Bearer' }],
      ['no scheme', { authorization: h.keys.admin }],
      ['basic', { authorization: `Basic ${Buffer.from(`admin:${h.keys.admin}`).toString('base64')}` }],
      ['two keys', { authorization: `Bearer ${h.keys.admin} ${h.keys.admin}` }],
      ['bad characters', { authorization: `Bearer ${h.keys.admin}!` }],
      ['too long', { authorization: `Bearer ${'a'.repeat(300)}` }],
      ['SQL', { authorization: "Bearer ' OR '1'='1" }],
      ['unknown', bearer(unknown)],
      ['truncated', bearer(h.keys.admin.slice(0, -2))],
      ...ROLES.map((role): [string, Record<string, string>] => [`revoked ${role}`, bearer(revoked[role] ?? '')]),
    ];
    const id = world.resolve(new Ref('jobId', 'running'));
    const token = world.resolve(new Ref('token', 'live'));
    for (const endpoint of AUTHENTICATED) {
      for (const [name, headers] of credentials) {
        const answer = await send(request(endpoint, headers, id, token));
        expect(answer.status, `${endpoint.method} ${endpoint.route} with a ${name} key: ${answer.body}`).toBe(401);
        expect(answer.code).toBe('unauthorized');
      }
      // Authentication comes before the body is looked at: a broken body is still a 401.
      const broken = await send({ ...request(endpoint, {}, id, token), payload: '{"broken":', headers: { 'content-type': 'application/json' } });
      expect(broken.code, `${endpoint.route} with a broken body`).toBe('unauthorized');
    }
    await expectUnchanged('unauthenticated requests');
  });

  it('a key revoked after use is refused at once (auth cache off)', async () => {
    const key = await createKey(h.store, 't1', 'alice', 'producer');
    expect((await send({ method: 'GET', url: '/jobs?limit=1', headers: bearer(key) })).status).toBe(200);
    const record = await h.store.apiKeyFindByHash(hashApiKey(key));
    expect(await h.store.apiKeyRevoke({ id: record?.id ?? '' })).toBe(true);
    expect((await send({ method: 'GET', url: '/jobs?limit=1', headers: bearer(key) })).code).toBe('unauthorized');
    baseline = await storeSnapshot(h.store);
  });

  it('403 for every role an endpoint does not admit', async () => {
    const keyOf: Record<Role, string> = { producer: h.keys.producer, worker: h.keys.worker, admin: h.keys.admin };
    const id = world.resolve(new Ref('jobId', 'running'));
    const token = world.resolve(new Ref('token', 'live'));
    let checked = 0;
    for (const endpoint of AUTHENTICATED) {
      for (const role of ROLES.filter((r) => !endpoint.roles.includes(r))) {
        const answer = await send(request(endpoint, bearer(keyOf[role]), id, token));
        expect(answer.code, `${role} on ${endpoint.method} ${endpoint.route}`).toBe('forbidden');
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThan(10);
    await expectUnchanged('forbidden requests');
  });

  describe('another tenant or user: 404 exactly like a missing id', () => {
    const missing = newJobId();

    /** The answer for a missing id, with the id itself masked so that bodies can be compared. */
    async function answerFor(endpoint: Endpoint, key: string, id: string, token: string): Promise<string> {
      const answer = await send(request(endpoint, bearer(key), id, token));
      return `${answer.status} ${answer.body.split(id).join('<id>')}`;
    }

    it('every endpoint that addresses a job, with a job of another tenant in every state, even with its live token', async () => {
      const intruders: Record<Role, string> = { producer: h.keys.otherProducer, worker: h.keys.otherWorker, admin: h.keys.otherAdmin };
      let compared = 0;
      for (const state of STATES) {
        world.beginRequest();
        const id = world.resolve(new Ref('jobId', state));
        // The live token when the job runs, otherwise the last token it had: the intruder knows it all.
        const token = world.resolve(new Ref('token', state === 'running' ? 'live' : 'stale'));
        expect(id, state).not.toBe(missing);
        for (const endpoint of ADDRESSING_A_JOB) {
          for (const role of endpoint.roles) {
            const intruder = intruders[role];
            const seen = await answerFor(endpoint, intruder, id, token);
            const none = await answerFor(endpoint, intruder, missing, token);
            expect(seen, `${role} of t2 on ${endpoint.method} ${endpoint.route}, a ${state} job of t1`).toBe(none);
            if (endpoint.route === '/complete') expect(seen).toContain('"code":"not_found"');
            else expect(seen).toMatch(/^404 /);
            compared += 1;
          }
        }
      }
      expect(compared).toBeGreaterThanOrEqual(STATES.length * ADDRESSING_A_JOB.length);
      await expectUnchanged("another tenant's requests");
    });

    it("a producer's routes, with another user's job in every state", async () => {
      let compared = 0;
      for (const state of STATES) {
        world.beginRequest();
        const id = world.resolve(new Ref('jobId', state));
        const token = world.resolve(new Ref('token', 'stale'));
        for (const endpoint of ADDRESSING_A_JOB.filter((e) => e.roles.includes('producer'))) {
          const seen = await answerFor(endpoint, h.keys.producer2, id, token);
          const none = await answerFor(endpoint, h.keys.producer2, missing, token);
          expect(seen, `bob on ${endpoint.method} ${endpoint.route}, alice's ${state} job`).toBe(none);
          expect(seen).toMatch(/^404 /);
          compared += 1;
        }
      }
      expect(compared).toBe(STATES.length * 4);
      await expectUnchanged("another user's requests");
    });

    it("lists and stats show nothing of another tenant's or user's jobs", async () => {
      const ids = (body: string): string[] => (JSON.parse(body) as { jobs: { id: string }[] }).jobs.map((j) => j.id);
      const ours = ids((await send({ method: 'GET', url: '/jobs?limit=1000', headers: bearer(h.keys.admin) })).body);
      expect(ours.length).toBeGreaterThan(5);
      for (const key of [h.keys.otherAdmin, h.keys.otherProducer]) {
        const theirs = ids((await send({ method: 'GET', url: '/jobs?limit=1000', headers: bearer(key) })).body);
        expect(theirs.filter((id) => ours.includes(id))).toEqual([]);
      }
      const bobs = ids((await send({ method: 'GET', url: '/jobs?limit=1000', headers: bearer(h.keys.producer2) })).body);
      const alices = ids((await send({ method: 'GET', url: '/jobs?limit=1000', headers: bearer(h.keys.producer) })).body);
      expect(bobs.filter((id) => alices.includes(id))).toEqual([]);
      const stats = JSON.parse((await send({ method: 'GET', url: '/stats', headers: bearer(h.keys.otherAdmin) })).body) as { counts: Record<string, number> };
      expect(Object.values(stats.counts).reduce((a, b) => a + b, 0)).toBe(1);
      await expectUnchanged('reads');
    });
  });
});
