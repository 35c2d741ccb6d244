/**
 * One leased job, from handler start to the answer of its complete or fail.
 *
 * While the job is held, the lease is renewed every third of its length. A
 * renewal refused with 409 (the lease went stale, the job was cancelled or
 * passed its deadline) aborts the handler's signal; so does a renewal that
 * cannot reach the coordinator before the lease would have run out. Once
 * aborted, the run does not complete the job: another worker may hold it
 * now, and the coordinator's lease expiry decides what happens.
 *
 * One abort is different: `cancelled`. The coordinator refuses the renewal
 * because someone cancelled the job, not because this lease is gone, so the
 * token is still live. The run sends a fail with it (code `cancelled`, not
 * retryable), which the store turns into `cancelled` at once instead of one
 * lease length later.
 *
 * Lease horizons are measured on this host's clock from the moment the lease
 * or renew request was sent, which is never later than the coordinator's own
 * start of the lease: the local estimate runs out first, never after.
 */

import type { Clock } from '../core/clock.js';
import { crashPoint } from '../core/fault-points.js';
import type { LeasedJob } from '../protocol/schemas.js';
import type { WorkerCalls } from '../protocol/worker-calls.js';
import type { Checkpoint } from '../store/store.js';
import { resultBytesOf } from './binary-result.js';
import type { CompletionBatcher } from './completion-batcher.js';
import type { Handler, JobContext } from './handler.js';
import { describeFailure, handlerFailureLogFields, JobAbortedError, type AbortCode } from './job-errors.js';
import { errorFields, type WorkerLogger } from './logger.js';
import { refusalOf, type Refusal } from './refusal.js';
import { withRetry, type RetryOptions } from './retry.js';

export interface JobRunDeps {
  readonly client: WorkerCalls;
  readonly batcher: CompletionBatcher;
  readonly clock: Clock;
  readonly retry: Omit<RetryOptions, 'giveUpAt' | 'signal'>;
  readonly logger: WorkerLogger;
  readonly workerId: string;
  readonly leaseMs: number;
  /** Redacted from error messages sent to the coordinator. */
  readonly secrets: readonly string[];
}

export class JobRun {
  /** Made on first use: most handlers never read their signal, and an AbortSignal is costly to create per job. */
  private controller: AbortController | undefined;
  private abortReason: JobAbortedError | undefined;
  private leaseEndsAt: number;
  private readonly deadlineAt: number | null;
  /** The deadline on this host's clock, which may be hours off the coordinator's. */
  private readonly localDeadlineAt: number | null;
  private renewTimer: NodeJS.Timeout | undefined;
  private settled = false;
  private pendingProgress: { value: unknown } | undefined;
  private readonly fields: Record<string, unknown>;
  private onAbandon: (() => void) | undefined;

  constructor(
    private readonly job: LeasedJob,
    private readonly handler: Handler<unknown> | undefined,
    /** The earliest time on this host's clock at which the lease can have begun. */
    leaseStartBound: number,
    private readonly deps: JobRunDeps,
  ) {
    this.deadlineAt = job.deadlineAt === null ? null : Date.parse(job.deadlineAt);
    // Placed by its distance from the lease's end, both coordinator times, so this host's clock offset cancels out.
    // A lease cut short at the deadline gives distance 0: the lease's own estimate applies (the coordinator refuses anything later).
    this.localDeadlineAt = this.deadlineAt === null ? null : leaseStartBound + deps.leaseMs + (this.deadlineAt - Date.parse(job.leaseExpiresAt));
    this.leaseEndsAt = this.capAtDeadline(leaseStartBound + deps.leaseMs);
    this.fields = { jobId: job.id, kind: job.kind, attempt: job.attempt, epoch: job.epoch, workerId: deps.workerId };
  }

  get id(): string {
    return this.job.id;
  }

  get aborted(): boolean {
    return this.abortReason !== undefined;
  }

