/**
 * Commands that work on jobs through a coordinator's HTTP API: `enqueue`,
 * `job <id>` (the job and its attempt history), `dead`, `requeue <id>` and
 * `stats`. They print a short human form, or the API's JSON with --json.
 */

import { randomUUID } from 'node:crypto';
import { describeJsonError } from '../../core/json-error.js';
import { LIMITS } from '../../protocol/limits.js';
import type { Job } from '../../protocol/schemas.js';
import { integerOption, requireOption, stringOption, UsageError, type Command, type Io } from '../command.js';
import { printJson, REMOTE_DETAILS, REMOTE_OPTIONS, withClient } from '../remote.js';
import { terminalSafe } from '../terminal-text.js';

/** Every human line here carries text from workers or producers (ids, kinds, codes, messages): printed escaped. */
function say(io: Io, line: string): void {
  io.out(terminalSafe(line));
}

export const enqueueCommand: Command = {
  name: 'enqueue',
  summary: 'Enqueue a job.',
  usage: 'enqueue --kind K --payload JSON [--idempotency-key K] [--max-attempts N] [--priority N] [--run-after TIME] [--deadline-ms N]',
  details: [
    '--kind K               the job kind',
    '--payload JSON         the payload, as JSON',
    '--idempotency-key K    reuse a key to make a retried enqueue safe (default: random)',
    '--max-attempts N       attempts before the job is dead',
    '--priority N           lower runs first (default 0)',
    '--run-after TIME       RFC 3339 time before which the job is not leased',
    '--deadline-ms N        overall deadline from now',
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
    quiet: { type: 'boolean' },
  },
  async run({ values, io }) {
    const kind = requireOption(values, 'kind', enqueueCommand);
    const payloadText = requireOption(values, 'payload', enqueueCommand);
    let payload: unknown;
    try {
      payload = JSON.parse(payloadText);
    } catch (error) {
      throw new UsageError(`--payload is not JSON: ${describeJsonError(payloadText, error)} (keys and strings take double quotes: '{"name":"x"}')`, enqueueCommand);
    }
    const maxAttempts = integerOption(values, 'max-attempts', enqueueCommand, { min: 1, max: LIMITS.maxAttempts });
    const priority = integerOption(values, 'priority', enqueueCommand, { min: -LIMITS.maxPriority, max: LIMITS.maxPriority });
    const deadlineMs = integerOption(values, 'deadline-ms', enqueueCommand, { min: 1, max: Number.MAX_SAFE_INTEGER });
    const runAfter = stringOption(values, 'run-after');
    const idempotencyKey = stringOption(values, 'idempotency-key') ?? randomUUID();
    const request = {
      kind,
      payload,
      ...(maxAttempts === undefined ? {} : { maxAttempts }),
      ...(priority === undefined ? {} : { priority }),
      ...(deadlineMs === undefined ? {} : { deadlineMs }),
      ...(runAfter === undefined ? {} : { runAfter }),
    };
    const answer = await withClient(enqueueCommand, values, io, (client) => client.enqueue(request, { idempotencyKey }));
    if (values['json'] === true) printJson(io, answer.job);
    else if (values['quiet'] === true) io.out(answer.job.id);
    else say(io, `${answer.replayed ? 'already enqueued' : 'enqueued'} ${answer.job.id} (${answer.job.kind}, ${answer.job.status}, idempotency key ${idempotencyKey})`);
    return 0;
  },
};

export const jobCommand: Command = {
  name: 'job',
  summary: 'Show a job and its attempt history.',
  usage: 'job <id> [--wait [--timeout-ms N]]',
  details: ['--wait                 wait until the job is succeeded, dead, cancelled or unknown', '--timeout-ms N         longest --wait (default 60000)', ...REMOTE_DETAILS],
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
      say(io, `  #${a.attempt}  epoch ${a.epoch}  ${a.workerId}  ${a.startedAt} → ${a.endedAt ?? '(running)'}  ${a.outcome ?? '-'}${a.errorCode === null ? '' : ` (${a.errorCode})`}`);
    }
    return 0;
  },
};

