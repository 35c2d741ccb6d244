/**
 * Model-based tests of the lease state machine (issue 5, item 2), against the
 * SQLite store over a ManualClock. A small in-memory model says what each of
 * enqueue, lease, renew, complete, fail, clock advance (expiry), reap and
 * requeue must answer and how every job must look afterwards.
 *
 * 1. fast-check `commands`: random sequences, each answer and every job
 *    compared with the model after every step.
 * 2. fast-check's scheduler: several workers lease, renew, complete, fail,
 *    abandon jobs and try stale tokens concurrently, while the scheduler
 *    decides in which order they see their answers (and so what they send
 *    next); the clock moves between rounds so abandoned leases expire. Checked
 *    against what the workers were told: each (job, epoch) leased once and
 *    epochs without gaps; at most one accepted ending per attempt; every
 *    attempt row's outcome is the ending its worker was granted (or expiry);
 *    and each job's final status follows from its last attempt.
 *
 * SQLite only: the model needs exact times, and PostgreSQL's clock (now() of
 * the server) cannot be set.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { JobStatus } from '../../src/core/states.js';

const TENANT = 'model';
const IMMEDIATE = { baseMs: 1, maxMs: 1 };
const lines: string[] = [];
afterAll(() => {
  for (const line of lines) console.log(line);
});

interface ModelJob {
  readonly id: string;
  readonly seq: number;
  status: JobStatus;
  attempts: number;
  maxAttempts: number;
  epoch: number;
  runAfter: number;
  token: string | null;
  leaseExpiresAt: number | null;
  lastOutcome: 'succeeded' | 'failed' | 'expired' | null;
  readonly tokens: string[];
}

/** What the store answered, reduced to what the model predicts. */
type Answer =
  | { op: 'lease'; jobs: { id: string; epoch: number; attempt: number; leaseExpiresAt: number }[] }
  | { op: 'renew'; kind: string; leaseExpiresAt?: number; code?: string }
  | { op: 'complete'; kind: string; replayed?: boolean; code?: string }
  | { op: 'fail'; kind: string; status?: string; replayed?: boolean; code?: string }
  | { op: 'requeue'; kind: string; code?: string }
  | { op: 'reap'; requeued: number; dead: number };

/** The sequential state machine, restricted to what these tests drive (no kinds, deadlines, effects or cancels). */
class Model {
  readonly jobs: ModelJob[] = [];
  constructor(public now: number) {}