  /**
   * Runs the handler. `handlerDone` resolves when the handler returned or threw
   * (the worker's slot is free again); `settled` when the outcome was answered
   * or abandoned.
   */
  start(): { handlerDone: Promise<void>; settled: Promise<void> } {
    this.scheduleRenewal();
    const outcome = this.invoke();
    const handlerDone = outcome.then(() => undefined);
    // An abandoned run is settled at once: nothing more will be sent for it, whenever its handler returns.
    const abandoned = new Promise<void>((resolve) => {
      this.onAbandon = resolve;
    });
    const settled = Promise.race([outcome.then((result) => this.report(result)), abandoned]).finally(() => this.finish());
    return { handlerDone, settled };
  }

  /**
   * Aborts the handler's signal and gives up the job. The lease is left alone,
   * except after a cancel: then the still-live token acknowledges it with a
   * fail, and the run settles once that answer arrived (or the lease ran out).
   */
  abandon(code: AbortCode, message: string): void {
    if (this.abortReason !== undefined) return;
    this.abortReason = new JobAbortedError(code, message);
    this.controller?.abort(this.abortReason);
    this.finish();
    if (code === 'cancelled') {
      this.deps.logger.info({ ...this.fields, reason: code }, 'job cancelled; handler aborted');
      void this.fail({ code: 'cancelled', message: 'the job was cancelled; the worker aborted its handler', retryable: false }).finally(() =>
        this.onAbandon?.(),
      );
      return;
    }
    this.onAbandon?.();
    this.deps.logger.warn({ ...this.fields, reason: code }, 'job aborted; leaving it to its lease');
  }

  private async invoke(): Promise<{ ok: true; value: unknown } | { ok: false; error: unknown }> {
    if (this.handler === undefined) {
      return { ok: false, error: Object.assign(new Error(`no handler for kind ${this.job.kind}`), { code: 'no_handler' }) };
    }
    try {
      return { ok: true, value: await this.handler(this.context()) };
    } catch (error) {
      return { ok: false, error };
    }
  }

