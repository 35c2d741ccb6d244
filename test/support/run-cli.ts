/**
 * The CLI as users run it: `node bin/leasehold.js …` in a child process (the
 * compiled dist/, built by `npm test`'s pretest), with optional text on stdin
 * (a confirmation's answer). stdout is a pipe, never a terminal.
 */

import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

export const BIN = resolve(import.meta.dirname, '../../bin/leasehold.js');

export interface CliOutcome {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function cli(args: readonly string[], env: Record<string, string> = {}, input?: string): Promise<CliOutcome> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
    if (input !== undefined) child.stdin?.end(input);
  });
}
