/**
 * The counter rows behind GET /stats (migration 5), moved in code once per
 * commit for every transition instead of by a trigger per job: each write
 * tells the accumulator what a job's row was and what it became (its
 * (tenant, kind, status) and the terms of the means), an ended attempt's run
 * time, a change of stored bytes or a lease expiry; the group commit writes
 * the sums once, one upsert per counter row touched, just before COMMIT (or
 * before RELEASE of an operation's savepoint when it runs the batch one
 * operation at a time), and discards them when the transaction or savepoint
 * rolls back. So the counters still equal a recount at every commit
 * (test/conformance/store-counters.test.ts) while a batch of 32 leases writes
 * two counter rows, not 64 trigger upserts.
 *
 * A job's status here is what the store shows: `running` while a row of
 * job_leases exists (its job row says `queued` then). One thing reads a
 * counter inside the write transaction: a lease of a kind with maxConcurrent
 * reads its running jobs (lease.ts), and adds pending() to what is stored.
 */

import type { JobStatus } from '../../core/states.js';
import type { Statements } from './queries.js';

/** What a job's row adds to its (tenant, kind, status) counter row, in the order of COUNTER_TERMS. */
type Terms = [jobs: number, started: number, waitMs: number, runJobs: number, runMs: number, completed: number, completionMs: number];

/** The columns of job_counters after (tenant, kind, status), as counter-triggers.ts's JOB_TERMS names them. */
export const COUNTER_TERMS = ['jobs', 'started', 'wait_ms', 'run_jobs', 'run_ms', 'completed', 'completion_ms'] as const;

/** A job as the counters see it. */
export interface CountedJob {
  readonly tenant: string;
  readonly kind: string;
  readonly status: JobStatus;
  readonly createdAt: number;
  readonly startedAt: number | null;
  readonly finishedAt: number | null;
}

/** The terms a job row adds (counter-triggers.ts JOB_TERMS, the same expressions in code). */
function termsOf(job: CountedJob): Terms {
  const started = job.startedAt !== null;
  const ran = job.status === 'succeeded' && started && job.finishedAt !== null;
  const startedAt = job.startedAt ?? 0;
  const finishedAt = job.finishedAt ?? 0;
  return [
    1,
    started ? 1 : 0,
    started ? startedAt - job.createdAt : 0,
    ran ? 1 : 0,
    job.status === 'succeeded' && started ? (job.finishedAt === null ? 0 : finishedAt - startedAt) : 0,
    ran ? 1 : 0,
    job.status === 'succeeded' && started ? (job.finishedAt === null ? 0 : finishedAt - job.createdAt) : 0,
  ];
}

interface TenantMoves {
  storageBytes: number;
  endedAttempts: number;
  attemptRunMs: number;
  leaseExpirations: number;
}

export class CounterMoves {
  constructor(private readonly st: Statements) {}

  /** `tenant\0kind\0status` → the terms to add. */
  private readonly jobs = new Map<string, Terms>();
  private readonly tenants = new Map<string, TenantMoves>();

  private add(job: CountedJob, sign: 1 | -1): void {
    const key = `${job.tenant}\0${job.kind}\0${job.status}`;
    let sums = this.jobs.get(key);
    if (sums === undefined) this.jobs.set(key, (sums = [0, 0, 0, 0, 0, 0, 0]));
    const terms = termsOf(job);
    for (let i = 0; i < terms.length; i++) sums[i] = (sums[i] ?? 0) + sign * (terms[i] ?? 0);
  }

  private tenant(tenant: string): TenantMoves {
    let moves = this.tenants.get(tenant);
    if (moves === undefined) this.tenants.set(tenant, (moves = { storageBytes: 0, endedAttempts: 0, attemptRunMs: 0, leaseExpirations: 0 }));
    return moves;
  }

  /** A new job (enqueue): its row, and its payload in the tenant's stored bytes. */
  created(tenant: string, kind: string, status: JobStatus, payloadBytes: number, now: number): void {
    this.add({ tenant, kind, status, createdAt: now, startedAt: null, finishedAt: null }, 1);
    this.tenant(tenant).storageBytes += payloadBytes;
  }

  /** A job's row changed from `before` to `after` (the same job: tenant and kind do not change). */
  moved(before: CountedJob, after: CountedJob): void {
    this.add(before, -1);
    this.add(after, 1);
  }

  /** A job deleted (retention): its row's terms go. */
  deleted(job: CountedJob): void {
    this.add(job, -1);
  }

  /** An attempt that ended (or, with sign -1, an ended attempt deleted by retention). */
  attemptEnded(tenant: string, runMs: number, sign: 1 | -1 = 1): void {
    const moves = this.tenant(tenant);
    moves.endedAttempts += sign;
    moves.attemptRunMs += sign * runMs;
  }

  storage(tenant: string, bytes: number): void {
    this.tenant(tenant).storageBytes += bytes;
  }

  leaseExpired(tenant: string): void {
    this.tenant(tenant).leaseExpirations++;
  }

  /** Jobs this transaction has moved into (or out of, negative) the (tenant, kind, status) row and not yet written. */
  pending(tenant: string, kind: string, status: JobStatus): number {
    return this.jobs.get(`${tenant}\0${kind}\0${status}`)?.[0] ?? 0;
  }

  /** Writes what was added since the last apply or discard, inside the open transaction, and starts afresh. */
  apply(): void {
    for (const [key, terms] of this.jobs) {
      if (terms.every((term) => term === 0)) continue;
      const [tenant, kind, status] = key.split('\0');
      this.st.counterAddTerms.run(tenant, kind, status, ...terms);
    }
    // A tenant touched gets its row even with nothing to add (a first job with an empty payload): stats read it.
    for (const [tenant, moves] of this.tenants) {
      this.st.counterAddTenant.run(tenant, moves.storageBytes, moves.endedAttempts, moves.attemptRunMs, moves.leaseExpirations);
    }
    this.discard();
  }

  discard(): void {
    this.jobs.clear();
    this.tenants.clear();
  }
}
