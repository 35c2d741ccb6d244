/**
 * The examples README.md marks as runnable: fenced blocks whose info string
 * is `sh readme-test` (shell, run in order in one shell) or
 * `js readme-file=NAME` (a file the shell examples use). The README test runs
 * them; scripts/test-pack.sh reads the `readme-file=app.mjs` block by the same
 * fence syntax, so both run exactly what a reader sees.
 */

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

export interface ReadmeExamples {
  /** The shell blocks, in order. */
  readonly shell: readonly string[];
  /** File name → contents. */
  readonly files: Readonly<Record<string, string>>;
}

const FENCE = /^```(\w+)[ \t]+(readme-test|readme-file=([\w.-]+))[ \t]*\n([\s\S]*?)^```[ \t]*$/gm;

export function readmeExamples(path = resolve(import.meta.dirname, '../../README.md')): ReadmeExamples {
  const text = readFileSync(path, 'utf8');
  const shell: string[] = [];
  const files: Record<string, string> = {};
  for (const match of text.matchAll(FENCE)) {
    const body = match[4] ?? '';
    if (match[2] === 'readme-test') shell.push(body);
    else if (match[3] !== undefined) files[match[3]] = body;
  }
  return { shell, files };
}
