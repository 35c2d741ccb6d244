/**
 * Coordinator configuration: every knob with its default, validated once when
 * the app is built and then frozen. A bad configuration fails with one error
 * that lists every problem, so an operator fixes them in one go instead of one
 * restart per typo.
 */

import { DEFAULT_BACKOFF, type BackoffPolicy } from '../core/backoff.js';
import { MAX_RETENTION_MS } from '../protocol/retention.js';
import { LIMITS } from '../protocol/schemas.js';
import { DEFAULT_RETENTION, type RetentionPeriods } from '../store/retention.js';

export interface BackpressureConfig {
  /** Queued plus running jobs per tenant; null = unlimited. */
  readonly maxPendingJobs: number | null;
  /** Age of the oldest available job per tenant; null = unlimited. */
  readonly maxOldestAvailableAgeMs: number | null;
  /** Payload plus result bytes per tenant; null = unlimited. */
  readonly maxStorageBytes: number | null;
  /** How long a tenant's stats snapshot is reused by enqueue before it is read again. */
  readonly statsCacheMs: number;
}

export interface CoordinatorConfig {
  readonly defaultLeaseMs: number;
  readonly defaultMaxAttempts: number;
  /** How often the reaper returns expired leases; 0 disables it. */
  readonly reaperIntervalMs: number;
  /** How often finished jobs past their retention are deleted (retention.ts); 0 disables it. */
  readonly retentionIntervalMs: number;
  /** How long finished jobs are kept where their kind sets no period of its own. */
  readonly retention: RetentionPeriods;
  /** Jobs deleted per retention transaction. */
  readonly retentionBatchSize: number;
  /** The Retry-After (seconds) suggested to producers polling a job. */
  readonly pollIntervalSeconds: number;
  readonly defaultBackoff: BackoffPolicy;
  readonly bodyLimitBytes: number;
  readonly batchBodyLimitBytes: number;
  readonly backpressure: BackpressureConfig;
  /** When true, only registered kinds may be enqueued, even by a tenant that registered none. */
  readonly requireRegisteredKinds: boolean;
  /**
   * A safety re-check of parked long polls; null (the default) = none. Announcements and the due-time timer
   * wake polls (lease-waiters.ts); a poll also ends after its waitMs, and the worker's next poll leases.
   */
  readonly leaseRecheckMs: number | null;
  /**
   * How long an empty lease of a group of polls (tenant and kinds filter) stands for the group's next polls while
   * nothing is announced to the tenant: they park without a store call (lease-waiters.ts). 0 = every poll leases.
   */
  readonly emptyLeaseReuseMs: number;
  /** How long a looked-up API key is trusted before it is read again (a revocation takes effect within this); 0 disables. */
  readonly authCacheMs: number;
  /** How long a tenant's kind registry is reused before it is read again; 0 disables. */
  readonly kindCacheMs: number;
  /** Counted requests in flight before the next is refused 503 (admission.ts): a memory bound only; null = unlimited. */
  readonly maxInFlightRequests: number | null;
  /** Counted requests are refused 503 while the queueing delay stayed at or above this for a whole interval (admission.ts); null = off. */
  readonly admissionTargetMs: number | null;
  readonly admissionIntervalMs: number;
  /** Requests in flight (long polls aside) per API key and per tenant before 429; null = unlimited. */
  readonly maxInFlightPerKey: number | null;
  readonly maxInFlightPerTenant: number | null;
  /** POST /lease requests open (parked or not) per API key and per tenant before 429; null = unlimited. */
  readonly maxPollsPerKey: number | null;
  readonly maxPollsPerTenant: number | null;
  /** A connection that has not sent a request's complete headers within this is closed (slow headers). */
  readonly headersTimeoutMs: number;
  /** A connection that has not sent a complete request, body included, within this is answered 400 and closed. */
  readonly requestTimeoutMs: number;
  /** A kept-alive connection idle between requests this long is closed. */
  readonly keepAliveTimeoutMs: number;
  /** A connection on which nothing moves this long is closed; above the longest long poll. */
  readonly idleTimeoutMs: number;
  /** Largest kind payload schema, in bytes of canonical JSON (schema-limits.ts). */
  readonly maxSchemaBytes: number;
  /** Kinds one tenant may register. */
  readonly maxKindsPerTenant: number;
  /** Recurring schedules one tenant may have (PUT /schedules/{name}). */
  readonly maxSchedulesPerTenant: number;
  /** The scheduler's longest sleep between passes, to notice schedules set through other coordinators; 0 disables the scheduler. */
  readonly schedulerMaxSleepMs: number;
  /** The result limit of jobs whose kind is not registered (a registered kind has its own maxResultBytes). */
  readonly defaultMaxResultBytes: number;
  /** Checkpoint state limit, in bytes of canonical JSON, for unregistered kinds and the default of registered ones. */
  readonly maxCheckpointBytes: number;
  /** A bearer token GET /metrics admits besides admin keys (a Prometheus scraper holds no key); null for none. Never logged. */
  readonly metricsToken: string | null;
}

