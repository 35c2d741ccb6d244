/**
 * The soak's final audit: every acknowledged job against the store's view
 * (through the coordinator, or a library Queue in the embedded soak) and the
 * effects ledger.
 *
 *   lost               acknowledged ids that are missing or not terminal
 *   wrong fate         a job that ended other than its policy says: `ok` and
 *                      `flaky` jobs succeed; `permanent` jobs die with the
 *                      handler's code; `exhaust` jobs die with every attempt used
 *   duplicate commits  a succeeded job whose result does not name exactly one
 *                      `ok` execution of that job under the job's final fence,
 *                      or whose attempt history holds more than one success
 *   duplicate executions  successful (or permanently failing) executions of a
 *                      job beyond its first: allowed, the price of at-least-once
 *
 * Attempt histories are read only for jobs leased more than once: a job with
 * one attempt can hold neither a second success nor an expired lease.
 */

import type { LeaseholdClient } from '../src/client/leasehold-client.js';
import type { Job } from '../src/protocol/schemas.js';
import { EXHAUST_ATTEMPTS, fateOf, type Acknowledged } from './soak-producer.js';
import { PERMANENT_CODE, RETRYABLE_CODE, type LedgerLine, type SoakResult } from './soak-handlers.js';

export interface AuditFindings {
  readonly jobsSeen: number;
  readonly succeeded: number;
  readonly dead: number;
  readonly deadExpectedByPolicy: number;
  readonly lost: number;
  readonly wrongFate: number;
  readonly duplicateCommits: number;
  readonly executions: number;
  readonly duplicateExecutions: number;
  /** Ledger lines written under a lease that then expired (the job ran again). */
  readonly executionsUnderExpiredLeases: number;
  /** Attempts that ended `expired`, summed over every job's history. */
  readonly expiredAttempts: number;
  /** Jobs in the store that no acknowledgement named (a lost answer never retried). */
  readonly unacknowledgedJobs: number;
  readonly unreadableLedgerLines: number;
  /** Up to five examples of each violation, for the report. */
  readonly examples: readonly string[];
}

/** What the audit reads: a LeaseholdClient over HTTP, or the same three calls of a library Queue (the embedded soak). */
export type AuditReader = Pick<LeaseholdClient, 'listJobs' | 'getJob' | 'attempts'>;

