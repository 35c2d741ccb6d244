/**
 * Reads every job a client can see, page by page, keyed by id: the end-to-end
 * tests compare the whole set against what they accepted and ran.
 */

import type { Job, JobList, JobListQuery } from '../../src/protocol/schemas.js';

export async function allJobs(client: { listJobs(query: JobListQuery): Promise<JobList> }): Promise<Map<string, Job>> {
  const jobs = new Map<string, Job>();
  let cursor: string | null = null;
  do {
    const page: JobList = await client.listJobs({ limit: 1000, ...(cursor === null ? {} : { cursor }) });
    for (const job of page.jobs) jobs.set(job.id, job);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return jobs;
}