/** The settings admission.ts reads. */
export type AdmissionConfig = Pick<
  CoordinatorConfig,
  'maxInFlightRequests' | 'admissionTargetMs' | 'admissionIntervalMs' | 'maxInFlightPerKey' | 'maxInFlightPerTenant' | 'maxPollsPerKey' | 'maxPollsPerTenant'
>;

type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? (T[K] extends null ? T[K] : DeepPartial<T[K]>) : T[K] };
export type CoordinatorConfigInput = DeepPartial<{ -readonly [K in keyof CoordinatorConfig]: CoordinatorConfig[K] }>;

export const DEFAULT_CONFIG: CoordinatorConfig = deepFreeze({
  defaultLeaseMs: 30_000,
  defaultMaxAttempts: 5,
  reaperIntervalMs: 1_000,
  retentionIntervalMs: 60_000,
  retention: { ...DEFAULT_RETENTION },
  retentionBatchSize: 100,
  pollIntervalSeconds: 1,
  defaultBackoff: { baseMs: DEFAULT_BACKOFF.baseMs, maxMs: DEFAULT_BACKOFF.maxMs },
  bodyLimitBytes: LIMITS.bodyLimitBytes,
  batchBodyLimitBytes: LIMITS.batchBodyLimitBytes,
  backpressure: { maxPendingJobs: null, maxOldestAvailableAgeMs: null, maxStorageBytes: null, statsCacheMs: 1_000 },
  requireRegisteredKinds: false,
  leaseRecheckMs: null,
  emptyLeaseReuseMs: 1_000,
  authCacheMs: 1_000,
  kindCacheMs: 1_000,
  maxInFlightRequests: 4_096,
  // Off by default: with injected PostgreSQL store failures the rule stayed refusing (test/faults/flaky-store.test.ts,
  // 26,215 refusals); docs/design/failure-cases.md §6.9. 10 is the target to set when enabling it.
  admissionTargetMs: null,
  admissionIntervalMs: 100,
  maxInFlightPerKey: 2_000,
  maxInFlightPerTenant: 4_000,
  maxPollsPerKey: 2_000,
  maxPollsPerTenant: 4_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 120_000,
  maxSchemaBytes: 64 * 1024,
  maxKindsPerTenant: 1_000,
  maxSchedulesPerTenant: 1_000,
  schedulerMaxSleepMs: 60_000,
  defaultMaxResultBytes: 16 * 1024 * 1024,
  maxCheckpointBytes: 256 * 1024,
  metricsToken: null,
});

/** What a bearer token may hold (auth.ts), at least 32 characters so that it cannot be guessed. */
const METRICS_TOKEN = /^[A-Za-z0-9_\-.~+/=]{32,256}$/;

