/**
 * A Store that fails a seeded fraction of calls with StoreUnavailableError, a
 * test tool for the fault tests. Half of the injected failures happen before
 * the call reaches the real store (nothing changed), half after it returned
 * (the change is committed, yet the caller sees store_unavailable), which is
 * what a connection lost during COMMIT looks like to a coordinator. Every
 * injected failure is recorded with its method and params, so a test can ask
 * what a client's retry must find. `enabled = false` makes it a plain proxy.
 */

// The soak's generator: the seed fixes the sequence of draws; which call gets which draw still depends on interleaving.
import { seededRandom } from '../../bench/soak.js';
import { StoreUnavailableError } from '../../src/core/errors.js';
import type { Store } from '../../src/store/store.js';

export type FaultPhase = 'before' | 'after';

export interface InjectedFault {
  readonly method: string;
  readonly phase: FaultPhase;
  readonly params: unknown;
  /** What the real store answered, for failures after the call. */
  readonly result?: unknown;
}

export interface FlakyStoreOptions {
  readonly seed: number;
  /** Fraction of calls that fail, e.g. 0.03. */
  readonly failureRate: number;
}

/** The seed from LEASEHOLD_FAULT_SEED, or a fresh one; printed either way so a failing run can be tried again with the same draws. */
export function faultSeed(label: string): number {
  const fromEnv = process.env['LEASEHOLD_FAULT_SEED'];
  const seed = fromEnv !== undefined && fromEnv !== '' ? Number(fromEnv) >>> 0 : Math.floor(Math.random() * 2 ** 32);
  console.log(`${label}: LEASEHOLD_FAULT_SEED=${seed}`);
  return seed;
}

export class FlakyStore implements Store {
  readonly backend: Store['backend'];
  enabled = true;
  readonly faults: InjectedFault[] = [];
  calls = 0;
  private readonly random: () => number;

  constructor(
    private readonly inner: Store,
    private readonly options: FlakyStoreOptions,
  ) {
    this.backend = inner.backend;
    this.random = seededRandom(options.seed);
  }

  private async guard<T>(method: string, params: unknown, call: () => Promise<T>): Promise<T> {
    if (!this.enabled) return call();
    this.calls += 1;
    const draw = this.random();
    const phase: FaultPhase | null = draw < this.options.failureRate / 2 ? 'before' : draw < this.options.failureRate ? 'after' : null;
    if (phase === 'before') {
      this.faults.push({ method, phase, params });
      throw new StoreUnavailableError('injected: the store failed before the call');
    }
    const value = await call();
    if (phase === 'after') {
      this.faults.push({ method, phase, params, result: value });
      throw new StoreUnavailableError('injected: the store failed after the call committed');
    }
    return value;
  }

