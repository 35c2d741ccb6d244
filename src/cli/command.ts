/**
 * The shape of a CLI command and the argument parsing every command shares:
 * node:util parseArgs in strict mode, `--help` on every command, and one
 * UsageError (exit code 2) for anything the user typed wrong. A command's run
 * returns its exit code; output goes through the Io it is given so that the
 * composition stays testable.
 */

import { parseArgs, type ParseArgsConfig } from 'node:util';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;
export type Values = Record<string, string | boolean | undefined>;

export interface Io {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
  readonly env: NodeJS.ProcessEnv;
  /** Present only when stdout is a terminal: replaces the current line with a progress text. */
  readonly progress?: (text: string) => void;
}

export interface CommandInput {
  readonly values: Values;
  readonly positionals: readonly string[];
  readonly io: Io;
}

export interface Command {
  /** As typed: `serve`, `keys create`. */
  readonly name: string;
  readonly summary: string;
  /** Usage line(s) after `leasehold `. */
  readonly usage: string;
  /** One line per option, shown by --help. */
  readonly details: readonly string[];
  readonly options: OptionSpec;
  readonly positionals?: { readonly min: number; readonly max: number };
  /** Long-running commands exit the process when done, whatever timers a handler left behind. */
  readonly forceExit?: boolean;
  run(input: CommandInput): Promise<number>;
}

/** Wrong usage: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: Command,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A failure to report as one line with exit code 1 (a missing file, a bad database path). */
export class CliError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export const HELP_OPTION: OptionSpec = { help: { type: 'boolean', short: 'h' } };

export function parseCommandArgs(command: Command, args: readonly string[]): { values: Values; positionals: string[]; help: boolean } {
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...args], options: { ...HELP_OPTION, ...command.options }, strict: true, allowPositionals: true }) as {
      values: Values;
      positionals: string[];
    };
  } catch (error) {
    // parseArgs appends advice on '--' to unknown options; the first sentence is the message.
    const message = error instanceof Error ? (error.message.split(/\n|\. To specify/, 1)[0] ?? '') : '';
    throw new UsageError(message === '' ? 'invalid arguments' : message, command);
  }
  const help = parsed.values['help'] === true;
  if (!help) {
    const { min, max } = command.positionals ?? { min: 0, max: 0 };
    if (parsed.positionals.length < min) throw new UsageError('missing argument', command);
    if (parsed.positionals.length > max) throw new UsageError(`unexpected argument '${parsed.positionals[max] ?? ''}'`, command);
  }
  return { ...parsed, help };
}

export function commandHelp(command: Command): string {
  const lines = [`usage: leasehold ${command.usage}`, '', command.summary];
  if (command.details.length > 0) lines.push('', ...command.details.map((line) => `  ${line}`));
  lines.push('  -h, --help             show this help');
  return lines.join('\n');
}

export function stringOption(values: Values, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

export function requireOption(values: Values, name: string, command: Command, fallback?: string): string {
  const value = stringOption(values, name) ?? fallback;
  if (value === undefined || value === '') throw new UsageError(`--${name} is required`, command);
  return value;
}

export function integerOption(values: Values, name: string, command: Command, range: { min: number; max: number }): number | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  if (!/^-?\d+$/.test(raw)) throw new UsageError(`--${name} must be an integer`, command);
  const value = Number(raw);
  if (value < range.min || value > range.max) throw new UsageError(`--${name} must be between ${range.min} and ${range.max}`, command);
  return value;
}
