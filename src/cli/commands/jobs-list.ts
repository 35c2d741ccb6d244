/**
 * `jobs list` and `jobs show`: the job list with the dashboard's filters, as
 * an aligned table or JSON (one page as one document; every page with --all,
 * as NDJSON, one job per line), and one job with its payload, attempts, last
 * error, checkpoint and result checksum (GET /jobs/{id}/detail).
 */

import type { JobListItem } from '../../protocol/schemas.js';
import { integerOption, stringOption, type Command, type Io } from '../command.js';
import { FILTER_DETAILS, FILTER_OPTIONS, filterFromOptions } from '../job-filter-options.js';
import { printJson, printJsonLine, REMOTE_DETAILS, REMOTE_OPTIONS, withClient } from '../remote.js';
import { printFacts, printTable } from '../table.js';
import { terminalSafe } from '../terminal-text.js';

const PAYLOAD_SHOWN = 4_000;

export const JOB_HEADERS = ['ID', 'KIND', 'STATUS', 'ATTEMPTS', 'CREATED', 'LAST ERROR'] as const;

export function jobRow(job: JobListItem): [id: string, kind: string, status: string, attempts: string, created: string, lastError: string] {
  const error = job.lastError === null ? '' : `${job.lastError.code} (${job.lastError.class}): ${job.lastError.message}`;
  return [job.id, job.kind, job.cancelRequested ? `${job.status}*` : job.status, `${job.attempts}/${job.maxAttempts}`, job.createdAt, error];
}

export const jobsList: Command = {
  name: 'jobs list',
  summary: 'List jobs, newest first, with filters (admin sees the tenant, a producer its own jobs).',
  usage: 'jobs list [--status S] [--kind K] [--error-code C] [--since T] [--until T] [--limit N] [--cursor C | --all] [--json]',
  details: [
    ...FILTER_DETAILS,
    '--limit N              page size (default 50)',
    '--cursor C             the next page, as printed',
    '--all                  every page (with --json: NDJSON, one job per line)',
    ...REMOTE_DETAILS,
  ],
  options: { ...REMOTE_OPTIONS, ...FILTER_OPTIONS, limit: { type: 'string' }, cursor: { type: 'string' }, all: { type: 'boolean' } },
  async run({ values, io }) {
    const { LIMITS } = await import('../../protocol/schemas.js'); // lazy: the wire schemas are slow to load
    const filter = filterFromOptions(values, jobsList);
    const limit = integerOption(values, 'limit', jobsList, { min: 1, max: LIMITS.maxListLimit }) ?? 50;
    const json = values['json'] === true;
    const all = values['all'] === true;
    let cursor = stringOption(values, 'cursor');
    let next: string | undefined;
    const rows: (string | number)[][] = [];
    await withClient(jobsList, values, io, async (client) => {
      do {
        const page = await client.listJobs({ ...filter, limit, ...(cursor === undefined ? {} : { cursor }) });
        if (json && !all) {
          printJson(io, page);
          return;
        }
        for (const job of page.jobs) {
          if (json) printJsonLine(io, job);
          else rows.push(jobRow(job));
        }
        next = page.nextCursor ?? undefined;
        cursor = next;
      } while (all && next !== undefined);
    });
    if (json) return 0;
    if (rows.length === 0) io.out('no jobs match');
    else printTable(io, JOB_HEADERS, rows);
    if (!all && next !== undefined) io.out(terminalSafe(`more: --cursor ${next}`));
    return 0;
  },
};

function pretty(value: unknown, full: boolean): string {
  const text = JSON.stringify(value, null, 2) ?? 'null';
  return full || text.length <= PAYLOAD_SHOWN ? text : `${text.slice(0, PAYLOAD_SHOWN)}\n… (${text.length - PAYLOAD_SHOWN} more characters; --full shows all)`;
}

function block(io: Io, title: string, text: string): void {
  io.out('');
  io.out(`${title}:`);
  for (const line of text.split('\n')) io.out(terminalSafe(`  ${line}`));
}

export const jobsShow: Command = {
  name: 'jobs show',
  summary: 'Show a job: its fields, last error and failure class, attempts, payload, checkpoint, progress and result checksum (admin).',
  usage: 'jobs show <id> [--full] [--json]',
  details: ['--full                 the whole payload (by default it is cut after 4000 characters)', ...REMOTE_DETAILS],
  options: { ...REMOTE_OPTIONS, full: { type: 'boolean' } },
  positionals: { min: 1, max: 1 },
  async run({ values, positionals, io }) {
    const id = positionals[0] ?? '';
    const detail = await withClient(jobsShow, values, io, (client) => client.jobDetail(id));
    if (values['json'] === true) {
      printJson(io, detail);
      return 0;
    }
    const { job, payload, checkpoint, result, attempts } = detail;
    const full = values['full'] === true;
    printFacts(io, [
      ['id', job.id],
      ['kind', job.kind],
      ['status', `${job.status}${job.cancelRequested ? ' (cancel requested)' : ''}`],
      ['attempts', `${job.attempts}/${job.maxAttempts}`],
      ['priority', job.priority],
      ['epoch', job.epoch],
      ['created', job.createdAt],
      ['run after', job.runAfter],
      ['started', job.startedAt],
      ['finished', job.finishedAt],
      ['deadline', job.deadlineAt],
      ['concurrency key', job.concurrencyKey],
      ['depends on', job.dependsOn.length === 0 ? null : job.dependsOn.join(', ')],
      ['needed by', job.children.length === 0 ? null : `${job.children.join(', ')}${job.children.length >= 100 ? ' (the first 100)' : ''}`],
      ['last error', job.lastError === null ? null : `${job.lastError.code} (${job.lastError.class}): ${job.lastError.message}`],
      ['result', result === null ? null : `${result.contentType}, ${result.bytes} bytes, sha-256 ${result.checksum}`],
      ['checkpoint', checkpoint === null ? null : `step ${checkpoint.step}`],
    ]);
    io.out('');
    if (attempts.length === 0) io.out('no attempts yet');
    else
      printTable(
        io,
        ['#', 'EPOCH', 'WORKER', 'STARTED', 'ENDED', 'OUTCOME', 'ERROR'],
        attempts.map((a) => [a.attempt, a.epoch, a.workerId, a.startedAt, a.endedAt ?? '(running)', a.outcome ?? '-', a.errorCode ?? '']),
      );
    block(io, 'payload', pretty(payload, full));
    if (job.progress !== null && job.progress !== undefined) block(io, 'progress', pretty(job.progress, full));
    if (checkpoint !== null) block(io, 'checkpoint state', pretty(checkpoint.state, full));
    return 0;
  },
};
