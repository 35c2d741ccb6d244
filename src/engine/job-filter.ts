/**
 * The operator's job filter over the store's listing. The store selects by
 * status and kind through its indexes; the error code and the creation-time
 * range are applied here to the rows of each page, so a filtered page is
 * filled from several store pages. Each store page asked for is no longer
 * than what the answer still lacks, so every row read is either answered or
 * passed, and the store's cursor after the last page is exactly where the
 * next call resumes. One call reads at most OPERATOR_LIMITS.maxListScan rows
 * and MAX_STORE_READS pages, then answers with what it found (possibly
 * nothing) and the cursor to continue from.
 */

import { LeaseholdError } from '../core/errors.js';
import { LIMITS } from '../protocol/schemas.js';
import type { JobFilter } from '../protocol/jobs.js';
import { OPERATOR_LIMITS } from '../protocol/operator.js';
import type { JobListItem, JobPage, JobScope, Store } from '../store/store.js';

const MAX_STORE_READS = 20;

/** A filter with its times parsed once. */
interface CompiledFilter {
  readonly errorCode: string | undefined;
  readonly after: number | undefined;
  readonly before: number | undefined;
}

function parseTime(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  if (!Number.isFinite(ms)) throw new LeaseholdError('invalid_request', `${name} is not an RFC 3339 time`);
  return ms;
}

function compile(filter: JobFilter): CompiledFilter {
  return { errorCode: filter.errorCode, after: parseTime(filter.createdAfter, 'createdAfter'), before: parseTime(filter.createdBefore, 'createdBefore') };
}

function matches(job: JobListItem, filter: CompiledFilter): boolean {
  if (filter.errorCode !== undefined && job.lastError?.code !== filter.errorCode) return false;
  if (filter.after !== undefined && job.createdAt < filter.after) return false;
  if (filter.before !== undefined && job.createdAt >= filter.before) return false;
  return true;
}

export interface FilteredListParams {
  readonly scope: JobScope;
  readonly filter: JobFilter;
  readonly limit: number;
  readonly cursor?: string | undefined;
}

/** One page of the jobs a filter selects, newest first. */
export async function listFilteredJobs(store: Store, params: FilteredListParams): Promise<JobPage> {
  const { status, kind } = params.filter;
  const base = { scope: params.scope, ...(status === undefined ? {} : { status }), ...(kind === undefined ? {} : { kind }) };
  const compiled = compile(params.filter);
  const scanning = compiled.errorCode !== undefined || compiled.after !== undefined || compiled.before !== undefined;
  if (!scanning) return store.jobList({ ...base, limit: params.limit, ...(params.cursor === undefined ? {} : { cursor: params.cursor }) });

  const found: JobListItem[] = [];
  let cursor = params.cursor;
  let scanned = 0;
  for (let reads = 0; reads < MAX_STORE_READS; reads += 1) {
    const limit = Math.min(params.limit - found.length, LIMITS.maxListLimit, OPERATOR_LIMITS.maxListScan - scanned);
    const page = await store.jobList({ ...base, limit, ...(cursor === undefined ? {} : { cursor }) });
    scanned += page.jobs.length;
    for (const job of page.jobs) if (matches(job, compiled)) found.push(job);
    if (page.nextCursor === null) return { jobs: found, nextCursor: null };
    cursor = page.nextCursor;
    if (found.length >= params.limit || scanned >= OPERATOR_LIMITS.maxListScan) break;
  }
  return { jobs: found, nextCursor: cursor ?? null };
}
