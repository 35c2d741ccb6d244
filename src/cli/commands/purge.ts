/**
 * `leasehold purge --older-than 7d`: deletes the tenant's finished jobs
 * (succeeded, cancelled, dead) that finished at least that long ago, through
 * POST /jobs/purge with an admin key. The coordinator deletes a bounded number
 * per request; this command repeats the request while more remain and, when
 * stdout is a terminal, shows the running count on one line. `--dry-run`
 * only counts.
 */

import { isPurgeableStatus, PURGEABLE_STATUSES } from '../../core/states.js';
import type { PurgeRequest } from '../../protocol/retention.js';
import { stringOption, UsageError, type Command } from '../command.js';
import { printJson, REMOTE_DETAILS, REMOTE_OPTIONS, withClient } from '../remote.js';
import { terminalSafe } from '../terminal-text.js';

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** The purgeable statuses in words: `succeeded, cancelled or dead`. */
function statusesJoinedBy(conjunction: string): string {
  return `${PURGEABLE_STATUSES.slice(0, -1).join(', ')} ${conjunction} ${PURGEABLE_STATUSES.at(-1) ?? ''}`;
}

/** `7d`, `12h`, `30m`, `90s`, `500ms` or a bare number of ms; null when it is none of these. */
export function parseDurationMs(text: string): number | null {
  const match = /^(\d+)(ms|s|m|h|d|w)?$/.exec(text.trim());
  if (match === null || match[1] === undefined) return null;
  const value = Number(match[1]) * (UNIT_MS[match[2] ?? 'ms'] ?? 1);
  return Number.isSafeInteger(value) ? value : null;
}

export const purgeCommand: Command = {
  name: 'purge',
  summary: "Delete the tenant's finished jobs older than a period (admin key).",
  usage: 'purge --older-than DURATION [--status S[,S…]] [--kind K] [--dry-run]',
  details: [
    '--older-than DURATION  jobs that finished at least this long ago: 7d, 12h, 30m, 90s, 500ms',
    `--status S[,S…]        ${statusesJoinedBy('and/or')} (default: all three; unknown jobs are never purged)`,
    '--kind K               only jobs of this kind',
    '--dry-run              count the jobs that would be deleted; delete nothing',
    ...REMOTE_DETAILS,
  ],
  options: {
    ...REMOTE_OPTIONS,
    'older-than': { type: 'string' },
    status: { type: 'string' },
    kind: { type: 'string' },
    'dry-run': { type: 'boolean' },
  },
  async run({ values, io }) {
    const { MAX_RETENTION_MS } = await import('../../protocol/retention.js');
    const olderThanText = stringOption(values, 'older-than');
    if (olderThanText === undefined) throw new UsageError('--older-than is required', purgeCommand);
    const olderThanMs = parseDurationMs(olderThanText);
    if (olderThanMs === null || olderThanMs > MAX_RETENTION_MS) {
      throw new UsageError(`--older-than must be a duration such as 7d, 12h or 30m (at most 3650d), not '${olderThanText}'`, purgeCommand);
    }
    const statusText = stringOption(values, 'status');
    const statuses = statusText === undefined ? undefined : [...new Set(statusText.split(',').map((s) => s.trim()))];
    const wrong = statuses?.find((s) => !isPurgeableStatus(s));
    if (wrong !== undefined) throw new UsageError(`--status must be ${statusesJoinedBy('or')}, not '${wrong}'`, purgeCommand);
    const kind = stringOption(values, 'kind');
    const request: PurgeRequest = {
      olderThanMs,
      ...(statuses === undefined ? {} : { statuses: statuses.filter(isPurgeableStatus) }),
      ...(kind === undefined ? {} : { kind }),
      ...(values['dry-run'] === true ? { dryRun: true } : {}),
    };
    const json = values['json'] === true;
    const total = await withClient(purgeCommand, values, io, async (client) => {
      if (request.dryRun === true) return { deleted: 0, matched: (await client.purge(request)).matched ?? 0 };
      let deleted = 0;
      for (;;) {
        const answer = await client.purge(request);
        deleted += answer.deleted;
        if (!json) io.progress?.(`purged ${deleted} jobs…`);
        if (!answer.more) return { deleted };
      }
    });
    io.progress?.('');
    if (json) printJson(io, total);
    else if ('matched' in total) io.out(terminalSafe(`would purge ${total.matched} jobs finished more than ${olderThanText} ago`));
    else io.out(terminalSafe(`purged ${total.deleted} jobs finished more than ${olderThanText} ago`));
    return 0;
  },
};
