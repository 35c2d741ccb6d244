/**
 * The job filter as command-line flags, the same fields as the dashboard's
 * and GET /jobs's: --status, --kind, --error-code, --since and --until (an
 * RFC 3339 time, or an age such as 30m, 6h, 2d counted back from now).
 */

import { systemClock } from '../core/clock.js';
import { isJobStatus, JOB_STATUSES } from '../core/states.js';
import type { JobFilter } from '../protocol/jobs.js';
import { stringOption, UsageError, type Command, type OptionSpec, type Values } from './command.js';

export const FILTER_OPTIONS: OptionSpec = {
  status: { type: 'string' },
  kind: { type: 'string' },
  'error-code': { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
};

export const FILTER_DETAILS: readonly string[] = [
  `--status S             one of ${JOB_STATUSES.join(', ')}`,
  '--kind K               only this kind',
  '--error-code C         only jobs whose last error has this code',
  '--since T              created at or after T (RFC 3339, or an age: 30m, 6h, 2d)',
  '--until T              created before T (same forms)',
];

const UNIT_MS: Readonly<Record<string, number>> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

function timeOption(values: Values, name: string, command: Command): string | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  const age = /^(\d{1,9})([smhd])$/.exec(raw);
  if (age !== null) return new Date(systemClock.now() - Number(age[1]) * (UNIT_MS[age[2] ?? 's'] ?? 1_000)).toISOString();
  const ms = Date.parse(raw);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(raw) || !Number.isFinite(ms))
    throw new UsageError(`--${name} must be an RFC 3339 time or an age such as 30m, 6h, 2d (got '${raw}')`, command);
  return new Date(ms).toISOString();
}

export function filterFromOptions(values: Values, command: Command): JobFilter {
  const status = stringOption(values, 'status');
  if (status !== undefined && !isJobStatus(status)) throw new UsageError(`--status must be one of ${JOB_STATUSES.join(', ')} (got '${status}')`, command);
  const kind = stringOption(values, 'kind');
  const errorCode = stringOption(values, 'error-code');
  const createdAfter = timeOption(values, 'since', command);
  const createdBefore = timeOption(values, 'until', command);
  return {
    ...(status === undefined ? {} : { status }),
    ...(kind === undefined ? {} : { kind }),
    ...(errorCode === undefined ? {} : { errorCode }),
    ...(createdAfter === undefined ? {} : { createdAfter }),
    ...(createdBefore === undefined ? {} : { createdBefore }),
  };
}
