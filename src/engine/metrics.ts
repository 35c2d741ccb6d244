/**
 * The coordinator's process-side metrics: prom-client counters and histograms
 * in a registry of this app (several coordinators in one process keep apart),
 * updated where the transitions happen (routes, the reaper, the request
 * hooks). GET /metrics renders them with the queue gauges read from the store
 * (queue-gauges.ts) by metrics-text.ts.
 *
 * Labels are bounded: tenant, kind, status, outcome, error code, route,
 * reason — never a job id, user or key. Tenants, kinds and error codes come
 * from clients, so each has a budget (LabelBudget): a value seen after the
 * budget is spent is written as `_other`, and a completion whose lease was
 * taken through another coordinator (so this one does not know its kind)
 * carries kind `_other` as well.
 */

import { Counter, Histogram, Registry, type LabelValues } from 'prom-client';
import { onCommit, type CommitReport } from '../core/commit-report.js';

/** The label value of a tenant, kind or error code beyond its budget, or not known here. */
export const OTHER_LABEL = '_other';

/** Distinct tenants that get their own series; later ones are `_other`. */
export const MAX_TENANT_LABELS = 1_000;
/** Distinct (tenant, kind) pairs that get their own series. */
export const MAX_KIND_LABELS = 10_000;
/** Distinct worker error codes that get their own series (the queue's own codes are few). */
export const MAX_ERROR_CODE_LABELS = 200;

/** The first `limit` distinct values keep their name; later ones are OTHER_LABEL. */
export class LabelBudget {
  private readonly seen = new Set<string>();
  constructor(private readonly limit: number) {}
  label(value: string): string {
    if (this.seen.has(value)) return value;
    if (this.seen.size >= this.limit) return OTHER_LABEL;
    this.seen.add(value);
    return value;
  }
  has(value: string): boolean {
    return this.seen.has(value);
  }
  values(): readonly string[] {
    return [...this.seen];
  }
}

/** The key of a label set: its values in the metric's label order. */
function labelKey<L extends string>(names: readonly L[], labels: LabelValues<L>): string {
  let key = '';
  for (const name of names) key += `${labels[name] ?? ''}\u0000`;
  return key;
}

/**
 * A counter whose series are kept by their label values: prom-client sorts, hashes and checks the labels of
 * every inc() it is given an object for, about a tenth of the coordinator's metrics time per request.
 */
export class KeptCounter<L extends string> {
  private readonly series = new Map<string, Counter.Internal>();
  constructor(
    private readonly counter: Counter<L>,
    private readonly names: readonly L[],
  ) {}
  inc(labels: LabelValues<L>, value = 1): void {
    const key = labelKey(this.names, labels);
    let child = this.series.get(key);
    if (child === undefined) {
      child = this.counter.labels(labels);
      this.series.set(key, child);
    }
    child.inc(value);
  }
}

/** A histogram whose series are kept by their label values (KeptCounter). */
export class KeptHistogram<L extends string> {
  private readonly series = new Map<string, Histogram.Internal<L>>();
  constructor(
    private readonly histogram: Histogram<L>,
    private readonly names: readonly L[],
  ) {}
  observe(labels: LabelValues<L>, value: number): void {
    const key = labelKey(this.names, labels);
    let child = this.series.get(key);
    if (child === undefined) {
      child = this.histogram.labels(labels);
      this.series.set(key, child);
    }
    child.observe(value);
  }
}

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const BATCH_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000];

export type FailOutcomeName = 'retried' | 'dead' | 'unknown' | 'cancelled';

export class CoordinatorMetrics {
  readonly registry = new Registry();
  readonly tenants = new LabelBudget(MAX_TENANT_LABELS);
  private readonly kinds = new LabelBudget(MAX_KIND_LABELS);
  private readonly errorCodes = new LabelBudget(MAX_ERROR_CODE_LABELS);
  private readonly unsubscribe: () => void;

