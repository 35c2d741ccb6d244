/**
 * `schedules set <name> --kind K --cron EXPR [...]` sets or replaces a
 * recurring schedule (PUT /schedules/{name}); `schedules list` shows the
 * tenant's schedules with their next and last occurrence; `schedules delete
 * <name>` removes one. Admin.
 */

import { describeJsonError } from '../../core/json-error.js';
import { CliError, integerOption, requireOption, stringOption, UsageError, type Command } from '../command.js';
import { printJson, printJsonLine, REMOTE_DETAILS, REMOTE_OPTIONS, withClient } from '../remote.js';
import { printTable } from '../table.js';
import { terminalSafe } from '../terminal-text.js';
import type { Schedule, ScheduleDefinition } from '../../protocol/schemas.js';

export const schedulesSet: Command = {
  name: 'schedules set',
  summary: 'Set or replace a recurring schedule (admin). Each occurrence of the cron expression enqueues one job, once however many coordinators run.',
  usage: 'schedules set <name> --kind K --cron EXPR [--payload JSON] [--timezone ZONE] [--overlap skip|allow] [--catch-up N]',
  details: [
    '--kind K               the kind of the jobs it enqueues',
    '--cron EXPR            five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly',
    '--payload JSON         the payload of every job (default null)',
    '--timezone ZONE        an IANA time zone (default UTC)',
    '--overlap skip|allow   skip (default): no new job while the last one is queued or running',
    '--catch-up N           after downtime, enqueue at most the last N missed occurrences (default 0)',
    ...REMOTE_DETAILS,
  ],
  options: {
    ...REMOTE_OPTIONS,
    kind: { type: 'string' },
    cron: { type: 'string' },
    payload: { type: 'string' },
    timezone: { type: 'string' },
    overlap: { type: 'string' },
    'catch-up': { type: 'string' },
  },
  positionals: { min: 1, max: 1 },
  async run({ values, positionals, io }) {
    const name = positionals[0] ?? '';
    const kind = requireOption(values, 'kind', schedulesSet);
    const cron = requireOption(values, 'cron', schedulesSet);
    const payloadText = stringOption(values, 'payload');
    let payload: unknown = null;
    if (payloadText !== undefined) {
      try {
        payload = JSON.parse(payloadText) as unknown;
      } catch (error) {
        throw new CliError('invalid_json', `--payload is not valid JSON: ${describeJsonError(payloadText, error)}`);
      }
    }
    const overlap = stringOption(values, 'overlap');
    if (overlap !== undefined && overlap !== 'skip' && overlap !== 'allow') throw new UsageError('--overlap must be skip or allow', schedulesSet);
    const catchUp = integerOption(values, 'catch-up', schedulesSet, { min: 0, max: 100 });
    const timezone = stringOption(values, 'timezone');
    const definition: ScheduleDefinition = {
      kind,
      payload,
      cron,
      ...(timezone === undefined ? {} : { timezone }),
      ...(overlap === undefined ? {} : { overlap }),
      ...(catchUp === undefined ? {} : { catchUp }),
    };
    const saved = await withClient(schedulesSet, values, io, (client) => client.putSchedule(name, definition));
    if (values['json'] === true) printJson(io, saved);
    else io.out(terminalSafe(`schedule ${saved.name} saved: ${saved.cron} (${saved.timezone}), next ${saved.nextAt ?? 'never'}`));
    return 0;
  },
};

const HEADERS = ['NAME', 'KIND', 'CRON', 'TIMEZONE', 'OVERLAP', 'CATCH-UP', 'NEXT', 'LAST', 'LAST JOB'];

function row(s: Schedule): (string | number | null)[] {
  return [s.name, s.kind, s.cron, s.timezone, s.overlap, s.catchUp, s.nextAt, s.lastAt, s.lastJobId];
}

export const schedulesList: Command = {
  name: 'schedules list',
  summary: "List the tenant's recurring schedules with their next and last occurrence (admin).",
  usage: 'schedules list [--limit N] [--cursor C | --all] [--json]',
  details: [
    '--limit N              schedules per page (default 100, at most 1,000)',
    '--cursor C             the next page, as printed',
    '--all                  every page (with --json: NDJSON, one schedule per line)',
    ...REMOTE_DETAILS,
  ],
  options: { ...REMOTE_OPTIONS, limit: { type: 'string' }, cursor: { type: 'string' }, all: { type: 'boolean' } },
  async run({ values, io }) {
    const limit = integerOption(values, 'limit', schedulesList, { min: 1, max: 1000 }) ?? 100;
    const json = values['json'] === true;
    const all = values['all'] === true;
    let cursor = stringOption(values, 'cursor');
    let next: string | undefined;
    const rows: (string | number | null)[][] = [];
    await withClient(schedulesList, values, io, async (client) => {
      do {
        const page = await client.listSchedules({ limit, ...(cursor === undefined ? {} : { cursor }) });
        if (json && !all) {
          printJson(io, page);
          return;
        }
        for (const schedule of page.schedules) {
          if (json) printJsonLine(io, schedule);
          else rows.push(row(schedule));
        }
        next = page.nextCursor ?? undefined;
        cursor = next;
      } while (all && next !== undefined);
    });
    if (json) return 0;
    if (rows.length === 0) io.out('no schedules');
    else printTable(io, HEADERS, rows);
    if (!all && next !== undefined) io.out(terminalSafe(`more: --cursor ${next}`));
    return 0;
  },
};

export const schedulesDelete: Command = {
  name: 'schedules delete',
  summary: 'Delete a recurring schedule (admin); the jobs it enqueued stay.',
  usage: 'schedules delete <name>',
  details: REMOTE_DETAILS,
  options: REMOTE_OPTIONS,
  positionals: { min: 1, max: 1 },
  async run({ values, positionals, io }) {
    const name = positionals[0] ?? '';
    const deleted = await withClient(schedulesDelete, values, io, (client) => client.deleteSchedule(name));
    if (values['json'] === true) printJson(io, deleted);
    else io.out(terminalSafe(`schedule ${deleted.name} deleted`));
    return 0;
  },
};
