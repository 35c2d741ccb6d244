/**
 * Where `leasehold serve` takes the coordinator's configuration from: an
 * optional JSON file (`--config FILE`, the shape of CoordinatorConfigInput)
 * with flags on top, one flag per setting. Everything is checked before the
 * store is opened, and every problem — an unreadable file, a flag that is not
 * a number, a value out of range — is reported in one error, so an operator
 * fixes them all in one go.
 */

import { readFileSync } from 'node:fs';
import type { CoordinatorConfig } from '../engine/config.js';
import { UsageError, type Command, type OptionSpec, type Values } from './command.js';

interface ConfigFlag {
  readonly flag: string;
  /** Where the value goes in the config object. */
  readonly path: readonly [string] | readonly [string, string];
  readonly type: 'integer' | 'limit' | 'boolean' | 'string';
  readonly help: string;
}

/** Every setting of the coordinator that `serve` exposes as a flag, in the order --help shows them. */
export const CONFIG_FLAGS: readonly ConfigFlag[] = [
  {
    flag: 'max-pending-jobs',
    path: ['backpressure', 'maxPendingJobs'],
    type: 'limit',
    help: 'queued + running jobs per tenant before POST /jobs answers 503 (default unlimited)',
  },
  {
    flag: 'max-oldest-available-age-ms',
    path: ['backpressure', 'maxOldestAvailableAgeMs'],
    type: 'limit',
    help: 'age of the oldest available job per tenant before 503 (default unlimited)',
  },
  {
    flag: 'max-storage-bytes',
    path: ['backpressure', 'maxStorageBytes'],
    type: 'limit',
    help: 'payload + result bytes per tenant before 503 (default unlimited)',
  },
  {
    flag: 'backpressure-stats-cache-ms',
    path: ['backpressure', 'statsCacheMs'],
    type: 'integer',
    help: "how long a tenant's backpressure snapshot is reused (default 1000)",
  },
  {
    flag: 'admission-target-ms',
    path: ['admissionTargetMs'],
    type: 'limit',
    help: 'enqueues and other counted requests answer 503 while the queueing delay stays at or above this (default off; 10 suggested)',
  },
  {
    flag: 'admission-interval-ms',
    path: ['admissionIntervalMs'],
    type: 'integer',
    help: 'how long the wait must stay above the target before the first 503 (default 100)',
  },
  {
    flag: 'max-in-flight-requests',
    path: ['maxInFlightRequests'],
    type: 'limit',
    help: 'counted requests in flight before the next answers 503, a memory bound (default 4096)',
  },
  { flag: 'max-in-flight-per-key', path: ['maxInFlightPerKey'], type: 'limit', help: 'requests in flight per API key before 429 (default 2000)' },
  { flag: 'max-in-flight-per-tenant', path: ['maxInFlightPerTenant'], type: 'limit', help: 'requests in flight per tenant before 429 (default 4000)' },
  { flag: 'max-polls-per-key', path: ['maxPollsPerKey'], type: 'limit', help: 'POST /lease requests open per API key before 429 (default 2000)' },
  { flag: 'max-polls-per-tenant', path: ['maxPollsPerTenant'], type: 'limit', help: 'POST /lease requests open per tenant before 429 (default 4000)' },
  { flag: 'headers-timeout-ms', path: ['headersTimeoutMs'], type: 'integer', help: "a request's headers must arrive within this (default 10000)" },
  { flag: 'request-timeout-ms', path: ['requestTimeoutMs'], type: 'integer', help: 'a whole request, body included, must arrive within this (default 30000)' },
  { flag: 'keep-alive-timeout-ms', path: ['keepAliveTimeoutMs'], type: 'integer', help: 'an idle kept-alive connection closes after this (default 5000)' },
  { flag: 'idle-timeout-ms', path: ['idleTimeoutMs'], type: 'integer', help: 'a connection without any traffic closes after this (default 120000)' },
  {
    flag: 'require-registered-kinds',
    path: ['requireRegisteredKinds'],
    type: 'boolean',
    help: 'refuse unregistered kinds even for tenants that registered none',
  },
  { flag: 'default-lease-ms', path: ['defaultLeaseMs'], type: 'integer', help: 'lease length when the request and the kind name none (default 30000)' },
  { flag: 'default-max-attempts', path: ['defaultMaxAttempts'], type: 'integer', help: 'attempt budget when the request and the kind name none (default 5)' },
  { flag: 'backoff-base-ms', path: ['defaultBackoff', 'baseMs'], type: 'integer', help: 'retry backoff base for jobs without a kind (default 1000)' },
  { flag: 'backoff-max-ms', path: ['defaultBackoff', 'maxMs'], type: 'integer', help: 'retry backoff cap for jobs without a kind (default 300000)' },
  {
    flag: 'reaper-interval-ms',
    path: ['reaperIntervalMs'],
    type: 'integer',
    help: 'how often expired leases and deadlines are applied; 0 disables (default 1000)',
  },
  { flag: 'poll-interval-seconds', path: ['pollIntervalSeconds'], type: 'integer', help: 'Retry-After suggested to producers polling a job (default 1)' },
  { flag: 'body-limit-bytes', path: ['bodyLimitBytes'], type: 'integer', help: 'largest request body (default 1048576)' },
  {
    flag: 'batch-body-limit-bytes',
    path: ['batchBodyLimitBytes'],
    type: 'integer',
    help: 'largest POST /jobs/batch and POST /complete body (default 16777216)',
  },
  {
    flag: 'lease-recheck-ms',
    path: ['leaseRecheckMs'],
    type: 'integer',
    help: 'a safety re-check of parked long polls, 1000-60000; none by default (wake-ups are event-driven)',
  },
  {
    flag: 'retention-interval-ms',
    path: ['retentionIntervalMs'],
    type: 'integer',
    help: 'how often finished jobs past their retention are deleted; 0 disables (default 60000)',
  },
  {
    flag: 'empty-lease-reuse-ms',
    path: ['emptyLeaseReuseMs'],
    type: 'integer',
    help: 'how long an empty lease stands for the next polls of the same tenant and kinds while nothing is announced, 0-60000 (default 1000; 0: every poll leases)',
  },
  { flag: 'auth-cache-ms', path: ['authCacheMs'], type: 'integer', help: 'how long a looked-up API key is trusted (default 1000)' },
  { flag: 'max-schema-bytes', path: ['maxSchemaBytes'], type: 'integer', help: 'largest kind payloadSchema, bytes of JSON (default 65536)' },
  { flag: 'max-kinds-per-tenant', path: ['maxKindsPerTenant'], type: 'integer', help: 'kinds one tenant may register (default 1000)' },
  { flag: 'max-schedules-per-tenant', path: ['maxSchedulesPerTenant'], type: 'integer', help: 'recurring schedules one tenant may have (default 1000)' },
  {
    flag: 'scheduler-max-sleep-ms',
    path: ['schedulerMaxSleepMs'],
    type: 'integer',
    help: 'longest sleep of the scheduler, to notice schedules set through other coordinators; 0 turns it off (default 60000)',
  },
  {
    flag: 'default-max-result-bytes',
    path: ['defaultMaxResultBytes'],
    type: 'integer',
    help: 'result limit of jobs whose kind is not registered (default 16777216)',
  },
  {
    flag: 'max-checkpoint-bytes',
    path: ['maxCheckpointBytes'],
    type: 'integer',
    help: 'checkpoint state limit for unregistered kinds and the default of registered ones (default 262144)',
  },
  { flag: 'kind-cache-ms', path: ['kindCacheMs'], type: 'integer', help: "how long a tenant's kind registry is reused (default 1000)" },
  {
    flag: 'metrics-token',
    path: ['metricsToken'],
    type: 'string',
    help: 'bearer token GET /metrics admits besides admin keys, 32+ characters (never logged; prefer the config file: arguments are visible to other users)',
  },
];

