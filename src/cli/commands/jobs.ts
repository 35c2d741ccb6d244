/**
 * Commands that work on jobs through a coordinator's HTTP API: `enqueue`
 * (one job, or a file: enqueue-file.ts), `job <id>` (the job and its attempt
 * history), `dead`, `requeue <id>` and `stats` (once, or --watch). Listings
 * print an aligned table, or the API's JSON with --json.
 */

import { randomUUID } from 'node:crypto';
import { describeJsonError } from '../../core/json-error.js';
import { LIMITS } from '../../protocol/limits.js';
import type { Job, JobListItem, Stats } from '../../protocol/schemas.js';
import { integerOption, requireOption, stringOption, UsageError, type Command, type Io } from '../command.js';
import { FILTER_DETAILS, FILTER_OPTIONS, filterFromOptions } from '../job-filter-options.js';
import { printJson, printJsonLine, REMOTE_DETAILS, REMOTE_OPTIONS, withClient } from '../remote.js';
import { printFacts, printTable } from '../table.js';
import { jobRow } from './jobs-list.js';
import { terminalSafe } from '../terminal-text.js';

/** Every human line here carries text from workers or producers (ids, kinds, codes, messages): printed escaped. */
function say(io: Io, line: string): void {
  io.out(terminalSafe(line));
}

export const enqueueCommand: Command = {
  name: 'enqueue',
  summary: 'Enqueue a job, or every line of an NDJSON file with --file.',
  usage:
    'enqueue --kind K --payload JSON [--idempotency-key K] [--max-attempts N] [--priority N] [--run-after TIME] [--deadline-ms N] [--depends-on ID,…] [--concurrency-key K] | enqueue --file jobs.ndjson',
  details: [
    '--file F               one job per line, {kind, payload, …} as POST /jobs takes it (idempotencyKey optional: derived from the line); sent in batches;',
    '                       prints accepted, replayed and refused lines; exit 3 when some lines were refused, 1 when all were',
    '--kind K               the job kind',
    '--payload JSON         the payload, as JSON',
    '--idempotency-key K    reuse a key to make a retried enqueue safe (default: random)',
    '--max-attempts N       attempts before the job is dead',
    '--priority N           lower runs first (default 0)',
    '--run-after TIME       RFC 3339 time before which the job is not leased',
    '--deadline-ms N        overall deadline from now',
    '--depends-on IDS       comma-separated parent job ids: the job waits until all have succeeded',
    '--concurrency-key K    one job of this key (within the kind) runs at a time, in enqueue order',
    '--quiet                print only the job id (for ID=$(leasehold enqueue … --quiet))',
    ...REMOTE_DETAILS,
  ],
  options: {
    ...REMOTE_OPTIONS,
    kind: { type: 'string' },
    payload: { type: 'string' },
    'idempotency-key': { type: 'string' },
    'max-attempts': { type: 'string' },
    priority: { type: 'string' },
    'run-after': { type: 'string' },
    'deadline-ms': { type: 'string' },
    'depends-on': { type: 'string' },
    'concurrency-key': { type: 'string' },
    quiet: { type: 'boolean' },
    file: { type: 'string' },
  },
  async run({ values, io }) {
    const file = stringOption(values, 'file');
    if (file !== undefined) {
      if (values['kind'] !== undefined || values['payload'] !== undefined)
        throw new UsageError('--file takes each job from its lines: leave out --kind and --payload', enqueueCommand);
      const { enqueueFile } = await import('./enqueue-file.js');
      return enqueueFile(enqueueCommand, file, values, io);
    }
    const kind = requireOption(values, 'kind', enqueueCommand);
    const payloadText = requireOption(values, 'payload', enqueueCommand);
    let payload: unknown;
    try {
      payload = JSON.parse(payloadText);
    } catch (error) {
      throw new UsageError(
        `--payload is not JSON: ${describeJsonError(payloadText, error)} (keys and strings take double quotes: '{"name":"x"}')`,
        enqueueCommand,
      );
    }
    const maxAttempts = integerOption(values, 'max-attempts', enqueueCommand, { min: 1, max: LIMITS.maxAttempts });
    const priority = integerOption(values, 'priority', enqueueCommand, { min: -LIMITS.maxPriority, max: LIMITS.maxPriority });
    const deadlineMs = integerOption(values, 'deadline-ms', enqueueCommand, { min: 1, max: Number.MAX_SAFE_INTEGER });
    const runAfter = stringOption(values, 'run-after');
    const idempotencyKey = stringOption(values, 'idempotency-key') ?? randomUUID();
    const dependsOn = stringOption(values, 'depends-on')
      ?.split(',')
      .map((id) => id.trim())
      .filter((id) => id.length > 0);
    const concurrencyKey = stringOption(values, 'concurrency-key');
    const request = {
      kind,
      payload,
      ...(maxAttempts === undefined ? {} : { maxAttempts }),
      ...(priority === undefined ? {} : { priority }),
      ...(deadlineMs === undefined ? {} : { deadlineMs }),
      ...(runAfter === undefined ? {} : { runAfter }),
      ...(dependsOn === undefined || dependsOn.length === 0 ? {} : { dependsOn }),
      ...(concurrencyKey === undefined ? {} : { concurrencyKey }),
    };
    const answer = await withClient(enqueueCommand, values, io, (client) => client.enqueue(request, { idempotencyKey }));
    if (values['json'] === true) printJson(io, answer.job);
    else if (values['quiet'] === true) io.out(answer.job.id);
    else
      say(
        io,
        `${answer.replayed ? 'already enqueued' : 'enqueued'} ${answer.job.id} (${answer.job.kind}, ${answer.job.status}, idempotency key ${idempotencyKey})`,
      );
    return 0;
  },
};

