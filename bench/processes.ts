/**
 * Process plumbing for benchmarks and end-to-end tests: start `leasehold
 * serve` and `leasehold worker` as real child processes, wait for the line
 * that says they are up, create keys through the CLI, and stop them.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

/** The repository root, from dist/bench/ or bench/. */
export const ROOT = (() => {
  const here = dirname(fileURLToPath(import.meta.url));
  return here.includes(`${join('dist', 'bench')}`) ? join(here, '..', '..') : join(here, '..');
})();

export const CLI = join(ROOT, 'bin', 'leasehold.js');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export function createKey(db: string, tenant: string, user: string, role: 'producer' | 'worker' | 'admin'): string {
  const run = spawnSync(process.execPath, [CLI, 'keys', 'create', '--db', db, '--create', '--tenant', tenant, '--user', user, '--role', role], {
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`keys create failed: ${run.stderr}`);
  const lines = run.stdout.trim().split('\n');
  const key = lines[lines.length - 1];
  if (key === undefined || key === '') throw new Error('keys create printed no key');
  return key;
}

/** Children still running: a bench stopped by Ctrl-C or kill takes them with it instead of leaving them behind. */
const liveChildren = new Set<ChildProcess>();
let reapingInstalled = false;

function reapOnExit(): void {
  if (reapingInstalled) return;
  reapingInstalled = true;
  const killAll = (signal: NodeJS.Signals): void => {
    for (const child of liveChildren) child.kill(signal);
  };
  process.once('exit', () => killAll('SIGKILL'));
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      killAll('SIGTERM');
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
  }
}

export interface RunningProcess {
  readonly child: ChildProcess;
  readonly output: () => string;
  /** Resolves with the exit code (or signal name). */
  readonly exited: Promise<number | string>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/** Makes a child spawned elsewhere (e.g. by bench/soak-embedded.ts) go with this process when it is stopped or exits. */
export function adoptChild(child: ChildProcess): void {
  reapOnExit();
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
}

export function startProcess(
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; readyPattern?: RegExp } = {},
): {
  process: RunningProcess;
  ready: Promise<string>;
} {
  return startScript(CLI, args, options);
}

/** A node process running `script` (a built module, e.g. under dist/bench/), with the same output keeping and readiness as startProcess. */
export function startScript(
  script: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; readyPattern?: RegExp } = {},
): {
  process: RunningProcess;
  ready: Promise<string>;
} {
  const child = spawn(process.execPath, [script, ...args], {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  adoptChild(child);
  let output = '';
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const ready = new Promise<string>((resolve, reject) => {
    let pattern = options.readyPattern;
    const onData = (chunk: Buffer): void => {
      // Only the tail is kept, and the ready pattern is looked for until it is found: a coordinator logs
      // two lines per job at info, and scanning all of it on every chunk cost the bench more CPU than it measured.
      output = (output + chunk.toString()).slice(-65_536);
      if (pattern !== undefined) {
        const match = pattern.exec(output);
        if (match !== null) {
          pattern = undefined;
          resolve(match[1] ?? match[0]);
        }
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    if (pattern === undefined) resolve('');
    void exited.then((code) => reject(new Error(`process exited (${code}) before it was ready:\n${output.slice(-2000)}`)));
  });
  const running: RunningProcess = {
    child,
    output: () => output,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  return { process: running, ready };
}

export async function startCoordinator(
  db: string,
  extraArgs: readonly string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<{ url: string; process: RunningProcess }> {
  const port = await freePort();
  const started = startProcess(['serve', '--db', db, '--port', String(port), '--host', '127.0.0.1', ...extraArgs], {
    env,
    readyPattern: /listening on (http:\/\/[^\s"]+)/,
  });
  const url = await started.ready;
  return { url: url.replace(/\/$/, ''), process: started.process };
}

export function startWorker(options: {
  url: string;
  key: string;
  handlers: string;
  concurrency: number;
  workerId?: string;
  extraArgs?: readonly string[];
  env?: NodeJS.ProcessEnv;
}): RunningProcess & { readonly ready: Promise<string> } {
  const args = ['worker', '--url', options.url, '--key', options.key, '--handlers', options.handlers, '--concurrency', String(options.concurrency)];
  if (options.workerId !== undefined) args.push('--worker-id', options.workerId);
  const started = startProcess([...args, ...(options.extraArgs ?? [])], { env: options.env ?? {}, readyPattern: /worker started/ });
  // Callers that never await readiness must not see an unhandled rejection when the worker is killed.
  started.ready.catch(() => undefined);
  return Object.assign(started.process, { ready: started.ready });
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

/** User plus system CPU milliseconds a process has used so far (from /proc, so Linux only). */
export function processCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

/** The time `pid` has spent on a CPU, in microseconds, from /proc/<pid>/schedstat (nanoseconds, where /proc/<pid>/stat counts 10 ms ticks; Linux only). */
export function processOnCpuUs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1000;
}

/** The CPU milliseconds of every process of this machine named `name` (e.g. a local PostgreSQL server's backends). */
export function processesCpuMs(name: string): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) total += processCpuMs(Number(entry));
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return total;
}
