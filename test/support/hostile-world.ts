/**
 * A seeded database for hostile-input tests, and the checks every hostile
 * answer must pass. The world holds, in tenant t1, a job in every state
 * (queued, running with a known live token and a stale one, succeeded with a
 * result, dead, cancelled, unknown), a job of another user, and in tenant t2
 * a running job with its token, so that generated requests reach past the
 * fence and the scoping into the deeper checks. It keeps itself topped up
 * when an accepted request uses a job up.
 *
 * `storeSnapshot` reads everything a request could change through the Store
 * interface (jobs with results, checkpoints and progress, attempt rows,
 * kinds, stats), so a test can show that a refused request changed nothing.
 */

import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { ERROR_CODES, isErrorCode } from '../../src/core/errors.js';
import { newJobId } from '../../src/core/ids.js';
import type { Role } from '../../src/core/states.js';
import type { Store } from '../../src/store/store.js';
import { Ref, type JobIdChoice } from './arbitraries.js';
import { bearer, type Harness } from './http-fixtures.js';

export const TENANTS = ['t1', 't2'] as const;

export interface Endpoint {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** The Fastify route pattern, e.g. `/jobs/:id/renew`. */
  readonly route: string;
  /** Roles admitted, or 'public'. */
  readonly roles: readonly Role[] | 'public';
}

/** Every route of the API; the hostile suites check this list against /openapi.json. */
export const ENDPOINTS: readonly Endpoint[] = [
  { method: 'POST', route: '/jobs', roles: ['producer', 'admin'] },
  { method: 'POST', route: '/jobs/batch', roles: ['producer', 'admin'] },
  { method: 'GET', route: '/jobs', roles: ['producer', 'admin'] },
  { method: 'GET', route: '/jobs/:id', roles: ['producer', 'admin'] },
  { method: 'GET', route: '/jobs/:id/result', roles: ['producer', 'admin'] },
  { method: 'GET', route: '/jobs/:id/attempts', roles: ['producer', 'admin'] },
  { method: 'POST', route: '/jobs/:id/cancel', roles: ['producer', 'admin'] },
  { method: 'POST', route: '/jobs/:id/requeue', roles: ['admin'] },
  { method: 'POST', route: '/jobs/:id/reconcile', roles: ['admin'] },
  { method: 'POST', route: '/jobs/purge', roles: ['admin'] },
  { method: 'POST', route: '/lease', roles: ['worker', 'admin'] },
  { method: 'POST', route: '/jobs/:id/renew', roles: ['worker', 'admin'] },
  { method: 'POST', route: '/jobs/:id/effect', roles: ['worker', 'admin'] },
  { method: 'POST', route: '/jobs/:id/checkpoint', roles: ['worker', 'admin'] },
  { method: 'POST', route: '/jobs/:id/complete', roles: ['worker', 'admin'] },
  { method: 'POST', route: '/complete', roles: ['worker', 'admin'] },
  { method: 'POST', route: '/jobs/:id/fail', roles: ['worker', 'admin'] },
  { method: 'PUT', route: '/kinds/:kind', roles: ['admin'] },
  { method: 'GET', route: '/kinds', roles: ['producer', 'worker', 'admin'] },
  { method: 'GET', route: '/kinds/:kind', roles: ['producer', 'worker', 'admin'] },
  { method: 'POST', route: '/kinds/:kind/pause', roles: ['admin'] },
  { method: 'POST', route: '/kinds/:kind/resume', roles: ['admin'] },
  { method: 'PUT', route: '/schedules/:name', roles: ['admin'] },
  { method: 'GET', route: '/schedules', roles: ['admin'] },
  { method: 'DELETE', route: '/schedules/:name', roles: ['admin'] },
  { method: 'POST', route: '/jobs/bulk', roles: ['admin'] },
  { method: 'GET', route: '/jobs/:id/detail', roles: ['admin'] },
  { method: 'GET', route: '/stats', roles: ['admin'] },
  { method: 'GET', route: '/metrics', roles: ['admin'] },
  { method: 'GET', route: '/healthz', roles: 'public' },
  { method: 'GET', route: '/openapi.json', roles: 'public' },
  { method: 'GET', route: '/ui', roles: 'public' },
  { method: 'GET', route: '/ui/assets/:file', roles: 'public' },
];