  add(id: string, maxAttempts: number): void {
    this.jobs.push({
      id,
      seq: this.jobs.length,
      status: 'queued',
      attempts: 0,
      maxAttempts,
      epoch: 0,
      runAfter: this.now,
      token: null,
      leaseExpiresAt: null,
      lastOutcome: null,
      tokens: [],
    });
  }
  byId(id: string): ModelJob | undefined {
    return this.jobs.find((job) => job.id === id);
  }
  private live(job: ModelJob, token: string): boolean {
    return job.status === 'running' && job.token === token && job.leaseExpiresAt !== null && job.leaseExpiresAt > this.now;
  }
  settle(): { requeued: number; dead: number } {
    let requeued = 0;
    let dead = 0;
    for (const job of this.jobs) {
      if (job.status !== 'running' || job.leaseExpiresAt === null || job.leaseExpiresAt > this.now) continue;
      job.leaseExpiresAt = null;
      job.lastOutcome = 'expired';
      if (job.attempts >= job.maxAttempts) {
        job.status = 'dead';
        dead += 1;
      } else {
        job.status = 'queued';
        job.runAfter = this.now;
        requeued += 1;
      }
    }
    return { requeued, dead };
  }
  /** Which jobs a lease of `max` takes, in the store's order; the caller then records the tokens. */
  lease(max: number, leaseMs: number): ModelJob[] {
    this.settle();
    const picked = this.jobs
      .filter((job) => job.status === 'queued' && job.runAfter <= this.now)
      .sort((a, b) => a.runAfter - b.runAfter || a.seq - b.seq)
      .slice(0, max);
    for (const job of picked) {
      job.status = 'running';
      job.attempts += 1;
      job.epoch += 1;
      job.leaseExpiresAt = this.now + leaseMs;
      job.lastOutcome = null;
    }
    return picked;
  }
  renew(job: ModelJob, token: string, leaseMs: number): Answer {
    if (!this.live(job, token)) return { op: 'renew', kind: 'rejected', code: 'stale_lease' };
    job.leaseExpiresAt = this.now + leaseMs;
    return { op: 'renew', kind: 'renewed', leaseExpiresAt: job.leaseExpiresAt };
  }
  complete(job: ModelJob, token: string): Answer {
    if (job.status === 'succeeded' && job.token === token && job.lastOutcome === 'succeeded') return { op: 'complete', kind: 'completed', replayed: true };
    if (!this.live(job, token)) return { op: 'complete', kind: 'rejected', code: 'stale_lease' };
    job.status = 'succeeded';
    job.leaseExpiresAt = null;
    job.lastOutcome = 'succeeded';
    return { op: 'complete', kind: 'completed', replayed: false };
  }
  fail(job: ModelJob, token: string, retryable: boolean): Answer {
    if (job.token === token && job.lastOutcome === 'failed' && job.status !== 'running' && job.status !== 'succeeded') {
      return { op: 'fail', kind: 'failed', status: job.status, replayed: true };
    }
    if (!this.live(job, token)) return { op: 'fail', kind: 'rejected', code: 'stale_lease' };
    job.leaseExpiresAt = null;
    job.lastOutcome = 'failed';
    if (!retryable || job.attempts >= job.maxAttempts) job.status = 'dead';
    else {
      job.status = 'queued';
      job.runAfter = this.now;
    }
    return { op: 'fail', kind: 'failed', status: job.status, replayed: false };
  }
  requeue(job: ModelJob, maxAttempts: number | undefined): Answer {
    if (job.status !== 'dead') return { op: 'requeue', kind: 'rejected', code: 'not_dead' };
    job.status = 'queued';
    job.attempts = 0;
    job.maxAttempts = maxAttempts ?? job.maxAttempts;
    job.runAfter = this.now;
    job.leaseExpiresAt = null;
    return { op: 'requeue', kind: 'requeued' };
  }
}

interface Real {
  readonly store: SqliteStore;
  readonly clock: ManualClock;
}

