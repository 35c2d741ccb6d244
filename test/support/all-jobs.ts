/**
 * Reads every job a client can see, page by page, keyed by id: the end-to-end
 * tests compare the whole set against what they accepted and ran. A listing
 * carries only a result summary, so each job with a result is read again in
 * full (GET /jobs/{id}) to give the tests its JSON result.
 */

import type { Job, JobList, JobListQuery } from '../../src/protocol/schemas.js';

interface JobReader {
  listJobs(query: JobListQuery): Promise<JobList>;
  getJob(id: string): Promise<Job>;
}

export async function allJobs(client: JobReader): Promise<Map<string, Job>> {
  const jobs = new Map<string, Job>();
  const withResults: string[] = [];
  let cursor: string | null = null;
  do {
    const page: JobList = await client.listJobs({ limit: 1000, ...(cursor === null ? {} : { cursor }) });
    for (const job of page.jobs) {
      jobs.set(job.id, { ...job, result: null, dependsOn: [], children: [] });
      if (job.result !== null) withResults.push(job.id);
    }
    cursor = page.nextCursor;
  } while (cursor !== null);
  for (let start = 0; start < withResults.length; start += 32) {
    const full = await Promise.all(withResults.slice(start, start + 32).map((id) => client.getJob(id)));
    for (const job of full) jobs.set(job.id, job);
  }
  return jobs;
}