/** The endpoints as `METHOD /path/{param}`, the way /openapi.json names them. */
export function openApiRoutes(document: { paths: Record<string, Record<string, unknown>> }): string[] {
  return Object.entries(document.paths)
    .flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`))
    .sort();
}

export function endpointName(endpoint: Endpoint): string {
  return `${endpoint.method} ${endpoint.route.replace(/:(\w+)/g, '{$1}')}`;
}

/** Everything a request could change, as one comparable string (the store clock's "age" figures left out). */
export async function storeSnapshot(store: Store, tenants: readonly string[] = TENANTS): Promise<string> {
  const parts: unknown[] = [];
  for (const tenant of tenants) {
    const { oldestAvailableAgeMs: _moves, ...stats } = await store.stats({ tenant });
    const jobs = [];
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<Store['jobList']>> = await store.jobList({ scope: { tenant }, limit: 1000, ...(cursor === null ? {} : { cursor }) });
      jobs.push(...page.jobs);
      cursor = page.nextCursor;
    } while (cursor !== null);
    // Listings leave out payloads, checkpoints and results: compare whole records.
    const records = await Promise.all(jobs.map((job) => store.jobGet({ scope: { tenant }, id: job.id })));
    const attempts = await Promise.all(jobs.map((job) => store.jobAttempts({ scope: { tenant }, id: job.id })));
    const kinds = await store.kindList({ tenant });
    const schedules = await store.scheduleList({ tenant, limit: 1000 });
    parts.push({ tenant, stats, jobs: records, attempts, kinds, schedules });
  }
  return JSON.stringify(parts);
}

/** Counts answers; a file prints one line of it for docs/RELIABILITY.md. */
export class Tally {
  cases = 0;
  serverErrors = 0;
  accepted = 0;
  refused = 0;
  line(label: string): string {
    return `${label}: ${this.cases} cases, ${this.serverErrors} 5xx (${this.refused} refused with 4xx, ${this.accepted} accepted)`;
  }
}

/** Engine and runtime text that must never reach a client (checked only where the request did not send it). */
const LEAKS = [
  /\n\s+at\s/,
  /\bat\s+[\w.<>]+\s+\(/,
  /node:internal/,
  /node_modules/,
  /\.(?:ts|js):\d+/,
  /SQLITE_[A-Z]/,
  /SQLSTATE/,
  /better-sqlite3/,
  /syntax error/i,
  /no such (?:table|column)/i,
  /constraint failed/i,
  /violates .* constraint/i,
  /duplicate key value/i,
  /relation "/,
  /(?:Range|Type|Reference)Error/,
  /Maximum call stack/,
];

export interface SentRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly payload?: string | Buffer;
}

/**
 * The rules for any answer to hostile input: no 5xx; a 4xx carries exactly
 * `{error:{code,message}}` with a code of ERROR_CODES whose status is the
 * answer's; no stack trace or SQL text. Returns the error code, if any.
 */
export function checkAnswer(response: LightMyRequestResponse, sent: SentRequest, tally: Tally): string | undefined {
  tally.cases += 1;
  const describe = (): string =>
    `${sent.method} ${sent.url.slice(0, 300)} ${JSON.stringify(sent.headers).slice(0, 300)} ${String(sent.payload ?? '').slice(0, 600)} → ${response.statusCode} ${response.body.slice(0, 600)}`;
  if (response.statusCode >= 500) {
    tally.serverErrors += 1;
    throw new Error(`a 5xx for hostile input: ${describe()}`);
  }
  expect((response.statusCode >= 200 && response.statusCode < 300) || response.statusCode >= 400, describe()).toBe(true);
  const sentText = `${sent.url}\n${JSON.stringify(sent.headers)}\n${String(sent.payload ?? '')}`;
  for (const leak of LEAKS) {
    const found = leak.exec(response.body);
    if (found !== null && !sentText.includes(found[0])) throw new Error(`the answer leaks ${JSON.stringify(found[0])}: ${describe()}`);
  }
  if (response.statusCode < 400) {
    tally.accepted += 1;
    return undefined;
  }
  tally.refused += 1;
  let body: unknown;
  try {
    body = response.json();
  } catch {
    throw new Error(`a 4xx without a JSON body: ${describe()}`);
  }
  const error = (body as { error?: unknown }).error as { code?: unknown; message?: unknown } | undefined;
  expect(Object.keys(body as object), describe()).toEqual(['error']);
  expect(Object.keys(error ?? {}).sort(), describe()).toEqual(['code', 'message']);
  expect(typeof error?.message, describe()).toBe('string');
  const code = error?.code;
  if (!isErrorCode(code)) throw new Error(`an unknown error code ${String(code)}: ${describe()}`);
  expect(ERROR_CODES[code], describe()).toBe(response.statusCode);
  return code;
}

/**
 * A fast-check reporter that keeps failures readable: counterexamples here
 * can be megabytes of nesting, so only the head of each part is shown.
 */
export function shortReport(details: {
  failed: boolean;
  counterexample: unknown;
  seed: number;
  counterexamplePath: string | null;
  errorInstance: unknown;
}): void {
  if (!details.failed) return;
  const example = JSON.stringify(details.counterexample, (_key, value: unknown) =>
    typeof value === 'string' && value.length > 200 ? `${value.slice(0, 200)}…(${value.length} chars)` : value,
  );
  const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  throw new Error(
    `property failed (seed ${details.seed}, path ${details.counterexamplePath ?? ''})\ncounterexample: ${example.slice(0, 2000)}\n${cause.slice(0, 3000)}`,
  );
}

interface LiveLease {
  readonly token: string;
  readonly epoch: number;
}

/** The seeded jobs, with the tokens this test knows, kept valid across accepted requests. */
export class World {
  private readonly live = new Map<string, LiveLease>();
  private readonly stale = new Map<string, string>();
  private readonly labels = new Map<JobIdChoice, string>();
  private otherTenant: { id: string; token: string } = { id: '', token: '' };
  private readonly missing = newJobId();
  private counter = 0;
  /** The job id the last resolved Ref named: a `live` token then belongs to it. */
  private current: string | undefined;

  private constructor(private readonly h: Harness) {}

  get app(): FastifyInstance {
    return this.h.app;
  }

  static async seed(h: Harness): Promise<World> {
    const world = new World(h);
    await world.build();
    return world;
  }

  private async call(key: string, method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown, headers: Record<string, string> = {}): Promise<unknown> {
    const response = await this.h.app.inject({
      method,
      url,
      headers: { ...bearer(key), ...headers },
      ...(payload === undefined ? {} : { payload: payload as object }),
    });
    if (response.statusCode >= 300) throw new Error(`seeding: ${method} ${url} answered ${response.statusCode} ${response.body}`);
    return response.statusCode === 204 ? null : response.json();
  }

  private async enqueue(key: string, kind: string, payload: unknown = { n: this.counter }): Promise<string> {
    this.counter += 1;
    const job = (await this.call(key, 'POST', '/jobs', { kind, payload }, { 'idempotency-key': `seed-${this.counter}` })) as { id: string };
    return job.id;
  }

  private async leaseKind(key: string, kind: string, max: number, leaseMs: number): Promise<{ id: string; token: string; epoch: number }[]> {
    const answer = (await this.call(key, 'POST', '/lease', { workerId: 'seeder', kinds: [kind], max, leaseMs })) as {
      jobs: { id: string; token: string; epoch: number }[];
    } | null;
    return answer?.jobs ?? [];
  }

  private async build(): Promise<void> {
    const { keys } = this.h;
    await this.call(keys.admin, 'PUT', '/kinds/email', {});
    await this.call(keys.admin, 'PUT', '/kinds/typed', {
      payloadSchema: { type: 'object', properties: { to: { type: 'string', maxLength: 40 } }, required: ['to'], additionalProperties: false },
    });
    await this.call(keys.admin, 'PUT', '/kinds/small', { maxPayloadBytes: 64, maxResultBytes: 16 });
    await this.call(keys.admin, 'PUT', '/kinds/run', {});
    await this.call(keys.admin, 'PUT', '/kinds/done', {});

    await this.enqueue(keys.producer, 'email');
    await this.enqueue(keys.producer2, 'email');
    // A job whose first lease expires (its token goes stale) and is leased again, and one that becomes unknown.
    const first = await this.enqueue(keys.producer, 'run');
    const second = await this.enqueue(keys.producer, 'run');
    // The effect must be declared while the short lease is live; on a loaded machine PostgreSQL's real clock
    // may run past it first, and then the leases (expired by now) are simply taken again, for longer.
    let shortMs = this.h.backend === 'sqlite' ? 100 : 1_000;
    for (let attempt = 1; ; attempt++) {
      const short = await this.leaseKind(keys.worker, 'run', 2, shortMs);
      for (const leased of short) this.stale.set(leased.id, leased.token);
      const effect = short.find((leased) => leased.id === second);
      if (effect === undefined || short.length !== 2) throw new Error('seeding: the run jobs were not leased');
      const declared = await this.h.app.inject({
        method: 'POST',
        url: `/jobs/${second}/effect`,
        headers: bearer(keys.worker),
        payload: { token: effect.token },
      });
      if (declared.statusCode === 200) break;
      if (attempt === 3) throw new Error(`seeding: could not declare the effect within a ${shortMs} ms lease`);
      await this.h.time.advance(shortMs);
      shortMs *= 4;
    }
    await this.h.time.advance(shortMs + 200);
    const again = await this.leaseKind(keys.worker, 'run', 1, 86_400_000);
    if (again[0]?.id !== first) throw new Error('seeding: the expired job was not leased again');
    this.live.set(first, { token: again[0].token, epoch: again[0].epoch });

    await this.makeEnded();
    const cancelled = await this.enqueue(keys.producer, 'email');
    await this.call(keys.producer, 'POST', `/jobs/${cancelled}/cancel`, {});

    const otherId = await this.enqueue(keys.otherProducer, 'email');
    const otherLease = (await this.call(keys.otherWorker, 'POST', '/lease', { workerId: 'seeder', leaseMs: 86_400_000 })) as {
      jobs: { id: string; token: string }[];
    };
    if (otherLease.jobs[0]?.id !== otherId) throw new Error('seeding: the other tenant job was not leased');
    this.otherTenant = { id: otherId, token: otherLease.jobs[0].token };
    await this.refresh();
    if (this.labels.get('unknown') === undefined || this.labels.get('running') === undefined) throw new Error('seeding: missing states');
  }

  /** A succeeded job (with a result) and a dead one. */
  private async makeEnded(): Promise<void> {
    const { keys } = this.h;
    await this.enqueue(keys.producer, 'done');
    await this.enqueue(keys.producer, 'done');
    // Leases every queued 'done' job (a requeued one may come first): the first succeeds, the rest die.
    const leased = await this.leaseKind(keys.worker, 'done', 10, 86_400_000);
    for (const [index, job] of leased.entries()) {
      if (index === 0) await this.call(keys.worker, 'POST', `/jobs/${job.id}/complete`, { token: job.token, result: { ok: true } });
      else await this.call(keys.worker, 'POST', `/jobs/${job.id}/fail`, { token: job.token, error: { code: 'broken' }, retryable: false });
      this.stale.set(job.id, job.token);
    }
  }

  /** Re-reads the jobs' states after an accepted request and tops up running jobs with known tokens. */
  async refresh(): Promise<void> {
    const page = await this.h.store.jobList({ scope: { tenant: 't1' }, limit: 1000 });
    const byId = new Map(page.jobs.map((job) => [job.id, job]));
    for (const [id, lease] of this.live) {
      const job = byId.get(id);
      if (job === undefined || job.status !== 'running' || job.epoch !== lease.epoch) {
        this.live.delete(id);
        this.stale.set(id, lease.token);
      }
    }
    for (let round = 0; this.live.size < 2; round++) {
      if (round > 5) throw new Error('could not lease a run job to refresh the world');
      await this.enqueue(this.h.keys.producer, 'run');
      for (const leased of await this.leaseKind(this.h.keys.worker, 'run', 4, 86_400_000))
        this.live.set(leased.id, { token: leased.token, epoch: leased.epoch });
    }
    const fresh = await this.h.store.jobList({ scope: { tenant: 't1' }, limit: 1000 });
    this.labels.clear();
    for (const job of fresh.jobs) {
      // The hostile world has no waiting jobs (no dependsOn or concurrencyKey); one would have no label.
      const label: JobIdChoice | undefined =
        job.owner !== 'alice' ? 'otherUser' : job.status === 'running' || job.status === 'waiting' ? undefined : job.status;
      if (label !== undefined && !this.labels.has(label)) this.labels.set(label, job.id);
    }
    if (!this.labels.has('queued')) this.labels.set('queued', await this.enqueue(this.h.keys.producer, 'email'));
    if (!this.labels.has('succeeded') || !this.labels.has('dead')) {
      // An admin's reconcile or requeue used one up: make both again (cheap, and no clock involved).
      await this.makeEnded();
      await this.refresh();
      return;
    }
    this.labels.set('running', [...this.live.keys()][0] ?? '');
    this.labels.set('otherTenant', this.otherTenant.id);
    this.labels.set('missing', this.missing);
  }

  /** Records the tokens of jobs that an accepted lease handed out. */
  noteLeased(body: string): void {
    const jobs = (JSON.parse(body) as { jobs?: { id: string; token: string; epoch: number }[] }).jobs ?? [];
    for (const job of jobs) this.live.set(job.id, { token: job.token, epoch: job.epoch });
  }

  /** Resolves a Ref: job ids by label; tokens relative to the job id resolved last. */
  resolve(ref: Ref): string {
    if (ref.what === 'jobId') {
      const id = this.labels.get(ref.choice as JobIdChoice) ?? this.missing;
      this.current = id;
      return id;
    }
    const current = this.current;
    const liveTokens = [...this.live.entries()];
    switch (ref.choice) {
      case 'live':
        return (current === undefined ? undefined : this.live.get(current)?.token) ?? liveTokens[0]?.[1].token ?? 'no-live-token';
      case 'stale':
        return (current === undefined ? undefined : this.stale.get(current)) ?? [...this.stale.values()][0] ?? 'no-stale-token';
      case 'otherLive':
        return liveTokens.find(([id]) => id !== current)?.[1].token ?? 'no-other-token';
      default:
        return this.otherTenant.token;
    }
  }

  /** Starts a new request: a path id (when there is one) is resolved before the body. */
  beginRequest(): void {
    this.current = undefined;
  }
}