function openReal(): { real: Real; close: () => Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-model-'));
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const store = SqliteStore.open({ path: join(dir, 'jobs.db'), clock });
  return {
    real: { store, clock },
    close: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function expectSameJobs(model: Model, real: Real, context: string): Promise<void> {
  for (const job of model.jobs) {
    const stored = await real.store.jobGet({ scope: { tenant: TENANT }, id: job.id });
    const seen = stored && {
      status: stored.status,
      attempts: stored.attempts,
      maxAttempts: stored.maxAttempts,
      epoch: stored.epoch,
      runAfter: stored.runAfter,
      leaseExpiresAt: stored.leaseExpiresAt,
    };
    const want = {
      status: job.status,
      attempts: job.attempts,
      maxAttempts: job.maxAttempts,
      epoch: job.epoch,
      runAfter: job.runAfter,
      leaseExpiresAt: job.leaseExpiresAt,
    };
    expect(seen, `${context}: job #${job.seq}`).toEqual(want);
  }
}

/** A token for job `job`: its current one, an older one, or one that never existed. */
function pickToken(job: ModelJob, choice: number): string {
  if (choice % 4 === 3 || job.tokens.length === 0) return `forged-${choice}`;
  return choice % 4 === 0 ? (job.token ?? 'none') : (job.tokens[choice % job.tokens.length] ?? 'none');
}

type Command = fc.AsyncCommand<Model, Real, false>;
const cmd = (name: string, check: (m: Model) => boolean, run: (m: Model, r: Real) => Promise<void>): Command => ({
  check,
  run,
  toString: () => name,
});

const commands: fc.Arbitrary<Command>[] = [
  fc.integer({ min: 1, max: 3 }).map((maxAttempts) =>
    cmd(
      `enqueue(${maxAttempts})`,
      () => true,
      async (m, r) => {
        const outcome = await r.store.jobEnqueue({
          tenant: TENANT,
          owner: 'o',
          idempotencyKey: `k${m.jobs.length}`,
          requestHash: `k${m.jobs.length}`,
          kind: 'k',
          payload: null,
          maxAttempts,
          priority: 0,
          runAfter: null,
          deadlineMs: null,
          payloadBytes: 4,
        });
        if (outcome.kind !== 'created') throw new Error('not created');
        m.add(outcome.job.id, maxAttempts);
        await expectSameJobs(m, r, 'enqueue');
      },
    ),
  ),
  fc.tuple(fc.integer({ min: 1, max: 3 }), fc.constantFrom(1_000, 5_000)).map(([max, leaseMs]) =>
    cmd(
      `lease(${max}, ${leaseMs})`,
      () => true,
      async (m, r) => {
        const got = await r.store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs, max });
        const want = m.lease(max, leaseMs);
        expect(got.map((j) => [j.id, j.epoch, j.attempt, j.leaseExpiresAt])).toEqual(want.map((j) => [j.id, j.epoch, j.attempts, j.leaseExpiresAt]));
        for (const [i, job] of want.entries()) {
          job.token = got[i]?.token ?? null;
          if (job.token !== null) job.tokens.push(job.token);
        }
        await expectSameJobs(m, r, 'lease');
      },
    ),
  ),
  fc.tuple(fc.nat(), fc.nat(), fc.constantFrom(1_000, 5_000)).map(([which, choice, leaseMs]) =>
    cmd(
      `renew(#${which}, ${choice}, ${leaseMs})`,
      (m) => m.jobs.length > 0,
      async (m, r) => {
        const job = m.jobs[which % m.jobs.length] as ModelJob;
        const token = pickToken(job, choice);
        const got = await r.store.jobRenew({ tenant: TENANT, id: job.id, token, leaseMs });
        expect(got).toEqual(stripOp(m.renew(job, token, leaseMs)));
        await expectSameJobs(m, r, 'renew');
      },
    ),
  ),
  fc.tuple(fc.nat(), fc.nat()).map(([which, choice]) =>
    cmd(
      `complete(#${which}, ${choice})`,
      (m) => m.jobs.length > 0,
      async (m, r) => {
        const job = m.jobs[which % m.jobs.length] as ModelJob;
        const token = pickToken(job, choice);
        const got = await r.store.jobComplete({ tenant: TENANT, id: job.id, token });
        expect(got).toEqual(stripOp(m.complete(job, token)));
        await expectSameJobs(m, r, 'complete');
      },
    ),
  ),
  fc.tuple(fc.nat(), fc.nat(), fc.boolean()).map(([which, choice, retryable]) =>
    cmd(
      `fail(#${which}, ${choice}, ${retryable})`,
      (m) => m.jobs.length > 0,
      async (m, r) => {
        const job = m.jobs[which % m.jobs.length] as ModelJob;
        const token = pickToken(job, choice);
        const got = await r.store.jobFail({ tenant: TENANT, id: job.id, token, error: { code: 'e', message: '' }, retryable, backoff: IMMEDIATE });
        const want = stripOp(m.fail(job, token, retryable));
        expect(got.kind === 'failed' ? { kind: got.kind, status: got.status, replayed: got.replayed } : got).toEqual(want);
        await expectSameJobs(m, r, 'fail');
      },
    ),
  ),
  fc.constantFrom(500, 1_000, 2_500, 6_000).map((ms) =>
    cmd(
      `advance(${ms})`,
      () => true,
      async (m, r) => {
        r.clock.advance(ms);
        m.now += ms;
      },
    ),
  ),
  fc.constant(
    cmd(
      'reap',
      () => true,
      async (m, r) => {
        const got = await r.store.jobReapExpired();
        const want = m.settle();
        expect({ requeued: got.requeued, dead: got.dead }).toEqual(want);
        await expectSameJobs(m, r, 'reap');
      },
    ),
  ),
  fc.tuple(fc.nat(), fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined })).map(([which, maxAttempts]) =>
    cmd(
      `requeue(#${which}, ${String(maxAttempts)})`,
      (m) => m.jobs.length > 0,
      async (m, r) => {
        const job = m.jobs[which % m.jobs.length] as ModelJob;
        const got = await r.store.jobRequeue({ scope: { tenant: TENANT }, id: job.id, ...(maxAttempts === undefined ? {} : { maxAttempts }) });
        expect(got.kind === 'requeued' ? { kind: got.kind } : got).toEqual(stripOp(m.requeue(job, maxAttempts)));
        await expectSameJobs(m, r, 'requeue');
      },
    ),
  ),
];