export class CoordinatorConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`invalid coordinator configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'CoordinatorConfigError';
    this.problems = problems;
  }
}

/** Merges `input` over the defaults, checks every field and returns a frozen config. */
export function resolveConfig(input: unknown = {}): CoordinatorConfig {
  const problems: string[] = [];
  const source = isRecord(input) ? input : (problems.push('config must be an object'), {});
  const known = new Set(Object.keys(DEFAULT_CONFIG));
  for (const key of Object.keys(source)) if (!known.has(key)) problems.push(`unknown option "${key}"`);

  const int = (value: unknown, fallback: number, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      problems.push(`${name} must be an integer between ${min} and ${max}`);
      return fallback;
    }
    return value;
  };
  const nullableInt = (value: unknown, fallback: number | null, name: string): number | null =>
    value === null ? null : value === undefined ? fallback : int(value, fallback ?? 0, name, 1);

  const backoffIn = source['defaultBackoff'];
  const backoffSource = backoffIn === undefined ? {} : isRecord(backoffIn) ? backoffIn : (problems.push('defaultBackoff must be an object'), {});
  const defaultBackoff = {
    baseMs: int(backoffSource['baseMs'], DEFAULT_CONFIG.defaultBackoff.baseMs, 'defaultBackoff.baseMs', 1),
    maxMs: int(backoffSource['maxMs'], DEFAULT_CONFIG.defaultBackoff.maxMs, 'defaultBackoff.maxMs', 1),
  };
  if (defaultBackoff.maxMs < defaultBackoff.baseMs) problems.push('defaultBackoff.maxMs must be >= defaultBackoff.baseMs');

  const bpIn = source['backpressure'];
  const bpSource = bpIn === undefined ? {} : isRecord(bpIn) ? bpIn : (problems.push('backpressure must be an object'), {});
  const bpKnown = new Set(Object.keys(DEFAULT_CONFIG.backpressure));
  for (const key of Object.keys(bpSource)) if (!bpKnown.has(key)) problems.push(`unknown option "backpressure.${key}"`);
  const bpDefaults = DEFAULT_CONFIG.backpressure;
  const backpressure: BackpressureConfig = {
    maxPendingJobs: nullableInt(bpSource['maxPendingJobs'], bpDefaults.maxPendingJobs, 'backpressure.maxPendingJobs'),
    maxOldestAvailableAgeMs: nullableInt(bpSource['maxOldestAvailableAgeMs'], bpDefaults.maxOldestAvailableAgeMs, 'backpressure.maxOldestAvailableAgeMs'),
    maxStorageBytes: nullableInt(bpSource['maxStorageBytes'], bpDefaults.maxStorageBytes, 'backpressure.maxStorageBytes'),
    statsCacheMs: int(bpSource['statsCacheMs'], bpDefaults.statsCacheMs, 'backpressure.statsCacheMs', 0, 60_000),
  };

  const retentionIn = source['retention'];
  const retentionSource = retentionIn === undefined ? {} : isRecord(retentionIn) ? retentionIn : (problems.push('retention must be an object'), {});
  for (const key of Object.keys(retentionSource)) if (!(key in DEFAULT_RETENTION)) problems.push(`unknown option "retention.${key}"`);
  const period = (name: keyof RetentionPeriods): number => int(retentionSource[name], DEFAULT_CONFIG.retention[name], `retention.${name}`, 1, MAX_RETENTION_MS);
  const retention: RetentionPeriods = { succeededMs: period('succeededMs'), cancelledMs: period('cancelledMs'), deadMs: period('deadMs') };

  const requireIn = source['requireRegisteredKinds'];
  if (requireIn !== undefined && typeof requireIn !== 'boolean') problems.push('requireRegisteredKinds must be a boolean');

  const tokenIn = source['metricsToken'];
  if (tokenIn !== undefined && tokenIn !== null && (typeof tokenIn !== 'string' || !METRICS_TOKEN.test(tokenIn))) {
    problems.push('metricsToken must be 32 to 256 characters of A-Z a-z 0-9 - _ . ~ + / =');
  }

  const config: CoordinatorConfig = {
    defaultLeaseMs: int(source['defaultLeaseMs'], DEFAULT_CONFIG.defaultLeaseMs, 'defaultLeaseMs', LIMITS.minLeaseMs, LIMITS.maxLeaseMs),
    defaultMaxAttempts: int(source['defaultMaxAttempts'], DEFAULT_CONFIG.defaultMaxAttempts, 'defaultMaxAttempts', 1, LIMITS.maxAttempts),
    reaperIntervalMs: int(source['reaperIntervalMs'], DEFAULT_CONFIG.reaperIntervalMs, 'reaperIntervalMs', 0, 3_600_000),
    retentionIntervalMs: int(source['retentionIntervalMs'], DEFAULT_CONFIG.retentionIntervalMs, 'retentionIntervalMs', 0, 86_400_000),
    retention,
    retentionBatchSize: int(source['retentionBatchSize'], DEFAULT_CONFIG.retentionBatchSize, 'retentionBatchSize', 1, 10_000),
    pollIntervalSeconds: int(source['pollIntervalSeconds'], DEFAULT_CONFIG.pollIntervalSeconds, 'pollIntervalSeconds', 1, 3_600),
    defaultBackoff,
    bodyLimitBytes: int(source['bodyLimitBytes'], DEFAULT_CONFIG.bodyLimitBytes, 'bodyLimitBytes', 1024, 1024 ** 3),
    batchBodyLimitBytes: int(source['batchBodyLimitBytes'], DEFAULT_CONFIG.batchBodyLimitBytes, 'batchBodyLimitBytes', 1024, 1024 ** 3),
    backpressure,
    requireRegisteredKinds: typeof requireIn === 'boolean' ? requireIn : DEFAULT_CONFIG.requireRegisteredKinds,
    leaseRecheckMs:
      source['leaseRecheckMs'] === null || source['leaseRecheckMs'] === undefined
        ? DEFAULT_CONFIG.leaseRecheckMs
        : int(source['leaseRecheckMs'], 60_000, 'leaseRecheckMs', 1_000, 60_000),
    emptyLeaseReuseMs: int(source['emptyLeaseReuseMs'], DEFAULT_CONFIG.emptyLeaseReuseMs, 'emptyLeaseReuseMs', 0, 60_000),
    authCacheMs: int(source['authCacheMs'], DEFAULT_CONFIG.authCacheMs, 'authCacheMs', 0, 3_600_000),
    kindCacheMs: int(source['kindCacheMs'], DEFAULT_CONFIG.kindCacheMs, 'kindCacheMs', 0, 3_600_000),
    maxInFlightRequests: nullableInt(source['maxInFlightRequests'], DEFAULT_CONFIG.maxInFlightRequests, 'maxInFlightRequests'),
    admissionTargetMs: nullableInt(source['admissionTargetMs'], DEFAULT_CONFIG.admissionTargetMs, 'admissionTargetMs'),
    admissionIntervalMs: int(source['admissionIntervalMs'], DEFAULT_CONFIG.admissionIntervalMs, 'admissionIntervalMs', 20, 60_000),
    maxInFlightPerKey: nullableInt(source['maxInFlightPerKey'], DEFAULT_CONFIG.maxInFlightPerKey, 'maxInFlightPerKey'),
    maxInFlightPerTenant: nullableInt(source['maxInFlightPerTenant'], DEFAULT_CONFIG.maxInFlightPerTenant, 'maxInFlightPerTenant'),
    maxPollsPerKey: nullableInt(source['maxPollsPerKey'], DEFAULT_CONFIG.maxPollsPerKey, 'maxPollsPerKey'),
    maxPollsPerTenant: nullableInt(source['maxPollsPerTenant'], DEFAULT_CONFIG.maxPollsPerTenant, 'maxPollsPerTenant'),
    headersTimeoutMs: int(source['headersTimeoutMs'], DEFAULT_CONFIG.headersTimeoutMs, 'headersTimeoutMs', 100, 600_000),
    requestTimeoutMs: int(source['requestTimeoutMs'], DEFAULT_CONFIG.requestTimeoutMs, 'requestTimeoutMs', 100, 3_600_000),
    keepAliveTimeoutMs: int(source['keepAliveTimeoutMs'], DEFAULT_CONFIG.keepAliveTimeoutMs, 'keepAliveTimeoutMs', 100, 600_000),
    // A long poll is silent for up to maxWaitMs: a shorter idle timeout would cut it.
    idleTimeoutMs: int(source['idleTimeoutMs'], DEFAULT_CONFIG.idleTimeoutMs, 'idleTimeoutMs', LIMITS.maxWaitMs + 5_000, 3_600_000),
    maxSchemaBytes: int(source['maxSchemaBytes'], DEFAULT_CONFIG.maxSchemaBytes, 'maxSchemaBytes', 1024, 16 * 1024 * 1024),
    maxKindsPerTenant: int(source['maxKindsPerTenant'], DEFAULT_CONFIG.maxKindsPerTenant, 'maxKindsPerTenant', 1, 1_000_000),
    maxSchedulesPerTenant: int(source['maxSchedulesPerTenant'], DEFAULT_CONFIG.maxSchedulesPerTenant, 'maxSchedulesPerTenant', 0, 100_000),
    schedulerMaxSleepMs: int(source['schedulerMaxSleepMs'], DEFAULT_CONFIG.schedulerMaxSleepMs, 'schedulerMaxSleepMs', 0, 3_600_000),
    defaultMaxResultBytes: int(source['defaultMaxResultBytes'], DEFAULT_CONFIG.defaultMaxResultBytes, 'defaultMaxResultBytes', 1, LIMITS.maxResultBytes),
    maxCheckpointBytes: int(source['maxCheckpointBytes'], DEFAULT_CONFIG.maxCheckpointBytes, 'maxCheckpointBytes', 1, LIMITS.maxCheckpointBytes),
    metricsToken: typeof tokenIn === 'string' && METRICS_TOKEN.test(tokenIn) ? tokenIn : null,
  };
  if (config.headersTimeoutMs > config.requestTimeoutMs) problems.push('headersTimeoutMs must be <= requestTimeoutMs');
  if (problems.length > 0) throw new CoordinatorConfigError(problems);
  return deepFreeze(config);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function deepFreeze<T extends object>(value: T): T {
  for (const inner of Object.values(value)) if (inner !== null && typeof inner === 'object') deepFreeze(inner as object);
  return Object.freeze(value);
}