export const jobCommand: Command = {
  name: 'job',
  summary: 'Show a job and its attempt history.',
  usage: 'job <id> [--wait [--timeout-ms N]]',
  details: [
    '--wait                 wait until the job is succeeded, dead, cancelled or unknown',
    '--timeout-ms N         longest --wait (default 60000)',
    ...REMOTE_DETAILS,
  ],
  options: { ...REMOTE_OPTIONS, wait: { type: 'boolean' }, 'timeout-ms': { type: 'string' } },
  positionals: { min: 1, max: 1 },
  async run({ values, positionals, io }) {
    const id = positionals[0] ?? '';
    const timeoutMs = integerOption(values, 'timeout-ms', jobCommand, { min: 0, max: 24 * 3_600_000 }) ?? 60_000;
    const { job, attempts } = await withClient(jobCommand, values, io, async (client) => {
      const job = values['wait'] === true ? await client.waitForJob(id, { timeoutMs }) : await client.getJob(id);
      const attempts = await client.attempts(id);
      return { job, attempts };
    });
    if (values['json'] === true) {
      printJson(io, { job, attempts });
      return 0;
    }
    printJob(io, job);
    say(io, '');
    say(io, attempts.length === 0 ? 'no attempts yet' : 'attempts:');
    for (const a of attempts) {
      say(
        io,
        `  #${a.attempt}  epoch ${a.epoch}  ${a.workerId}  ${a.startedAt} → ${a.endedAt ?? '(running)'}  ${a.outcome ?? '-'}${a.errorCode === null ? '' : ` (${a.errorCode})`}`,
      );
    }
    return 0;
  },
};

export const deadCommand: Command = {
  name: 'dead',
  summary: 'List dead jobs, newest first (next pages via --cursor).',
  usage: 'dead [--kind K] [--error-code C] [--since T] [--until T] [--limit N] [--cursor C] [--json]',
  details: [
    ...FILTER_DETAILS.filter((line) => !line.startsWith('--status')),
    '--limit N              page size (default 50)',
    '--cursor C             the next page, as printed',
    ...REMOTE_DETAILS,
  ],
  options: { ...REMOTE_OPTIONS, ...FILTER_OPTIONS, limit: { type: 'string' }, cursor: { type: 'string' } },
  async run({ values, io }) {
    if (values['status'] !== undefined) throw new UsageError('dead lists dead jobs; use jobs list --status for others', deadCommand);
    const limit = integerOption(values, 'limit', deadCommand, { min: 1, max: LIMITS.maxListLimit }) ?? 50;
    const filter = filterFromOptions(values, deadCommand);
    const cursor = stringOption(values, 'cursor');
    const page = await withClient(deadCommand, values, io, (client) =>
      client.listJobs({ ...filter, status: 'dead', limit, ...(cursor === undefined ? {} : { cursor }) }),
    );
    if (values['json'] === true) {
      printJson(io, page);
      return 0;
    }
    if (page.jobs.length === 0) say(io, 'no dead jobs');
    else
      printTable(
        io,
        ['ID', 'KIND', 'ATTEMPTS', 'FINISHED', 'LAST ERROR'],
        page.jobs.map((job) => deadRow(job)),
      );
    if (page.nextCursor !== null) say(io, `more: --cursor ${page.nextCursor}`);
    return 0;
  },
};

