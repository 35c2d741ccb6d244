/**
 * How the CLI words a failure: one line that says what happened, to what,
 * and what to do. Usage mistakes get that line and a pointer to the
 * command's --help (not the whole help, which buries the line); everything
 * else gets `error: <code>: <message>`, never a stack.
 */

import { LeaseholdApiError, LeaseholdIntegrityError, LeaseholdNetworkError } from '../client/errors.js';
import { LeaseholdError } from '../core/errors.js';
import { CliError } from './command.js';

/** The two lines of a usage error. */
export function usageText(message: string, commandName: string | undefined): string {
  return `error: ${message}\nsee 'leasehold ${commandName === undefined ? '' : `${commandName} `}--help'`;
}

/** One line: code and message, never a stack. */
export function describeError(error: unknown): string {
  if (error instanceof LeaseholdApiError) return `${error.code} (HTTP ${error.status}): ${error.message}`;
  if (error instanceof LeaseholdNetworkError) return `network_error: ${error.message}; check --url (or $LEASEHOLD_URL)`;
  if (error instanceof LeaseholdIntegrityError || error instanceof CliError || error instanceof LeaseholdError) {
    const text = `${error.code}: ${firstLine(error.message)}`;
    // The PostgreSQL store names the connection string it could not use; the CLI knows where that came from.
    return error.message.includes('correct the connection string') ? `${text} (--db or $LEASEHOLD_DB)` : text;
  }
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const text = `${typeof code === 'string' ? code : error.name}: ${firstLine(error.message)}`;
    if (code === 'invalid_url') return `${text} (from --url or $LEASEHOLD_URL)`;
    // The PostgreSQL store's connection errors (pg_unknown_database, …) say what to change in the connection string.
    if (typeof code === 'string' && code.startsWith('pg_')) return `${text} (--db or $LEASEHOLD_DB)`;
    return text;
  }
  return String(error);
}

/** A failed listen(): the address, the cause, and the flag to change. */
export function listenError(error: unknown, host: string, port: number): Error {
  const code = (error as { code?: unknown } | null)?.code;
  const where = `${host}:${port}`;
  if (code === 'EADDRINUSE') {
    return new CliError(
      'port_in_use',
      `port ${port} on ${host} is already in use (EADDRINUSE): stop what listens there, or pick another port with --port (--port 0 takes any free one)`,
    );
  }
  if (code === 'EACCES') {
    return new CliError('port_not_permitted', `this user may not listen on ${where} (EACCES): ports below 1024 need privileges; pick --port 1024 or above`);
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
    return new CliError('host_not_local', `cannot listen on ${where} (${String(code)}): --host must be an address of this machine, e.g. 127.0.0.1 or 0.0.0.0`);
  }
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * Where in a handlers module an import failed, as `file:line[:column]`: from
 * the first stack frame in the module, or for a syntax error (whose stack
 * names no frame in the file) from `node --check`, run only then.
 */
export async function moduleErrorLocation(path: string, fileUrl: string, error: unknown): Promise<string | undefined> {
  const stack = error instanceof Error ? (error.stack ?? '') : '';
  for (const candidate of [fileUrl, path]) {
    const at = stack.indexOf(candidate);
    if (at >= 0) {
      const match = /^:(\d+)(?::(\d+))?/.exec(stack.slice(at + candidate.length));
      if (match !== null) return `${path}:${match[1]}${match[2] === undefined ? '' : `:${match[2]}`}`;
    }
  }
  if (!(error instanceof SyntaxError)) return undefined;
  const { spawnSync } = await import('node:child_process');
  const check = spawnSync(process.execPath, ['--check', path], { encoding: 'utf8', timeout: 10_000 });
  const first = (check.stderr ?? '').split('\n', 1)[0] ?? '';
  const line = /:(\d+)$/.exec(first)?.[1];
  return line === undefined ? undefined : `${path}:${line}`;
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? '';
}
