/**
 * Reading jobs: one job (and waiting for it to finish), a page of them, a
 * succeeded job's result, the attempt history, the operator's detail. Every
 * lookup is scoped to the principal's tenant, and to its own jobs for a
 * producer, so another tenant's or user's job is not_found exactly like an id
 * that never existed.
 */

import { LeaseholdError } from '../core/errors.js';
import { isJobId } from '../core/ids.js';
import type { JobStatus } from '../core/states.js';
import type { JobDetail } from '../protocol/operator.js';
import { WAIT_END_STATUSES, type Attempt, type Job, type JobList, type JobListQuery } from '../protocol/schemas.js';
import type { JobRecord, JobResult, JobScope } from '../store/store.js';
import type { EngineContext } from './context.js';
import { listFilteredJobs } from './job-filter.js';
import { scopeOf, type Principal } from './principal.js';
import { toWireAttempt, toWireJob, toWireJobListItem } from './wire.js';

export const DEFAULT_LIST_LIMIT = 100;

/** The states a wait for a job ends at (protocol/wait-ends.ts). */
const WAIT_ENDS: ReadonlySet<JobStatus> = new Set(WAIT_END_STATUSES);

/** Reads a job the scope may see, or throws not_found. */
export async function getScopedJob(ctx: EngineContext, scope: JobScope, id: string): Promise<JobRecord> {
  const job = isJobId(id) ? await ctx.store.jobGet({ scope, id }) : null;
  if (job === null) throw new LeaseholdError('not_found');
  return job;
}

export async function getJob(ctx: EngineContext, principal: Principal, id: string): Promise<Job> {
  return toWireJob(await getScopedJob(ctx, scopeOf(principal), id));
}

/**
 * The job once it is succeeded, dead, cancelled or unknown, woken by the store's finish signal (finish-waiters.ts),
 * or after `waitMs` (or when `signal` aborts) as it is then. More parked waits per tenant than allowed is overloaded.
 */
export async function waitForJob(ctx: EngineContext, principal: Principal, id: string, waitMs: number, signal: AbortSignal): Promise<Job> {
  const scope = scopeOf(principal);
  const job = await getScopedJob(ctx, scope, id);
  if (waitMs === 0 || WAIT_ENDS.has(job.status)) return toWireJob(job);
  let latest = job;
  await ctx.finishWaiters.wait(scope.tenant, id, waitMs, signal, async () => {
    latest = await getScopedJob(ctx, scope, id);
    return WAIT_ENDS.has(latest.status);
  });
  return toWireJob(WAIT_ENDS.has(latest.status) ? latest : await getScopedJob(ctx, scope, id));
}

/** A page of jobs, newest first (the filters GET /jobs documents). */
export async function listJobs(ctx: EngineContext, principal: Principal, query: JobListQuery): Promise<JobList> {
  const { limit, cursor, ...filter } = query;
  const page = await listFilteredJobs(ctx.store, { scope: scopeOf(principal), filter, limit: limit ?? DEFAULT_LIST_LIMIT, cursor });
  return { jobs: page.jobs.map(toWireJobListItem), nextCursor: page.nextCursor };
}

/** A succeeded job's stored result (null when it succeeded without one); result_not_ready before success. */
export async function jobResult(ctx: EngineContext, principal: Principal, id: string): Promise<JobResult | null> {
  const job = await getScopedJob(ctx, scopeOf(principal), id);
  if (job.status !== 'succeeded') throw new LeaseholdError('result_not_ready', `the job is ${job.status}; a result exists only once it succeeded`);
  return job.result;
}

/** The attempt history of a job, oldest first. */
export async function jobAttempts(ctx: EngineContext, principal: Principal, id: string): Promise<Attempt[]> {
  if (!isJobId(id)) throw new LeaseholdError('not_found');
  const attempts = await ctx.store.jobAttempts({ scope: scopeOf(principal), id });
  if (attempts === null) throw new LeaseholdError('not_found');
  return attempts.map(toWireAttempt);
}

/** A job with its payload, checkpoint, result checksum and attempts (the operator's view). */
export async function jobDetail(ctx: EngineContext, principal: Principal, id: string): Promise<JobDetail> {
  const scope = scopeOf(principal);
  const job = await getScopedJob(ctx, scope, id);
  const attempts = await ctx.store.jobAttempts({ scope, id: job.id });
  if (attempts === null) throw new LeaseholdError('not_found');
  return {
    job: toWireJob(job),
    payload: job.payload,
    checkpoint: job.checkpoint === null ? null : { step: job.checkpoint.step, state: job.checkpoint.state },
    result: job.result === null ? null : { contentType: job.result.contentType, bytes: job.result.body.length, checksum: job.result.checksum },
    attempts: attempts.map(toWireAttempt),
  };
}
