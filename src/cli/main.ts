/**
 * The `leasehold` command line: finds the command (one word, or two for
 * `keys …`, `kinds …` and `schedules …`), parses its flags, runs it, and turns failures into
 * one line on stderr (error-text.ts). Exit codes: 0 success, 1 the operation
 * failed, 2 the command line was wrong (one line and a pointer to --help), 3
 * partial (a bulk or batch command did some items and refused others). No
 * stack trace is printed.
 */

import { readFileSync } from 'node:fs';
import { commandHelp, parseCommandArgs, UsageError, type Command, type Io } from './command.js';
import { describeError, usageText } from './error-text.js';
import { devCommand } from './commands/dev.js';
import { deadCommand, enqueueCommand, jobCommand, requeueCommand, statsCommand } from './commands/jobs.js';
import { jobsCancel, jobsReconcile, jobsRequeue } from './commands/jobs-actions.js';
import { jobsList, jobsShow } from './commands/jobs-list.js';
import { keysCreate, keysList, keysRevoke } from './commands/keys.js';
import { kindsList, kindsPause, kindsResume, kindsSet } from './commands/kinds.js';
import { purgeCommand } from './commands/purge.js';
import { schedulesDelete, schedulesList, schedulesSet } from './commands/schedules.js';
import { serveCommand } from './commands/serve.js';
import { workerCommand } from './commands/worker.js';
import { terminalSafe } from './terminal-text.js';

export const COMMANDS: readonly Command[] = [
  serveCommand,
  workerCommand,
  devCommand,
  keysCreate,
  keysList,
  keysRevoke,
  enqueueCommand,
  jobCommand,
  jobsList,
  jobsShow,
  jobsCancel,
  jobsRequeue,
  jobsReconcile,
  deadCommand,
  requeueCommand,
  statsCommand,
  purgeCommand,
  kindsSet,
  kindsList,
  schedulesSet,
  schedulesList,
  schedulesDelete,
  kindsPause,
  kindsResume,
];

const GROUPS = new Set(COMMANDS.filter((c) => c.name.includes(' ')).map((c) => c.name.split(' ')[0] ?? ''));

export function overview(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  return [
    'usage: leasehold <command> [options]',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary.split('. ')[0]?.replace(/\.$/, '') ?? ''}`),
    '',
    'Remote commands read --url/--key or LEASEHOLD_URL/LEASEHOLD_KEY. `leasehold <command> --help` for details; `leasehold --version` prints the version.',
    'Exit codes: 0 success, 1 failure, 2 wrong usage, 3 partial (some items done, some refused). docs/CLI.md has every command.',
  ].join('\n');
}

function findCommand(args: readonly string[]): { command: Command; rest: readonly string[] } | undefined {
  const [first, second] = args;
  if (first === undefined) return undefined;
  if (GROUPS.has(first)) {
    const command = COMMANDS.find((c) => c.name === `${first} ${second ?? ''}`);
    return command === undefined ? undefined : { command, rest: args.slice(2) };
  }
  const command = COMMANDS.find((c) => c.name === first);
  return command === undefined ? undefined : { command, rest: args.slice(1) };
}

/** The installed package's version: package.json sits three levels above dist/src/cli/main.js (two above src/cli/main.ts). */
export function packageVersion(): string {
  for (const relative of ['../../../package.json', '../../package.json']) {
    try {
      const manifest = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: unknown; version?: unknown };
      if (manifest.name === 'leasehold' && typeof manifest.version === 'string') return manifest.version;
    } catch {
      // Not at this level: try the next.
    }
  }
  return 'unknown';
}

export async function main(args: readonly string[], io: Io): Promise<{ code: number; forceExit: boolean }> {
  const [first, second] = args;
  if (first === '--version' || first === '-v' || first === 'version') {
    io.out(packageVersion());
    return { code: 0, forceExit: false };
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    io.out(overview());
    return { code: 0, forceExit: false };
  }
  const found = findCommand(args);
  if (found === undefined) {
    if (first !== undefined && GROUPS.has(first) && (second === '--help' || second === '-h')) {
      io.out(
        COMMANDS.filter((c) => c.name.startsWith(`${first} `))
          .map(commandHelp)
          .join('\n\n'),
      );
      return { code: 0, forceExit: false };
    }
    io.err(first === undefined ? overview() : usageText(`unknown command '${args.slice(0, GROUPS.has(first) ? 2 : 1).join(' ')}'`, undefined));
    return { code: 2, forceExit: false };
  }
  const { command, rest } = found;
  try {
    const parsed = parseCommandArgs(command, rest);
    if (parsed.help) {
      io.out(commandHelp(command));
      return { code: 0, forceExit: false };
    }
    const code = await command.run({ values: parsed.values, positionals: parsed.positionals, io });
    return { code, forceExit: command.forceExit === true };
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(usageText(error.message, (error.command ?? command).name));
      return { code: 2, forceExit: false };
    }
    io.err(`error: ${terminalSafe(describeError(error))}`);
    return { code: 1, forceExit: command.forceExit === true };
  }
}

export { describeError };

/** One line from stdin after a question on stderr; end of input counts as no. */
async function confirmOnStdin(question: string): Promise<boolean> {
  const { createInterface } = await import('node:readline');
  const lines = createInterface({ input: process.stdin, terminal: false });
  process.stderr.write(`${question} [y/N] `);
  const answer = await new Promise<string>((resolve) => {
    lines.once('line', resolve);
    lines.once('close', () => resolve(''));
  });
  lines.close();
  return /^\s*y(es)?\s*$/i.test(answer);
}

const io: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: process.env,
  ...(process.stdout.isTTY ? { progress: (text: string) => process.stdout.write(`\r\x1b[2K${text}`) } : {}),
  confirm: confirmOnStdin,
};

const outcome = await main(process.argv.slice(2), io);
process.exitCode = outcome.code;
if (outcome.forceExit) process.exit(outcome.code);
