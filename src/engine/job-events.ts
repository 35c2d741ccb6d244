/**
 * Where the routes and the reaper report the transitions they applied: each
 * one is counted (metrics.ts) and logged at info on the request's logger (so
 * the line carries the request id) with the job's id, kind, attempt, epoch,
 * worker and, for an ending that is not a success, its failure class. Lease
 * tokens, keys and payloads are never among the fields.
 *
 * A complete or fail names only the job and its token, so what this
 * coordinator learnt at the lease (kind, attempt, epoch, worker, when) is kept
 * in a bounded ledger keyed by job id until the attempt ends. A lease taken
 * through another coordinator is not in it: its ending is logged with the job
 * id alone and counted under kind `_other`, without a run duration.
 */

import { performance } from 'node:perf_hooks';
import type { Logger } from './logger.js';
import type { CancelOutcome, CompleteOutcome, EnqueueOutcome, FailOutcome, JobRecord, LeasedJob, ReapOutcome, ReconcileOutcomeName } from '../store/store.js';
import type { CoordinatorMetrics } from './metrics.js';

interface LeaseEntry {
  readonly tenant: string;
  readonly kind: string;
  readonly attempt: number;
  readonly epoch: number;
  readonly workerId: string;
  readonly leasedAt: number;
}

/** Leases remembered at once; the oldest is forgotten first (its ending is then counted under `_other`). */
export const MAX_LEDGER_ENTRIES = 50_000;

type Log = Pick<Logger, 'info'>;

export class JobEvents {
  private readonly ledger = new Map<string, LeaseEntry>();

  constructor(private readonly metrics: CoordinatorMetrics) {}

  /** Leases this coordinator remembers (a test reads it). */
  get remembered(): number {
    return this.ledger.size;
  }

  enqueued(tenant: string, outcome: EnqueueOutcome, payloadBytes: number): void {
    if (outcome.kind === 'conflict') return;
    const job = outcome.job;
    const labels = { tenant: this.metrics.tenant(tenant), kind: this.metrics.kind(tenant, job.kind) };
    this.metrics.enqueued.inc({ ...labels, outcome: outcome.kind });
    if (outcome.kind === 'created') this.metrics.payloadBytes.inc(labels, payloadBytes);
  }

  leased(log: Log, tenant: string, workerId: string, leaseMs: number, jobs: readonly LeasedJob[]): void {
    const now = performance.now();
    for (const job of jobs) {
      const labels = { tenant: this.metrics.tenant(tenant), kind: this.metrics.kind(tenant, job.kind) };
      this.metrics.leased.inc(labels);
      // The lease began leaseMs before its expiry, unless a deadline cut it short: then the start is not known here.
      if (job.deadlineAt === null || job.leaseExpiresAt < job.deadlineAt) {
        this.metrics.waitSeconds.observe(labels, Math.max(0, job.leaseExpiresAt - leaseMs - job.availableAt) / 1000);
      }
      if (this.ledger.size >= MAX_LEDGER_ENTRIES) {
        const oldest = this.ledger.keys().next();
        if (oldest.done !== true) this.ledger.delete(oldest.value);
      }
      this.ledger.delete(job.id);
      const entry: LeaseEntry = { tenant, kind: job.kind, attempt: job.attempt, epoch: job.epoch, workerId, leasedAt: now };
      this.ledger.set(job.id, entry);
      log.info({ jobId: job.id, kind: job.kind, attempt: job.attempt, epoch: job.epoch, workerId }, 'job leased');
    }
  }

  completed(log: Log, tenant: string, id: string, outcome: CompleteOutcome, resultBytes: number): void {
    if (outcome.kind === 'rejected' || (outcome.kind === 'completed' && outcome.replayed)) return;
    const entry = this.end(id, tenant);
    const labels = this.labels(tenant, entry);
    if (outcome.kind === 'completed') {
      this.metrics.completed.inc(labels);
      if (resultBytes > 0) this.metrics.resultBytes.inc(labels, resultBytes);
      this.metrics.completionTotal.inc({ tenant: labels.tenant, outcome: 'good' });
      this.observeRun(labels, entry, 'completed');
      log.info(this.fields(id, entry), 'job completed');
      return;
    }
    this.metrics.dead.inc({ ...labels, error_code: 'result_too_large' });
    this.metrics.completionTotal.inc({ tenant: labels.tenant, outcome: 'bad' });
    this.observeRun(labels, entry, 'dead');
    log.info({ ...this.fields(id, entry), errorCode: 'result_too_large', failureClass: 'result_too_large' }, 'job dead');
  }

