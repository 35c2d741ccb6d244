/**
 * `kinds set <kind> --file def.json` registers (or replaces) a kind in the
 * tenant's allowlist; `kinds list` shows the registered kinds.
 */

import { readFile } from 'node:fs/promises';
import { describeJsonError } from '../../core/json-error.js';
import { CliError, requireOption, type Command } from '../command.js';
import { printJson, REMOTE_DETAILS, REMOTE_OPTIONS, withClient } from '../remote.js';
import type { KindDefinition } from '../../protocol/schemas.js';

export const kindsSet: Command = {
  name: 'kinds set',
  summary: 'Register or replace a job kind (admin). The file holds {payloadSchema, maxPayloadBytes, maxAttempts, leaseMs, backoff, deadlineMs, maxResultBytes}.',
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
      io.out(`${k.kind}  max attempts ${k.maxAttempts}  lease ${k.leaseMs} ms  deadline ${k.deadlineMs === null ? '-' : `${k.deadlineMs} ms`}  max payload ${k.maxPayloadBytes} B  max result ${k.maxResultBytes} B`);
    }
    return 0;
  },
};
