/**
 * `jobs cancel|requeue|reconcile`: the operator actions on the jobs named by
 * id, or on every job a filter matches with --all-matching (POST /jobs/bulk:
 * first a dry run for the count, then a confirmation unless --yes, then the
 * run). Exit 0 when every job changed, 3 when some did and some did not, 1
 * when none did or the confirmation was declined.
 */

import type { LeaseholdClient } from '../../client/leasehold-client.js';
import type { BulkAction, BulkRequest } from '../../protocol/operator.js';
import { CliError, EXIT, integerOption, stringOption, UsageError, type Command } from '../command.js';
import { describeError } from '../error-text.js';
import { FILTER_DETAILS, FILTER_OPTIONS, filterFromOptions } from '../job-filter-options.js';
import { printJson, REMOTE_DETAILS, REMOTE_OPTIONS, withClient } from '../remote.js';
import { printTable } from '../table.js';
import { terminalSafe } from '../terminal-text.js';

const OUTCOMES = ['succeeded', 'dead', 'requeue'] as const;
type Outcome = (typeof OUTCOMES)[number];

const APPLIES_TO: Readonly<Record<BulkAction, string>> = { requeue: 'dead', cancel: 'queued or running', reconcile: 'unknown' };

function exitFor(changed: number, total: number): number {
  if (changed === total) return EXIT.ok;
  return changed === 0 ? EXIT.failure : EXIT.partial;
}

async function runOne(client: LeaseholdClient, action: BulkAction, id: string, outcome: Outcome | undefined, maxAttempts: number | undefined): Promise<string> {
  if (action === 'cancel') return (await client.cancel(id)).status;
  if (action === 'reconcile') return (await client.reconcile(id, outcome ?? 'requeue')).status;
  return (await client.requeue(id, maxAttempts === undefined ? {} : { maxAttempts })).status;
}

function actionCommand(action: BulkAction): Command {
  const reconcile = action === 'reconcile';
  const command: Command = {
    name: `jobs ${action}`,
    summary: `${action[0]?.toUpperCase() ?? ''}${action.slice(1)} ${APPLIES_TO[action]} jobs by id, or every job a filter matches with --all-matching${action === 'cancel' ? '' : ' (admin)'}.`,
    usage: `jobs ${action} <id>...${reconcile ? ' --outcome succeeded|dead|requeue' : ''} | jobs ${action} --all-matching [filters] [--limit N] [--yes]${reconcile ? ' --outcome O' : ''}`,
    details: [
      ...(reconcile ? ['--outcome O            what the unknown jobs become: succeeded, dead or requeue'] : []),
      ...(action === 'requeue' ? ["--max-attempts N       the new attempt budget, by id only (default: the job's)"] : []),
      '--all-matching         every job the filter flags select (POST /jobs/bulk), newest first',
      ...FILTER_DETAILS,
      '--limit N              with --all-matching: at most N jobs (default 1000, at most 10000)',
      '--yes                  do not ask for confirmation',
      ...REMOTE_DETAILS,
      'exit: 0 every job changed, 3 some did, 1 none did or the confirmation was declined',
    ],
    options: {
      ...REMOTE_OPTIONS,
      ...FILTER_OPTIONS,
      'all-matching': { type: 'boolean' },
      limit: { type: 'string' },
      yes: { type: 'boolean' },
      ...(reconcile ? { outcome: { type: 'string' } } : {}),
      ...(action === 'requeue' ? { 'max-attempts': { type: 'string' } } : {}),
    },
    positionals: { min: 0, max: 1000 },
    async run({ values, positionals, io }) {
      const { OPERATOR_LIMITS } = await import('../../protocol/operator.js');
      const rawOutcome = stringOption(values, 'outcome');
      if (reconcile && rawOutcome === undefined) throw new UsageError('--outcome is required: succeeded, dead or requeue', command);
      if (rawOutcome !== undefined && !(OUTCOMES as readonly string[]).includes(rawOutcome))
        throw new UsageError(`--outcome must be one of ${OUTCOMES.join(', ')} (got '${rawOutcome}')`, command);
      const outcome = rawOutcome as Outcome | undefined;
      const filter = filterFromOptions(values, command);
      const allMatching = values['all-matching'] === true;
      if (allMatching && positionals.length > 0) throw new UsageError('give job ids or --all-matching, not both', command);
      if (!allMatching && positionals.length === 0) throw new UsageError('name at least one job id, or use --all-matching with filters', command);
      if (!allMatching && Object.keys(filter).length > 0) throw new UsageError('filter flags select jobs only with --all-matching', command);

      if (!allMatching) {
        const maxAttempts = integerOption(values, 'max-attempts', command, { min: 1, max: 1000 });
        const rows: string[][] = [];
        let changed = 0;
        await withClient(command, values, io, async (client) => {
          for (const id of positionals) {
            try {
              rows.push([id, 'changed', await runOne(client, action, id, outcome, maxAttempts)]);
              changed += 1;
            } catch (error) {
              rows.push([id, 'refused', describeError(error)]);
            }
          }
        });
        if (values['json'] === true)
          printJson(io, { results: rows.map(([id, result, detail]) => ({ id, result, detail })), changed, total: positionals.length });
        else printTable(io, ['ID', 'RESULT', 'STATUS OR ERROR'], rows);
        return exitFor(changed, positionals.length);
      }

      const limit = integerOption(values, 'limit', command, { min: 1, max: OPERATOR_LIMITS.maxBulkLimit }) ?? OPERATOR_LIMITS.defaultBulkLimit;
      const request: BulkRequest = { action, filter, limit, ...(outcome === undefined ? {} : { outcome }) };
      return withClient(command, values, io, async (client) => {
        const dry = await client.bulk({ ...request, dryRun: true });
        if (dry.matched === 0) {
          if (values['json'] === true) printJson(io, { matched: 0, changed: 0 });
          else io.out('no jobs match; nothing changed');
          return EXIT.ok;
        }
        if (values['yes'] !== true) {
          const question = `${action} ${dry.matched} job${dry.matched === 1 ? '' : 's'}${dry.matched >= limit ? ` (the --limit; more may match)` : ''}?`;
          if (io.confirm === undefined || !(await io.confirm(terminalSafe(question))))
            throw new CliError('not_confirmed', `not confirmed; nothing changed (${dry.matched} jobs match; --yes skips the question)`);
        }
        const answer = await client.bulk(request);
        if (values['json'] === true) printJson(io, answer);
        else io.out(`${action}: matched ${answer.matched}, changed ${answer.changed}`);
        return exitFor(answer.changed, answer.matched);
      });
    },
  };
  return command;
}

export const jobsCancel = actionCommand('cancel');
export const jobsRequeue = actionCommand('requeue');
export const jobsReconcile = actionCommand('reconcile');