  // Series are bounded by the label budgets above, so keeping each one's child is bounded too.
  private readonly c = <L extends string>(name: string, help: string, labelNames: readonly L[]): KeptCounter<L> =>
    new KeptCounter(new Counter({ name, help, labelNames, registers: [this.registry] }), labelNames);
  private readonly h = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets: number[]): KeptHistogram<L> =>
    new KeptHistogram(new Histogram({ name, help, labelNames, buckets, registers: [this.registry] }), labelNames);

  readonly enqueued = this.c('leasehold_jobs_enqueued_total', 'Enqueue answers by outcome (created, replayed)', ['tenant', 'kind', 'outcome']);
  readonly leased = this.c('leasehold_jobs_leased_total', 'Jobs leased to workers (attempts started)', ['tenant', 'kind']);
  readonly completed = this.c('leasehold_jobs_completed_total', 'Jobs completed by their worker (succeeded)', ['tenant', 'kind']);
  readonly failed = this.c('leasehold_jobs_failed_total', 'Attempts failed by their worker, by error code and where the job went', [
    'tenant',
    'kind',
    'error_code',
    'outcome',
  ]);
  readonly retried = this.c('leasehold_jobs_retried_total', 'Failed attempts queued again after backoff', ['tenant', 'kind']);
  readonly dead = this.c('leasehold_jobs_dead_total', 'Jobs that became dead through a worker failure or an oversized result', [
    'tenant',
    'kind',
    'error_code',
  ]);
  readonly unknown = this.c('leasehold_jobs_unknown_total', 'Jobs that became unknown (an attempt ended after its declared effect)', ['tenant', 'kind']);
  readonly cancelled = this.c('leasehold_jobs_cancelled_total', 'Cancel requests that took effect (cancelled at once or requested of the running worker)', [
    'tenant',
    'outcome',
  ]);
  readonly requeued = this.c('leasehold_jobs_requeued_total', 'Dead jobs an admin requeued', ['tenant']);
  readonly reconciled = this.c('leasehold_jobs_reconciled_total', 'Unknown jobs an admin reconciled, by outcome', ['tenant', 'outcome']);
  readonly reaped = this.c(
    'leasehold_reaper_jobs_total',
    "The reaper's expiries and deadlines, by where the job went (requeued, dead, unknown, cancelled, deadline_expired)",
    ['outcome'],
  );
  readonly waitSeconds = this.h(
    'leasehold_job_wait_seconds',
    'From a job becoming available (enqueue, run-after or retry time) to its lease',
    ['tenant', 'kind'],
    DURATION_BUCKETS,
  );
  readonly runSeconds = this.h(
    'leasehold_job_run_seconds',
    'From a lease to its completion or failure, for leases taken through this coordinator',
    ['tenant', 'kind', 'outcome'],
    DURATION_BUCKETS,
  );
  readonly payloadBytes = this.c('leasehold_payload_bytes_total', 'Payload bytes (canonical JSON) of created jobs', ['tenant', 'kind']);
  readonly resultBytes = this.c('leasehold_result_bytes_total', 'Result bytes sent with completions', ['tenant', 'kind']);
  readonly requests = this.c('leasehold_http_requests_total', 'HTTP answers by route pattern, method and status', ['route', 'method', 'status']);
  readonly requestSeconds = this.h(
    'leasehold_http_request_duration_seconds',
    'From a request arriving to its answer being written',
    ['route', 'method'],
    REQUEST_BUCKETS,
  );
  readonly unavailable = this.c('leasehold_http_503_total', 'Answers 503 by reason (the error code: overloaded, store_unavailable …)', ['reason']);
  readonly admissionDelay = this.h(
    'leasehold_admission_queue_delay_seconds',
    'Counted requests (enqueue, batches, operator actions): from their handler being ready to their answer, the time the admission rule measures',
    ['route'],
    REQUEST_BUCKETS,
  );
  readonly commitBatch = this.h(
    'leasehold_store_commit_batch_size',
    'Operations per group commit (SQLite transaction, PostgreSQL batched statement)',
    ['backend'],
    BATCH_BUCKETS,
  );
  readonly commitSeconds = this.h('leasehold_store_commit_duration_seconds', 'Duration of one group commit, fsync included', ['backend'], REQUEST_BUCKETS);
  readonly acceptanceValid = this.c(
    'leasehold_sli_acceptance_valid_total',
    'Acceptance SLI denominator: enqueue requests that were valid (accepted, or refused by the server: 5xx)',
    ['tenant'],
  );
  readonly acceptanceGood = this.c('leasehold_sli_acceptance_good_total', 'Acceptance SLI numerator: enqueue requests durably accepted (2xx)', ['tenant']);
  readonly completionTotal = this.c(
    'leasehold_sli_completion_total',
    'Completion SLI: accepted jobs that reached an end, good (succeeded, so within any deadline) or bad (dead, unknown, cancelled by a deadline)',
    ['tenant', 'outcome'],
  );

  constructor() {
    this.unsubscribe = onCommit((report: CommitReport) => {
      this.commitBatch.observe({ backend: report.backend }, report.operations);
      this.commitSeconds.observe({ backend: report.backend }, report.durationMs / 1000);
    });
  }

  tenant(tenant: string): string {
    return this.tenants.label(tenant);
  }

  kind(tenant: string, kind: string | undefined): string {
    if (kind === undefined) return OTHER_LABEL;
    return this.kinds.label(`${tenant}\n${kind}`) === OTHER_LABEL ? OTHER_LABEL : kind;
  }

  errorCode(code: string): string {
    return this.errorCodes.label(code);
  }

  /**
   * One enqueue request in the acceptance SLI, by the HTTP status it answered (or, in the library, would have
   * answered): valid unless it was the client's fault (4xx), good when accepted (2xx). Both fronts count here.
   */
  acceptance(tenant: string, status: number): void {
    if (status >= 400 && status < 500) return;
    const labels = { tenant: this.tenant(tenant) };
    this.acceptanceValid.inc(labels);
    if (status < 300) this.acceptanceGood.inc(labels);
  }

  close(): void {
    this.unsubscribe();
  }
}
