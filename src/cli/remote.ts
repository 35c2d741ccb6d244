/**
 * What every command that talks to a coordinator shares: `--url`/`--key`
 * (or LEASEHOLD_URL/LEASEHOLD_KEY), a client built from them, and `--json`
 * for machine-readable output.
 */

import type { LeaseholdClient } from '../client/leasehold-client.js';
import { requireOption, type Command, type Io, type OptionSpec, type Values } from './command.js';
import { terminalSafeJson } from './terminal-text.js';

export const REMOTE_OPTIONS: OptionSpec = {
  url: { type: 'string' },
  key: { type: 'string' },
  json: { type: 'boolean' },
};

export const REMOTE_DETAILS: readonly string[] = [
  '--url URL              coordinator URL (default: $LEASEHOLD_URL)',
  '--key KEY              API key (default: $LEASEHOLD_KEY)',
  '--json                 print JSON',
];

export async function withClient<T>(command: Command, values: Values, io: Io, use: (client: LeaseholdClient) => Promise<T>): Promise<T> {
  const baseUrl = requireOption(values, 'url', command, io.env['LEASEHOLD_URL']);
  const apiKey = requireOption(values, 'key', command, io.env['LEASEHOLD_KEY']);
  const { LeaseholdClient } = await import('../client/leasehold-client.js');
  const client = new LeaseholdClient({ baseUrl, apiKey, connections: 2 });
  try {
    return await use(client);
  } finally {
    await client.close();
  }
}

export function printJson(io: Io, value: unknown): void {
  io.out(terminalSafeJson(value));
}

/** One line of NDJSON (streams: one document per line). */
export function printJsonLine(io: Io, value: unknown): void {
  io.out(terminalSafeJson(value, 0));
}