function stripOp(answer: Answer): Record<string, unknown> {
  const { op: _op, ...rest } = answer;
  return rest;
}

describe('the lease state machine against its model (sqlite)', () => {
  it('random command sequences answer and end as the model says', async () => {
    let runs = 0;
    let steps = 0;
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 80, size: 'large' }), async (cmds) => {
        const { real, close } = openReal();
        try {
          runs += 1;
          steps += [...cmds].length;
          await fc.asyncModelRun(() => ({ model: new Model(real.clock.now()), real }), cmds);
        } finally {
          await close();
        }
      }),
      { numRuns: 60 },
    );
    lines.push(`model (commands, sqlite): ${runs} sequences, ${steps} commands, every answer and job as the model says`);
  });
});

type Action = 'complete' | 'fail' | 'failPermanent' | 'renew' | 'abandon' | 'stale';

describe('concurrent workers under the fast-check scheduler (sqlite)', () => {
  it('one lease per (job, epoch), one ending per attempt, attempt rows and final states as the workers were told', async () => {
    let runs = 0;
    let calls = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.integer({ min: 2, max: 6 }),
        fc.array(fc.array(fc.constantFrom<Action>('complete', 'fail', 'failPermanent', 'renew', 'abandon', 'stale'), { minLength: 1, maxLength: 6 }), {
          minLength: 2,
          maxLength: 5,
        }),
        fc.integer({ min: 1, max: 3 }),
        async (s, jobCount, plans, rounds) => {
          const { real, close } = openReal();
          const { store, clock } = real;
          try {
            runs += 1;
            const maxAttempts = 3;
            for (let i = 0; i < jobCount; i++) {
              await store.jobEnqueue({
                tenant: TENANT,
                owner: 'o',
                idempotencyKey: `c${i}`,
                requestHash: `c${i}`,
                kind: 'k',
                payload: i,
                maxAttempts,
                priority: 0,
                runAfter: null,
                deadlineMs: null,
                payloadBytes: 1,
              });
            }
            const leases = new Map<string, Map<number, string>>();
            const tokens: { id: string; token: string }[] = [];
            /** Accepted endings per job and epoch: 'succeeded', 'failed' or 'dead' (a permanent fail). */
            const endings = new Map<string, Map<number, string[]>>();
            /** Calls refused although they carried the token just handed out: someone else must have ended that attempt. */
            const refusedLive: { id: string; epoch: number }[] = [];
            const epochOf = (id: string, token: string): number | undefined =>
              [...(leases.get(id) ?? new Map<number, string>())].find(([, t]) => t === token)?.[0];
            const ended = (id: string, token: string, what: string): void => {
              const epoch = epochOf(id, token);
              if (epoch === undefined) throw new Error(`an ending of ${id} was accepted for a token no lease handed out`);
              const byEpoch = endings.get(id) ?? new Map<number, string[]>();
              byEpoch.set(epoch, [...(byEpoch.get(epoch) ?? []), what]);
              endings.set(id, byEpoch);
            };
            for (let round = 0; round < rounds; round++) {
              const workers = plans.map(async (plan, w) => {
                for (const action of plan) {
                  calls += 1;
                  const got = await s.schedule(store.jobLease({ tenant: TENANT, workerId: `w${w}`, leaseMs: 1_000, max: 1 }));
                  for (const job of got) {
                    const byEpoch = leases.get(job.id) ?? new Map<number, string>();
                    expect(byEpoch.has(job.epoch), `${job.id} epoch ${job.epoch} leased twice`).toBe(false);
                    byEpoch.set(job.epoch, job.token);
                    leases.set(job.id, byEpoch);
                    tokens.push({ id: job.id, token: job.token });
                    const token = action === 'stale' ? (tokens[(w * 7 + round) % tokens.length] ?? { token: job.token }).token : job.token;
                    const target = action === 'stale' ? (tokens.find((t) => t.token === token)?.id ?? job.id) : job.id;
                    calls += 1;
                    if (action === 'renew') {
                      const renewed = await s.schedule(store.jobRenew({ tenant: TENANT, id: job.id, token, leaseMs: 1_000 }));
                      // The clock stands still within a round: a lease just handed out is live, unless another
                      // worker ended the attempt with this token (tokens are the authority, not worker names).
                      if (renewed.kind !== 'renewed') refusedLive.push({ id: job.id, epoch: job.epoch });
                    }
                    if (action === 'complete' || action === 'renew' || action === 'stale') {
                      const outcome = await s.schedule(store.jobComplete({ tenant: TENANT, id: target, token }));
                      if (outcome.kind === 'completed' && !outcome.replayed) ended(target, token, 'succeeded');
                    } else if (action === 'fail' || action === 'failPermanent') {
                      const retryable = action === 'fail';
                      const outcome = await s.schedule(
                        store.jobFail({ tenant: TENANT, id: job.id, token, error: { code: 'e', message: '' }, retryable, backoff: IMMEDIATE }),
                      );
                      if (outcome.kind !== 'failed') refusedLive.push({ id: job.id, epoch: job.epoch });
                      if (outcome.kind === 'failed' && !outcome.replayed) ended(job.id, token, retryable ? 'failed' : 'dead');
                    }
                  }
                }
              });
              await s.waitFor(Promise.all(workers));
              // Every lease of this round runs out; the next round's leases settle them.
              clock.advance(1_500);
            }
            await store.jobReapExpired();

            for (const { id, epoch } of refusedLive) {
              expect(endings.get(id)?.get(epoch)?.length ?? 0, `${id} epoch ${epoch}: refused, yet nobody ended it`).toBe(1);
            }
            for (const [id, byEpoch] of leases) {
              const epochs = [...byEpoch.keys()].sort((a, b) => a - b);
              expect(epochs, `${id}: epochs`).toEqual(epochs.map((_, i) => i + 1));
              const record = await store.jobGet({ scope: { tenant: TENANT }, id });
              expect(record?.epoch).toBe(epochs.length);
              const attempts = (await store.jobAttempts({ scope: { tenant: TENANT }, id })) ?? [];
              expect(attempts.map((a) => a.epoch)).toEqual(epochs);
              for (const attempt of attempts) {
                const granted = endings.get(id)?.get(attempt.epoch) ?? [];
                expect(granted.length, `${id} epoch ${attempt.epoch}: endings ${granted.join(',')}`).toBeLessThanOrEqual(1);
                const want = granted[0] === undefined ? 'expired' : granted[0] === 'succeeded' ? 'succeeded' : 'failed';
                expect(attempt.outcome, `${id} epoch ${attempt.epoch}`).toBe(want);
              }
              const last = endings.get(id)?.get(epochs.length)?.[0];
              const exhausted = epochs.length >= maxAttempts;
              const status = last === 'succeeded' ? 'succeeded' : last === 'dead' || exhausted ? 'dead' : 'queued';
              expect(record?.status, `${id} after ${epochs.length} attempts, last ${last ?? 'expired'}`).toBe(status);
            }
          } finally {
            await close();
          }
        },
      ),
      { numRuns: 40 },
    );
    lines.push(`model (scheduler, sqlite): ${runs} concurrent histories, ${calls} store calls, every attempt and job as the workers were told`);
  });
});
