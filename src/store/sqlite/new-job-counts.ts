/**
 * What a write transaction's new jobs add to the counter rows: one job each
 * to its (tenant, kind, status) row of job_counters, and its payload to the
 * tenant's stored bytes. Enqueue adds them here instead of by a row trigger
 * and a statement per job; the group commit applies them once, in one
 * statement per counter row touched, just before COMMIT (or before RELEASE of
 * an operation's savepoint when it runs the batch one operation at a time),
 * and discards them when the transaction or savepoint rolls back, so the
 * counters still equal a recount of the table at every commit.
 *
 * A new job has no started_at or finished_at, so of the terms a job row adds
 * (counter-triggers.ts) only `jobs` is not zero. Nothing reads these counters
 * inside the write transaction that enqueues (the flow limits read the running
 * row, which a new job never is in; stats and backpressure read committed
 * state), so applying them at its end changes no decision.
 */

import type { JobStatus } from '../../core/states.js';
import type { Statements } from './queries.js';

export class NewJobCounts {
  constructor(private readonly st: Statements) {}

  /** tenant → kind → status → jobs. */
  private readonly jobs = new Map<string, Map<string, Map<JobStatus, number>>>();
  /** tenant → payload bytes. */
  private readonly bytes = new Map<string, number>();

  add(tenant: string, kind: string, status: JobStatus, payloadBytes: number): void {
    let kinds = this.jobs.get(tenant);
    if (kinds === undefined) this.jobs.set(tenant, (kinds = new Map()));
    let statuses = kinds.get(kind);
    if (statuses === undefined) kinds.set(kind, (statuses = new Map()));
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
    this.bytes.set(tenant, (this.bytes.get(tenant) ?? 0) + payloadBytes);
  }

  /** Writes what was added since the last apply or discard, inside the open transaction, and starts afresh. */
  apply(): void {
    for (const [tenant, kinds] of this.jobs) {
      for (const [kind, statuses] of kinds) for (const [status, n] of statuses) this.st.counterAddJobs.run(tenant, kind, status, n);
    }
    for (const [tenant, bytes] of this.bytes) this.st.counterAddStorage.run(tenant, bytes);
    this.discard();
  }

  discard(): void {
    this.jobs.clear();
    this.bytes.clear();
  }
}