export const CONFIG_OPTIONS: OptionSpec = Object.fromEntries([
  ['config', { type: 'string' }],
  ...CONFIG_FLAGS.map((f) => [f.flag, { type: f.type === 'boolean' ? 'boolean' : 'string' }]),
]) as OptionSpec;

export const CONFIG_DETAILS: readonly string[] = [
  '--config FILE          JSON file with any of the settings below (nested: {"backpressure":{"maxPendingJobs":1000}}); flags win',
  ...CONFIG_FLAGS.map((f) => {
    const name = `--${f.flag}${f.type === 'boolean' ? '' : f.type === 'limit' ? ' N|unlimited' : f.type === 'string' ? ' TOKEN' : ' N'}`;
    return name.length < 23 ? `${name.padEnd(23)}${f.help}` : `${name}  ${f.help}`;
  }),
];

/**
 * The resolved, frozen configuration from --config and the flags, or a
 * UsageError that lists every problem found.
 */
export async function serveConfig(
  values: Values,
  command: Command,
  read: (path: string) => string = (p) => readFileSync(p, 'utf8'),
): Promise<CoordinatorConfig> {
  const problems: string[] = [];
  let input: Record<string, unknown> = {};
  const file = values['config'];
  if (typeof file === 'string') {
    try {
      const parsed: unknown = JSON.parse(read(file));
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) input = parsed as Record<string, unknown>;
      else problems.push(`--config ${file}: the file must hold a JSON object`);
    } catch (error) {
      const reason = error instanceof SyntaxError ? `not valid JSON (${error.message})` : `cannot be read (${(error as { code?: string }).code ?? 'error'})`;
      problems.push(`--config ${file}: ${reason}`);
    }
  }
  for (const spec of CONFIG_FLAGS) {
    const raw = values[spec.flag];
    if (raw === undefined) continue;
    let value: unknown = raw;
    if (spec.type === 'integer' || spec.type === 'limit') {
      const text = String(raw).trim();
      if (spec.type === 'limit' && text === 'unlimited') value = null;
      else if (/^-?\d+$/.test(text)) value = Number(text);
      else {
        problems.push(`--${spec.flag} must be an integer${spec.type === 'limit' ? ' or "unlimited"' : ''}`);
        continue;
      }
    }
    input = withValue(input, spec.path, value);
  }
  const { CoordinatorConfigError, resolveConfig } = await import('../engine/config.js');
  try {
    const config = resolveConfig(input);
    if (problems.length === 0) return config;
  } catch (error) {
    if (!(error instanceof CoordinatorConfigError)) throw error;
    problems.push(...error.problems.map(nameFlag));
  }
  throw new UsageError(`invalid configuration:\n  - ${problems.join('\n  - ')}`, command);
}

function withValue(input: Record<string, unknown>, path: ConfigFlag['path'], value: unknown): Record<string, unknown> {
  const [head, leaf] = path;
  if (leaf === undefined) return { ...input, [head]: value };
  const inner = input[head];
  // A non-object here is reported by resolveConfig; the flag then replaces it so its own value is still checked.
  const base = inner !== null && typeof inner === 'object' && !Array.isArray(inner) ? (inner as Record<string, unknown>) : {};
  return { ...input, [head]: { ...base, [leaf]: value } };
}

/** resolveConfig names settings by their config path; add the flag that sets each. */
function nameFlag(problem: string): string {
  const spec = CONFIG_FLAGS.find((f) => problem.startsWith(`${f.path.join('.')} `));
  return spec === undefined ? problem : `${problem} (--${spec.flag})`;
}