export const deadCommand: Command = {
  name: 'dead',
  summary: 'List dead jobs (newest pages via --cursor).',
  usage: 'dead [--kind K] [--limit N] [--cursor C]',
  details: ['--kind K               only this kind', '--limit N              page size (default 50)', '--cursor C             the next page, as printed', ...REMOTE_DETAILS],
  options: { ...REMOTE_OPTIONS, kind: { type: 'string' }, limit: { type: 'string' }, cursor: { type: 'string' } },
  async run({ values, io }) {
    const limit = integerOption(values, 'limit', deadCommand, { min: 1, max: LIMITS.maxListLimit }) ?? 50;
    const kind = stringOption(values, 'kind');
    const cursor = stringOption(values, 'cursor');
    const page = await withClient(deadCommand, values, io, (client) =>
      client.listJobs({ status: 'dead', limit, ...(kind === undefined ? {} : { kind }), ...(cursor === undefined ? {} : { cursor }) }),
    );
    if (values['json'] === true) {
      printJson(io, page);
      return 0;
    }
    if (page.jobs.length === 0) say(io, 'no dead jobs');
    for (const job of page.jobs) {
      say(io, `${job.id}  ${job.kind}  attempts ${job.attempts}/${job.maxAttempts}  ${job.finishedAt ?? ''}  ${job.lastError === null ? '' : `${job.lastError.class} ${job.lastError.code}: ${job.lastError.message}`}`);
    }
    if (page.nextCursor !== null) say(io, `more: --cursor ${page.nextCursor}`);
    return 0;
  },
};

export const requeueCommand: Command = {
  name: 'requeue',
  summary: 'Put a dead job back in the queue with a fresh attempt budget (admin).',
  usage: 'requeue <id> [--max-attempts N]',
  details: ['--max-attempts N       the new attempt budget (default: the job\'s)', ...REMOTE_DETAILS],
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
  summary: "Show the tenant's job counts by status, mean wait and run times, and lease expirations.",
  usage: 'stats',
  details: REMOTE_DETAILS,
  options: REMOTE_OPTIONS,
  async run({ values, io }) {
    const stats = await withClient(statsCommand, values, io, (client) => client.stats());
    if (values['json'] === true) {
      printJson(io, stats);
      return 0;
    }
    say(io, Object.entries(stats.counts).map(([status, count]) => `${status} ${count}`).join('  '));
    say(io, `mean wait ${formatMs(stats.meanWaitMs)}  mean attempt ${formatMs(stats.meanAttemptRunMs)}  mean to completion ${formatMs(stats.meanTimeToCompletionMs)}  lease expirations ${stats.leaseExpirations}`);
    say(io, `oldest available ${formatMs(stats.oldestAvailableAgeMs)}  storage ${stats.storageBytes} bytes`);
    return 0;
  },
};

function printJob(io: Io, job: Job): void {
  say(io, `${job.id}  ${job.kind}  ${job.status}${job.cancelRequested ? ' (cancel requested)' : ''}`);
  say(io, `attempts ${job.attempts}/${job.maxAttempts}  priority ${job.priority}  epoch ${job.epoch}`);
  say(io, `created ${job.createdAt}  run after ${job.runAfter}  started ${job.startedAt ?? '-'}  finished ${job.finishedAt ?? '-'}`);
  if (job.deadlineAt !== null) say(io, `deadline ${job.deadlineAt}`);
  if (job.lastError !== null) say(io, `last error ${job.lastError.code} (${job.lastError.class}): ${job.lastError.message}`);
  if (job.progress !== null && job.progress !== undefined) say(io, `progress ${JSON.stringify(job.progress)}`);
  if (job.result !== null && job.result !== undefined) say(io, `result ${JSON.stringify(job.result)}`);
}

function formatMs(ms: number | null): string {
  return ms === null ? '-' : `${Math.round(ms)} ms`;
}