export async function audit(client: AuditReader, accepted: readonly Acknowledged[], ledgerText: string): Promise<AuditFindings> {
  const jobs = await everyJob(client);
  const { lines, unreadable } = parseLedger(ledgerText);
  const byJob = new Map<string, LedgerLine[]>();
  for (const line of lines) byJob.set(line.id, [...(byJob.get(line.id) ?? []), line]);

  const examples: string[] = [];
  const note = (text: string): void => {
    if (examples.length < 15) examples.push(text);
  };
  let succeeded = 0,
    dead = 0,
    deadExpected = 0,
    lost = 0,
    wrongFate = 0,
    duplicateCommits = 0,
    duplicateExecutions = 0;
  const leasedAgain: Job[] = [];
  for (const ack of accepted) {
    const job = jobs.get(ack.id);
    const fate = fateOf(ack.n);
    const runs = byJob.get(ack.id) ?? [];
    duplicateExecutions += Math.max(0, runs.filter((r) => r.outcome !== 'retryable').length - 1);
    if (fate === 'permanent' || fate === 'exhaust') deadExpected += 1;
    if (job === undefined || (job.status !== 'succeeded' && job.status !== 'dead')) {
      lost += 1;
      note(`lost ${ack.idempotencyKey} ${ack.id}: ${job?.status ?? 'missing'}`);
      continue;
    }
    if (job.attempts > 1) leasedAgain.push(job);
    if (job.status === 'succeeded') {
      succeeded += 1;
      if (fate !== 'ok' && fate !== 'flaky') {
        wrongFate += 1;
        note(`${ack.id} (${fate}) succeeded`);
      }
      const result = job.result as SoakResult | null;
      const sources = runs.filter((r) => r.exec === result?.exec && r.outcome === 'ok' && r.fence === job.epoch);
      if (sources.length !== 1) {
        duplicateCommits += 1;
        note(`${ack.id}: result ${JSON.stringify(result)} matches ${sources.length} ok executions at fence ${job.epoch}`);
      }
      continue;
    }
    dead += 1;
    if (!diedByPolicy(job, fate)) {
      wrongFate += 1;
      note(`${ack.id} (${fate}) dead after ${job.attempts}/${job.maxAttempts} attempts: ${job.lastError?.code ?? 'no error'}`);
    }
  }

  // Attempt histories of jobs leased more than once: second successes, and which executions ran under a lease that expired.
  let expiredAttempts = 0,
    executionsUnderExpiredLeases = 0;
  await inParallel(leasedAgain, 8, async (job) => {
    const attempts = await client.attempts(job.id);
    const expiredFences = new Set(attempts.filter((a) => a.outcome === 'expired').map((a) => a.epoch));
    expiredAttempts += expiredFences.size;
    executionsUnderExpiredLeases += (byJob.get(job.id) ?? []).filter((r) => expiredFences.has(r.fence)).length;
    const successes = attempts.filter((a) => a.outcome === 'succeeded').length;
    if (successes > (job.status === 'succeeded' ? 1 : 0)) {
      duplicateCommits += 1;
      note(`${job.id}: ${successes} attempts succeeded`);
    }
  });

  const acknowledgedIds = new Set(accepted.map((a) => a.id));
  return {
    jobsSeen: jobs.size,
    succeeded,
    dead,
    deadExpectedByPolicy: deadExpected,
    lost,
    wrongFate,
    duplicateCommits,
    executions: lines.length,
    duplicateExecutions,
    executionsUnderExpiredLeases,
    expiredAttempts,
    unacknowledgedJobs: [...jobs.keys()].filter((id) => !acknowledgedIds.has(id)).length,
    unreadableLedgerLines: unreadable,
    examples,
  };
}

/** Dead as the policy says: a permanent failure with the handler's code, or an `exhaust` job with every attempt used. */
function diedByPolicy(job: Job, fate: ReturnType<typeof fateOf>): boolean {
  if (job.result !== null) return false;
  if (fate === 'permanent') return job.lastError?.code === PERMANENT_CODE;
  // The last attempt may have failed by itself or lost its lease to a kill: both use up the budget.
  if (fate === 'exhaust') return job.attempts === EXHAUST_ATTEMPTS && (job.lastError?.code === RETRYABLE_CODE || job.lastError?.code === 'lease_expired');
  return false;
}

function parseLedger(text: string): { lines: LedgerLine[]; unreadable: number } {
  const lines: LedgerLine[] = [];
  let unreadable = 0;
  for (const raw of text.split('\n')) {
    if (raw === '') continue;
    try {
      lines.push(JSON.parse(raw) as LedgerLine);
    } catch {
      unreadable += 1;
    }
  }
  return { lines, unreadable };
}

/** Every job; a listing carries result summaries only, so each job with a result is read in full for it. */
async function everyJob(client: AuditReader): Promise<Map<string, Job>> {
  const jobs = new Map<string, Job>();
  const withResults: string[] = [];
  let cursor: string | null = null;
  do {
    const page = await client.listJobs({ limit: 1000, ...(cursor === null ? {} : { cursor }) });
    for (const job of page.jobs) {
      jobs.set(job.id, { ...job, result: null, dependsOn: [], children: [] });
      if (job.result !== null) withResults.push(job.id);
    }
    cursor = page.nextCursor;
  } while (cursor !== null);
  await inParallel(withResults, 16, async (id) => {
    jobs.set(id, await client.getJob(id));
  });
  return jobs;
}

async function inParallel<T>(items: readonly T[], lanes: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}