  failed(log: Log, tenant: string, id: string, errorCode: string, outcome: FailOutcome): void {
    if (outcome.kind === 'rejected' || outcome.replayed) return;
    const entry = this.end(id, tenant);
    const labels = this.labels(tenant, entry);
    const code = this.metrics.errorCode(errorCode);
    const name = outcome.status === 'queued' ? 'retried' : outcome.status;
    this.metrics.failed.inc({ ...labels, error_code: code, outcome: name });
    this.observeRun(labels, entry, name);
    if (name === 'retried') this.metrics.retried.inc(labels);
    else if (name === 'dead') this.metrics.dead.inc({ ...labels, error_code: code });
    else if (name === 'unknown') this.metrics.unknown.inc(labels);
    if (name === 'dead' || name === 'unknown') this.metrics.completionTotal.inc({ tenant: labels.tenant, outcome: 'bad' });
    // The class the store decided and stored with the ending (a deadline's, an exhausted retry's …), not a guess.
    log.info({ ...this.fields(id, entry), errorCode, failureClass: outcome.failureClass }, `job ${name}`);
  }

  cancelled(log: Log, tenant: string, outcome: CancelOutcome): void {
    if (outcome.kind === 'rejected') return;
    const job = outcome.job;
    if (outcome.kind === 'cancelled') this.ledger.delete(job.id);
    this.metrics.cancelled.inc({ tenant: this.metrics.tenant(tenant), outcome: outcome.kind });
    log.info({ ...jobFields(job), failureClass: 'cancelled' }, outcome.kind === 'cancelled' ? 'job cancelled' : 'job cancel requested');
  }

  requeued(log: Log, tenant: string, job: JobRecord): void {
    this.metrics.requeued.inc({ tenant: this.metrics.tenant(tenant) });
    log.info(jobFields(job), 'job requeued');
  }

  reconciled(log: Log, tenant: string, job: JobRecord, outcome: ReconcileOutcomeName): void {
    this.metrics.reconciled.inc({ tenant: this.metrics.tenant(tenant), outcome });
    log.info({ ...jobFields(job), outcome, ...(outcome === 'dead' ? { failureClass: 'reconciled_dead' } : {}) }, 'job reconciled');
  }

  /** The reaper's batches say how many jobs went where, not which: counted and logged as counts. */
  reaped(log: Log, outcome: ReapOutcome): void {
    const counts = {
      requeued: outcome.requeued,
      dead: outcome.dead,
      unknown: outcome.unknown,
      cancelled: outcome.cancelled,
      deadline_expired: outcome.deadlineExpired,
    };
    let changed = 0;
    for (const [name, count] of Object.entries(counts)) {
      if (count > 0) this.metrics.reaped.inc({ outcome: name }, count);
      changed += count;
    }
    const bad = outcome.dead + outcome.unknown + outcome.deadlineExpired;
    if (bad > 0) this.metrics.completionTotal.inc({ outcome: 'bad' }, bad);
    if (changed > 0) {
      log.info(
        { expired: outcome.requeued + outcome.dead + outcome.unknown + outcome.cancelled, ...counts, failureClass: 'lease_expired' },
        'reaper applied expiries and deadlines',
      );
    }
  }

  private end(id: string, tenant: string): LeaseEntry | undefined {
    const entry = this.ledger.get(id);
    if (entry === undefined || entry.tenant !== tenant) return undefined;
    this.ledger.delete(id);
    return entry;
  }

  private labels(tenant: string, entry: LeaseEntry | undefined): { tenant: string; kind: string } {
    return { tenant: this.metrics.tenant(tenant), kind: this.metrics.kind(tenant, entry?.kind) };
  }

  private observeRun(labels: { tenant: string; kind: string }, entry: LeaseEntry | undefined, outcome: string): void {
    if (entry !== undefined) this.metrics.runSeconds.observe({ ...labels, outcome }, (performance.now() - entry.leasedAt) / 1000);
  }

  private fields(id: string, entry: LeaseEntry | undefined): Record<string, unknown> {
    return entry === undefined ? { jobId: id } : { jobId: id, kind: entry.kind, attempt: entry.attempt, epoch: entry.epoch, workerId: entry.workerId };
  }
}

/** A job's identifying fields for a log line: never its payload, token or result. */
function jobFields(job: JobRecord): Record<string, unknown> {
  return { jobId: job.id, kind: job.kind, attempt: job.attempts, epoch: job.epoch, ...(job.leaseOwner === null ? {} : { workerId: job.leaseOwner }) };
}
