/**
 * Starts the service's own processes (`main.js api|worker`) from the build,
 * for the measurement script and the tests: each prints JSON lines, and
 * `next(predicate)` resolves on the first line (already printed or to come)
 * that matches, so callers wait for events rather than for time.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** dist/apps/exports/main.js, from this file's place in dist/ (or in the source tree, for type-checked imports). */
export const MAIN = (() => {
  const here = dirname(fileURLToPath(import.meta.url));
  const dist = here.includes(join('dist', 'apps')) ? here : join(here, '..', '..', 'dist', 'apps', 'exports');
  return join(dist, 'main.js');
})();

export type Line = Record<string, unknown>;

export interface AppProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly lines: readonly Line[];
  next(match: (line: Line) => boolean): Promise<Line>;
  readonly exited: Promise<number | string>;
  /** Writes a line to the process's stdin (the worker's --pause-after-rows hook resumes on one). */
  send(line: string): void;
  /** Sends the signal (SIGTERM by default) and resolves on exit. */
  stop(signal?: NodeJS.Signals): Promise<number | string>;
  stderr(): string;
}

export function startApp(args: readonly string[]): AppProcess {
  const child = spawn(process.execPath, [MAIN, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: Line[] = [];
  const waiting: { match: (line: Line) => boolean; resolve: (line: Line) => void }[] = [];
  let partial = '';
  let errors = '';
  child.stdout?.setEncoding('utf8').on('data', (text: string) => {
    partial += text;
    const parts = partial.split('\n');
    partial = parts.pop() ?? '';
    for (const part of parts) {
      let line: Line;
      try {
        line = JSON.parse(part) as Line;
      } catch {
        continue;
      }
      lines.push(line);
      for (const waiter of [...waiting]) {
        if (waiter.match(line)) {
          waiting.splice(waiting.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (text: string) => (errors += text));
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return {
    child,
    pid: child.pid ?? -1,
    lines,
    next(match) {
      const seen = lines.find(match);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise<Line>((resolve, reject) => {
        waiting.push({ match, resolve });
        void exited.then((code) => reject(new Error(`process exited (${code}) before the line; stderr: ${errors.slice(-2000)}`)));
      });
    },
    exited,
    send: (line) => void child.stdin?.write(`${line}\n`),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
    stderr: () => errors,
  };
}

/** CPU seconds (user + system) and peak resident memory of a live process, from /proc (Linux). */
export function processUsage(pid: number): { readonly cpuSeconds: number; readonly rssMiB: number; readonly peakRssMiB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 14 and 15 of stat (utime, stime), counted after the command name; clock ticks of 1/100 s.
  const cpuSeconds = (Number(fields[11]) + Number(fields[12])) / 100;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string): number => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { cpuSeconds, rssMiB: kib('VmRSS') / 1024, peakRssMiB: kib('VmHWM') / 1024 };
}
