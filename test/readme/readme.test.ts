/**
 * Runs README.md's first session as written: its `sh readme-test` blocks in
 * one bash process (set -euo pipefail) in a fresh directory, with its
 * `readme-file=` blocks saved there first. Real processes: the CLI from this
 * checkout's dist/ (an `npx` on PATH that runs `leasehold …` from bin/, as
 * `npx` does in a project that installed the package), `import … from
 * 'leasehold'` resolving to this checkout, a coordinator and a worker started
 * by the README's own commands. The one change to the text: port 8080
 * becomes a free random port. The packed tarball runs the in-process example
 * too (scripts/test-pack.sh).
 */

import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { readmeExamples } from '../support/readme-examples.js';

const ROOT = resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'leasehold-readme-'));
let group: number | undefined;

afterAll(() => {
  // The README starts serve and worker in the background: end the whole process group the shell led.
  if (group !== undefined) {
    try {
      process.kill(-group, 'SIGTERM');
    } catch {
      // Already gone.
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const address = server.address();
  await new Promise((done) => server.close(done));
  return typeof address === 'object' && address !== null ? address.port : 0;
}

it('runs the README examples against a fresh coordinator', async () => {
  const examples = readmeExamples();
  expect(examples.shell.length).toBeGreaterThanOrEqual(4);
  expect(Object.keys(examples.files).sort()).toEqual(['app.mjs', 'handlers.mjs', 'library.mjs']);
  const port = String(await freePort());
  const work = join(dir, 'project');
  mkdirSync(join(work, 'node_modules'), { recursive: true });
  symlinkSync(ROOT, join(work, 'node_modules', 'leasehold'), 'dir');
  // The library example opens its own better-sqlite3 handle, as an application that installed leasehold can.
  symlinkSync(join(ROOT, 'node_modules', 'better-sqlite3'), join(work, 'node_modules', 'better-sqlite3'), 'dir');
  for (const [name, body] of Object.entries(examples.files)) writeFileSync(join(work, name), body);
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'npx'),
    `#!/usr/bin/env bash\n[ "$1" = leasehold ] || { echo "README test: only 'npx leasehold' is available" >&2; exit 127; }\nshift\nexec "${process.execPath}" "${join(ROOT, 'bin', 'leasehold.js')}" "$@"\n`,
  );
  chmodSync(join(bin, 'npx'), 0o755);
  const script = ['set -euo pipefail', ...examples.shell].join('\n').replaceAll('8080', port);

  const outcome = await new Promise<{ code: number | null; stdout: string; stderr: string }>((done, reject) => {
    const child = spawn('bash', ['-c', script], {
      cwd: work,
      detached: true,
      env: { ...process.env, PATH: `${bin}:${process.env['PATH'] ?? ''}`, LEASEHOLD_URL: '', LEASEHOLD_KEY: '', LEASEHOLD_DB: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    group = child.pid;
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    // The background serve and worker keep the pipes open: the script's end is its exit, not the pipes' close.
    child.on('exit', (code) => setTimeout(() => done({ code, stdout, stderr }), 100));
  });

  expect(outcome.code, `${outcome.stdout}\n${outcome.stderr}`).toBe(0);
  expect(outcome.stdout).toContain('"status":"ok"');
  // job --wait: the handler's result and one attempt that succeeded.
  expect(outcome.stdout).toMatch(/ report {2}succeeded/);
  expect(outcome.stdout).toContain('result {"sum":6}');
  expect(outcome.stdout).toContain('kind report saved');
  expect(outcome.stdout).toContain('no dead jobs');
  expect(outcome.stdout).toMatch(/succeeded 1/);
  // The in-process example.
  expect(outcome.stdout).toContain('succeeded {"hello":"Ada"}');
  expect(outcome.stderr).not.toContain('error:');
}, 120_000);
