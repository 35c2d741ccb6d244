/**
 * `kinds set <kind> --file def.json` registers (or replaces) a kind in the
 * tenant's allowlist; `kinds list` shows the registered kinds; `kinds pause
 * <kind>` and `kinds resume <kind>` stop and restart its leasing.
 */

import { readFile } from 'node:fs/promises';
import { describeJsonError } from '../../core/json-error.js';
import { CliError, requireOption, type Command } from '../command.js';
import { printJson, REMOTE_DETAILS, REMOTE_OPTIONS, withClient } from '../remote.js';
import type { KindDefinition } from '../../protocol/schemas.js';

export const kindsSet: Command = {
  name: 'kinds set',
  summary:
    'Register or replace a job kind (admin). The file holds {payloadSchema, maxPayloadBytes, maxAttempts, leaseMs, backoff, deadlineMs, maxResultBytes, maxConcurrent, rate}.',
  usage: 'kinds set <kind> --file def.json',
  details: ['--file FILE            the kind definition, as JSON', ...REMOTE_DETAILS],
  options: { ...REMOTE_OPTIONS, file: { type: 'string' } },
  positionals: { min: 1, max: 1 },
  async run({ values, positionals, io }) {
    const kind = positionals[0] ?? '';
    const file = requireOption(values, 'file', kindsSet);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      throw new CliError('file_unreadable', `cannot read the kind definition ${file}${typeof code === 'string' ? ` (${code})` : ''}: check --file`);
    }
    let definition: KindDefinition;
    try {
      definition = JSON.parse(text) as KindDefinition;
    } catch (error) {
      throw new CliError('invalid_json', `${file} is not valid JSON: ${describeJsonError(text, error)}`);
    }
    const saved = await withClient(kindsSet, values, io, (client) => client.putKind(kind, definition));
    if (values['json'] === true) printJson(io, saved);
    else io.out(`kind ${saved.kind} saved (max attempts ${saved.maxAttempts}, lease ${saved.leaseMs} ms)`);
    return 0;
  },
};

export const kindsList: Command = {
  name: 'kinds list',
  summary: "List the tenant's registered job kinds.",
  usage: 'kinds list',
  details: REMOTE_DETAILS,
  options: REMOTE_OPTIONS,
  async run({ values, io }) {
    const kinds = await withClient(kindsList, values, io, (client) => client.listKinds());
    if (values['json'] === true) {
      printJson(io, kinds);
      return 0;
    }
    if (kinds.length === 0) io.out('no kinds registered');
    for (const k of kinds) {
      const limits = `${k.maxConcurrent === null ? '' : `  max concurrent ${k.maxConcurrent}`}${k.rate === null ? '' : `  rate ${k.rate.limit} per ${k.rate.perMs} ms`}`;
      io.out(
        `${k.kind}${k.paused ? '  PAUSED' : ''}  max attempts ${k.maxAttempts}  lease ${k.leaseMs} ms  deadline ${k.deadlineMs === null ? '-' : `${k.deadlineMs} ms`}  max payload ${k.maxPayloadBytes} B  max result ${k.maxResultBytes} B${limits}`,
      );
    }
    return 0;
  },
};

function pauseCommand(action: 'pause' | 'resume'): Command {
  const command: Command = {
    name: `kinds ${action}`,
    summary:
      action === 'pause'
        ? 'Pause a job kind (admin): no worker leases its jobs until it is resumed. Enqueues still succeed; running jobs finish.'
        : 'Resume a paused job kind (admin): workers lease its jobs again at once.',
    usage: `kinds ${action} <kind>`,
    details: REMOTE_DETAILS,
    options: REMOTE_OPTIONS,
    positionals: { min: 1, max: 1 },
    async run({ values, positionals, io }) {
      const name = positionals[0] ?? '';
      const kind = await withClient(command, values, io, (client) => (action === 'pause' ? client.pauseKind(name) : client.resumeKind(name)));
      if (values['json'] === true) printJson(io, kind);
      else io.out(`kind ${kind.kind} ${kind.paused ? 'paused' : 'resumed'}`);
      return 0;
    },
  };
  return command;
}

export const kindsPause = pauseCommand('pause');
export const kindsResume = pauseCommand('resume');