  /** The handler's signal; aborted already when the run was abandoned before anyone asked for it. */
  private get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortReason !== undefined) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  private context(): JobContext<unknown> {
    const { job } = this;
    const run = this; // the getter below runs with the context as `this`
    return {
      id: job.id,
      kind: job.kind,
      // A coordinator that predates groups answers without the field.
      group: job.group ?? null,
      payload: job.payload,
      attempt: job.attempt,
      maxAttempts: job.maxAttempts,
      fence: job.epoch,
      workerId: this.deps.workerId,
      get signal() {
        return run.signal;
      },
      deadlineAt: this.deadlineAt === null ? null : new Date(this.deadlineAt),
      checkpoint: job.checkpoint as Checkpoint | null,
      saveCheckpoint: (step, state) =>
        this.leaseCall((signal) => this.deps.client.checkpoint(job.id, { token: job.token, step, state }, signal === undefined ? {} : { signal })),
      effectStarted: () => this.leaseCall((signal) => this.deps.client.effectStarted(job.id, job.token, signal === undefined ? {} : { signal })),
      progress: (value) => {
        this.pendingProgress = { value };
      },
    };
  }

  /** A call made under this lease: retried while the lease lives; a 409 means the lease is gone. */
  private async leaseCall(call: (signal: AbortSignal | undefined) => Promise<void>): Promise<void> {
    if (this.abortReason !== undefined) throw this.abortReason;
    try {
      await withRetry(call, { ...this.deps.retry, giveUpAt: () => this.leaseEndsAt, signal: this.signal });
    } catch (error) {
      const refusal = refusalOf(error);
      if (refusal !== undefined && (refusal.status === 409 || refusal.status === 404)) {
        this.abandon(abortCodeOf(refusal), refusal.message);
      }
      throw this.abortReason ?? error;
    }
  }

  private async report(outcome: { ok: true; value: unknown } | { ok: false; error: unknown }): Promise<void> {
    if (this.aborted) return;
    const { job, deps } = this;
    if (outcome.ok) {
      crashPoint('worker.after-handler');
      let result = outcome.value;
      const resultBytes = resultBytesOf(result);
      if (resultBytes !== undefined) result = undefined;
      try {
        // Checked here so that one unserializable result cannot break a whole batch.
        if (result !== undefined && JSON.stringify(result) === undefined) result = undefined;
      } catch (error) {
        await this.fail({ code: 'result_not_serializable', message: describeFailure(error, deps.secrets).message, retryable: false });
        return;
      }
      const answer = await deps.batcher.submit({
        id: job.id,
        token: job.token,
        result,
        ...(resultBytes === undefined ? {} : { resultBytes }),
        isLost: () => this.aborted,
        giveUpAt: () => this.leaseEndsAt,
      });
      if (answer.kind === 'completed') deps.logger.debug(this.fields, 'job completed');
      else if (answer.kind === 'rejected') deps.logger.warn({ ...this.fields, code: answer.code }, 'completion refused');
      else if (answer.kind === 'error') {
        if (refusalOf(answer.error)?.status === 413) {
          await this.fail({ code: 'result_too_large', message: 'the result was larger than the coordinator accepts', retryable: false });
        } else {
          deps.logger.error({ ...this.fields, ...errorFields(answer.error) }, 'completion not delivered; the lease will decide');
        }
      }
      return;
    }
    const secrets = [...deps.secrets, job.token];
    const report = describeFailure(outcome.error, secrets);
    deps.logger.warn({ ...this.fields, code: report.code, retryable: report.retryable, ...handlerFailureLogFields(outcome.error, secrets) }, 'handler failed');
    await this.fail(report);
  }

  private async fail(report: { code: string; message: string; retryable: boolean }): Promise<void> {
    const { job, deps } = this;
    try {
      const answer = await withRetry(
        () =>
          deps.client.fail(job.id, {
            token: job.token,
            error: { code: report.code, message: report.message },
            retryable: report.retryable,
          }),
        { ...deps.retry, giveUpAt: () => this.leaseEndsAt },
      );
      deps.logger.debug({ ...this.fields, status: answer.status }, 'job failed');
    } catch (error) {
      deps.logger.warn({ ...this.fields, ...errorFields(error) }, 'failure not delivered; the lease will decide');
    }
  }

  private scheduleRenewal(): void {
    if (this.settled || this.aborted) return;
    this.renewTimer = setTimeout(() => void this.renew(), Math.max(1, Math.floor(this.deps.leaseMs / 3)));
  }

  private async renew(): Promise<void> {
    const { job, deps } = this;
    const progress = this.pendingProgress;
    this.pendingProgress = undefined;
    let sentAt = deps.clock.now();
    try {
      await withRetry(
        (signal) => {
          sentAt = deps.clock.now();
          const body =
            progress === undefined ? { token: job.token, leaseMs: deps.leaseMs } : { token: job.token, leaseMs: deps.leaseMs, progress: progress.value };
          return deps.client.renew(job.id, body, signal === undefined ? {} : { signal });
        },
        { ...deps.retry, giveUpAt: () => this.leaseEndsAt, signal: this.signal },
      );
      this.leaseEndsAt = this.capAtDeadline(sentAt + deps.leaseMs);
      this.scheduleRenewal();
    } catch (error) {
      if (this.aborted || this.settled) return;
      const refusal = refusalOf(error);
      if (refusal !== undefined && refusal.status !== 503) {
        this.abandon(abortCodeOf(refusal), refusal.message);
      } else {
        deps.logger.warn({ ...this.fields, ...errorFields(error) }, 'could not renew before the lease ran out');
        this.abandon('lease_lost', 'the lease could not be renewed before it ran out');
      }
    }
  }

  private finish(): void {
    this.settled = true;
    if (this.renewTimer !== undefined) clearTimeout(this.renewTimer);
    this.renewTimer = undefined;
  }

  private capAtDeadline(at: number): number {
    return this.localDeadlineAt === null ? at : Math.min(at, this.localDeadlineAt);
  }
}

function abortCodeOf(error: Refusal): AbortCode {
  if (error.code === 'cancelled' || error.code === 'deadline_exceeded' || error.code === 'not_found') return error.code;
  return error.status === 404 ? 'not_found' : 'stale_lease';
}