  now: Store['now'] = () => this.guard('now', undefined, () => this.inner.now());
  ping: Store['ping'] = () => this.guard('ping', undefined, () => this.inner.ping());
  close: Store['close'] = () => this.inner.close();
  queueWaitMs: Store['queueWaitMs'] = () => this.inner.queueWaitMs();
  apiKeyList: Store['apiKeyList'] = (p) => this.guard('apiKeyList', p, () => this.inner.apiKeyList(p));
  apiKeyInsert: Store['apiKeyInsert'] = (p) => this.guard('apiKeyInsert', p, () => this.inner.apiKeyInsert(p));
  apiKeyFindByHash: Store['apiKeyFindByHash'] = (p) => this.guard('apiKeyFindByHash', p, () => this.inner.apiKeyFindByHash(p));
  apiKeyRevoke: Store['apiKeyRevoke'] = (p) => this.guard('apiKeyRevoke', p, () => this.inner.apiKeyRevoke(p));
  kindUpsert: Store['kindUpsert'] = (p) => this.guard('kindUpsert', p, () => this.inner.kindUpsert(p));
  kindSetPaused: Store['kindSetPaused'] = (p) => this.guard('kindSetPaused', p, () => this.inner.kindSetPaused(p));
  kindGet: Store['kindGet'] = (p) => this.guard('kindGet', p, () => this.inner.kindGet(p));
  kindList: Store['kindList'] = (p) => this.guard('kindList', p, () => this.inner.kindList(p));
  scheduleUpsert: Store['scheduleUpsert'] = (p) => this.guard('scheduleUpsert', p, () => this.inner.scheduleUpsert(p));
  scheduleGet: Store['scheduleGet'] = (p) => this.guard('scheduleGet', p, () => this.inner.scheduleGet(p));
  scheduleList: Store['scheduleList'] = (p) => this.guard('scheduleList', p, () => this.inner.scheduleList(p));
  scheduleDelete: Store['scheduleDelete'] = (p) => this.guard('scheduleDelete', p, () => this.inner.scheduleDelete(p));
  scheduleDue: Store['scheduleDue'] = (p) => this.guard('scheduleDue', p, () => this.inner.scheduleDue(p));
  scheduleEarliest: Store['scheduleEarliest'] = () => this.guard('scheduleEarliest', undefined, () => this.inner.scheduleEarliest());
  scheduleFire: Store['scheduleFire'] = (p) => this.guard('scheduleFire', p, () => this.inner.scheduleFire(p));
  jobEnqueue: Store['jobEnqueue'] = (p) => this.guard('jobEnqueue', p, () => this.inner.jobEnqueue(p));
  jobEnqueueMany: Store['jobEnqueueMany'] = (p) => this.guard('jobEnqueueMany', p, () => this.inner.jobEnqueueMany(p));
  jobGet: Store['jobGet'] = (p) => this.guard('jobGet', p, () => this.inner.jobGet(p));
  jobList: Store['jobList'] = (p) => this.guard('jobList', p, () => this.inner.jobList(p));
  jobLease: Store['jobLease'] = (p) => this.guard('jobLease', p, () => this.inner.jobLease(p));
  jobLeaseWithNextDue: Store['jobLeaseWithNextDue'] = (p) => this.guard('jobLeaseWithNextDue', p, () => this.inner.jobLeaseWithNextDue(p));
  jobRenew: Store['jobRenew'] = (p) => this.guard('jobRenew', p, () => this.inner.jobRenew(p));
  jobComplete: Store['jobComplete'] = (p) => this.guard('jobComplete', p, () => this.inner.jobComplete(p));
  jobCompleteMany: Store['jobCompleteMany'] = (p) => this.guard('jobCompleteMany', p, () => this.inner.jobCompleteMany(p));
  jobCompleteManyThenLease: Store['jobCompleteManyThenLease'] = (c, l) =>
    this.guard('jobCompleteManyThenLease', { completions: c, lease: l }, () => this.inner.jobCompleteManyThenLease(c, l));
  jobFail: Store['jobFail'] = (p) => this.guard('jobFail', p, () => this.inner.jobFail(p));
  jobCheckpoint: Store['jobCheckpoint'] = (p) => this.guard('jobCheckpoint', p, () => this.inner.jobCheckpoint(p));
  jobMarkEffectStarted: Store['jobMarkEffectStarted'] = (p) => this.guard('jobMarkEffectStarted', p, () => this.inner.jobMarkEffectStarted(p));
  jobRequeue: Store['jobRequeue'] = (p) => this.guard('jobRequeue', p, () => this.inner.jobRequeue(p));
  jobCancel: Store['jobCancel'] = (p) => this.guard('jobCancel', p, () => this.inner.jobCancel(p));
  jobReconcile: Store['jobReconcile'] = (p) => this.guard('jobReconcile', p, () => this.inner.jobReconcile(p));
  jobAttempts: Store['jobAttempts'] = (p) => this.guard('jobAttempts', p, () => this.inner.jobAttempts(p));
  jobReapExpired: Store['jobReapExpired'] = () => this.guard('jobReapExpired', undefined, () => this.inner.jobReapExpired());
  jobNextDue: Store['jobNextDue'] = (p) => this.guard('jobNextDue', p, () => this.inner.jobNextDue(p));
  jobPurge: Store['jobPurge'] = (p) => this.guard('jobPurge', p, () => this.inner.jobPurge(p));
  jobPurgeCount: Store['jobPurgeCount'] = (p) => this.guard('jobPurgeCount', p, () => this.inner.jobPurgeCount(p));
  reclaimSpace: Store['reclaimSpace'] = () => this.guard('reclaimSpace', undefined, () => this.inner.reclaimSpace());
  stats: Store['stats'] = (p) => this.guard('stats', p, () => this.inner.stats(p));
  databaseSize: Store['databaseSize'] = () => this.guard('databaseSize', undefined, () => this.inner.databaseSize());
  groupStats: Store['groupStats'] = (p) => this.guard('groupStats', p, () => this.inner.groupStats(p));
  // Synchronous and changes nothing: a subscription is not a store call that can fail.
  watchAvailable: Store['watchAvailable'] = (listener) => this.inner.watchAvailable(listener);
  watchFinished: Store['watchFinished'] = (listener) => this.inner.watchFinished(listener);
}