export const requeueCommand: Command = {
  name: 'requeue',
  summary: 'Put a dead job back in the queue with a fresh attempt budget (admin).',
  usage: 'requeue <id> [--max-attempts N]',
  details: ["--max-attempts N       the new attempt budget (default: the job's)", ...REMOTE_DETAILS],
  options: { ...REMOTE_OPTIONS, 'max-attempts': { type: 'string' } },
  positionals: { min: 1, max: 1 },
  async run({ values, positionals, io }) {
    const maxAttempts = integerOption(values, 'max-attempts', requeueCommand, { min: 1, max: LIMITS.maxAttempts });
    const id = positionals[0] ?? '';
    const job = await withClient(requeueCommand, values, io, (client) => client.requeue(id, maxAttempts === undefined ? {} : { maxAttempts }));
    if (values['json'] === true) printJson(io, job);
    else say(io, `requeued ${job.id} (${job.status}, ${job.maxAttempts} attempts)`);
    return 0;
  },
};

export const statsCommand: Command = {
  name: 'stats',
  summary: "Show the tenant's job counts by status, oldest available age, mean wait and run times, lease expirations and storage (admin).",
  usage: 'stats [--watch [--interval-ms N] [--count N]] [--json]',
  details: [
    '--watch                refresh until interrupted (with --json: NDJSON, one document per refresh)',
    '--interval-ms N        time between refreshes (default 2000)',
    '--count N              stop after N refreshes',
    ...REMOTE_DETAILS,
  ],
  options: { ...REMOTE_OPTIONS, watch: { type: 'boolean' }, 'interval-ms': { type: 'string' }, count: { type: 'string' } },
  async run({ values, io }) {
    const intervalMs = integerOption(values, 'interval-ms', statsCommand, { min: 100, max: 3_600_000 }) ?? 2_000;
    const watch = values['watch'] === true;
    const count = integerOption(values, 'count', statsCommand, { min: 1, max: 1_000_000 }) ?? (watch ? Number.POSITIVE_INFINITY : 1);
    const json = values['json'] === true;
    await withClient(statsCommand, values, io, async (client) => {
      for (let shown = 0; shown < count; shown += 1) {
        if (shown > 0) await new Promise((resolve) => setTimeout(resolve, intervalMs));
        const stats = await client.stats();
        if (json) {
          if (watch) printJsonLine(io, stats);
          else printJson(io, stats);
          continue;
        }
        // On a terminal each refresh replaces the last; piped, the tables follow one another.
        if (watch && io.progress !== undefined) io.progress('\x1b[H\x1b[2J');
        else if (shown > 0) io.out('');
        printStats(io, stats);
      }
    });
    return 0;
  },
};

function deadRow(job: JobListItem): (string | number | null)[] {
  const [id, kind, , attempts, , error] = jobRow(job);
  return [id, kind, attempts, job.finishedAt, error];
}

function printStats(io: Io, stats: Stats): void {
  printTable(
    io,
    ['STATUS', 'COUNT'],
    Object.entries(stats.counts).map(([status, count]) => [status, count]),
  );
  io.out('');
  printFacts(io, [
    ['oldest available', formatMs(stats.oldestAvailableAgeMs)],
    ['mean wait', formatMs(stats.meanWaitMs)],
    ['mean attempt', formatMs(stats.meanAttemptRunMs)],
    ['mean to completion', formatMs(stats.meanTimeToCompletionMs)],
    ['lease expirations', stats.leaseExpirations],
    ['storage', `${stats.storageBytes} bytes`],
  ]);
}

function printJob(io: Io, job: Job): void {
  say(io, `${job.id}  ${job.kind}  ${job.status}${job.cancelRequested ? ' (cancel requested)' : ''}`);
  say(io, `attempts ${job.attempts}/${job.maxAttempts}  priority ${job.priority}  epoch ${job.epoch}`);
  say(io, `created ${job.createdAt}  run after ${job.runAfter}  started ${job.startedAt ?? '-'}  finished ${job.finishedAt ?? '-'}`);
  if (job.deadlineAt !== null) say(io, `deadline ${job.deadlineAt}`);
  if (job.concurrencyKey !== null) say(io, `concurrency key ${job.concurrencyKey}`);
  if (job.dependsOn.length > 0) say(io, `depends on ${job.dependsOn.join(', ')}`);
  if (job.children.length > 0) say(io, `needed by ${job.children.join(', ')}${job.children.length >= 100 ? ' (the first 100)' : ''}`);
  if (job.lastError !== null) say(io, `last error ${job.lastError.code} (${job.lastError.class}): ${job.lastError.message}`);
  if (job.progress !== null && job.progress !== undefined) say(io, `progress ${JSON.stringify(job.progress)}`);
  if (job.result !== null && job.result !== undefined) say(io, `result ${JSON.stringify(job.result)}`);
}

function formatMs(ms: number | null): string {
  return ms === null ? '-' : `${Math.round(ms)} ms`;
}
