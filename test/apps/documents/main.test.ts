/**
 * `npm run documents` as a person starts it (the built main.js, configured
 * from the environment): it lists every configuration problem at once and
 * refuses to start, or it serves a review end to end and exits 0 on SIGTERM.
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../support/wait-for.js';
import { INVOICE } from './harness.js';

const MAIN = join(import.meta.dirname, '..', '..', '..', 'dist', 'apps', 'documents', 'main.js');
const dir = mkdtempSync(join(tmpdir(), 'documents-main-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function start(env: Record<string, string>) {
  const child = spawn(process.execPath, [MAIN], { env: { PATH: process.env['PATH'] ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const listening = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const url = /listening on (http:\/\/\S+)/.exec(line)?.[1];
      if (url !== undefined) resolve(url);
    });
    void exited.then((code) => reject(new Error(`exited ${String(code)}: ${stderr}`)));
  });
  // Awaited only by the test that expects the process to listen.
  listening.catch(() => undefined);
  return { child, exited, listening, stderr: () => stderr };
}

describe('npm run documents', () => {
  it('refuses a bad configuration, naming every problem', async () => {
    const run = start({ PORT: 'eighty', DOCUMENTS_API_KEYS: 'acme=short', DOCUMENTS_PLANNER_URL: 'ftp://planner' });
    expect(await run.exited).toBe(1);
    expect(run.stderr()).toMatch(/PORT must be/);
    expect(run.stderr()).toMatch(/at least 16 characters/);
    expect(run.stderr()).toMatch(/DOCUMENTS_PLANNER_URL must be/);
  });

  it('serves a review from submission to the note, and stops on SIGTERM with exit code 0', async () => {
    const run = start({ PORT: '0', DOCUMENTS_DB: join(dir, 'documents.db'), DOCUMENTS_API_KEYS: 'acme=acme-secret-key-0001' });
    const url = await run.listening;
    const headers = { authorization: 'Bearer acme-secret-key-0001', 'content-type': 'application/json' };
    const submitted = await fetch(`${url}/documents`, { method: 'POST', headers, body: JSON.stringify({ title: 'Invoice 42', text: INVOICE }) });
    expect(submitted.status).toBe(202);
    const location = submitted.headers.get('location') ?? '';
    expect(location).toMatch(/^\/documents\/doc_/);
    // Another process's state: polled, bounded (no event crosses the process boundary).
    const view = await waitFor('the review to succeed', async () => {
      const body = (await (await fetch(`${url}${location}`, { headers })).json()) as { job: { status: string }; reviewNote: string | null };
      return body.job.status === 'succeeded' ? body : undefined;
    });
    expect(view.reviewNote).toContain('ACME Components Ltd');
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
  });
});
