/**
 * The CLI facing untrusted text and secrets, as users run it (child
 * processes of bin/leasehold.js over dist/): worker ids, error codes and
 * messages with terminal escapes are printed escaped; `leasehold dev` keeps
 * its keys across restarts in a 0600 file beside its database; a database URL
 * loses every credential before it is logged.
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devKeysPath } from '../../src/cli/dev-keys.js';
import { describeDb } from '../../src/cli/open-store.js';
import { terminalSafe } from '../../src/cli/terminal-text.js';
import { startLiveCoordinator, type LiveCoordinator } from '../client/live-coordinator.js';

const BIN = resolve(import.meta.dirname, '../../bin/leasehold.js');
/** ESC, BEL, CSI (C1), DEL and a bidi override: each could rewrite what an operator sees. */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/;

function cli(args: readonly string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

describe('cli and untrusted text', () => {
  let live: LiveCoordinator;
  beforeAll(async () => {
    live = await startLiveCoordinator();
  });
  afterAll(async () => {
    await live.close();
  });

  it('prints worker ids, error codes and messages with control characters escaped', async () => {
    const { job } = await live.client('producer').enqueue({ kind: 'evil', payload: {}, maxAttempts: 1 });
    const worker = live.client('worker');
    const [leased] = await worker.lease({ workerId: 'w\u001b]0;owned\u0007\u202e', kinds: ['evil'] });
    expect(leased?.id).toBe(job.id);
    await worker.fail(job.id, { token: leased?.token ?? '', error: { code: 'e\u001b[2J\u009b31m', message: 'gone \u009b2K\u007f' }, retryable: false });
    const env = { LEASEHOLD_URL: live.url, LEASEHOLD_KEY: live.keys.admin };
    const [shown, dead, json] = await Promise.all([cli(['job', job.id], env), cli(['dead'], env), cli(['job', job.id, '--json'], env)]);
    for (const outcome of [shown, dead, json]) {
      expect(outcome.code, outcome.stderr).toBe(0);
      expect(outcome.stdout).not.toMatch(RAW);
    }
    expect(shown.stdout).toContain('w\\x1b]0;owned\\x07\\u202e');
    expect(shown.stdout).toContain('e\\x1b[2J\\x9b31m');
    expect(dead.stdout).toContain('e\\x1b[2J\\x9b31m (permanent): gone \\x9b2K');
    const parsed = JSON.parse(json.stdout) as { job: { lastError: { code: string } }; attempts: { workerId: string }[] };
    // --json stays the same JSON: the escapes decode to the original text.
    expect(parsed.job.lastError.code).toBe('e\u001b[2J\u009b31m');
    expect(parsed.attempts[0]?.workerId).toBe('w\u001b]0;owned\u0007\u202e');
  }, 60_000);

  it('escapes every C0 and C1 control character, DEL and bidi overrides, and leaves other text alone', () => {
    expect(terminalSafe('a\u0000b\u001bc\u007fd\u0085e\u009bf\u2028g\u202eh\u2066i')).toBe('a\\x00b\\x1bc\\x7fd\\x85e\\x9bf\\u2028g\\u202eh\\u2066i');
    expect(terminalSafe('ünïcode — fine ✓')).toBe('ünïcode — fine ✓');
  });
});

describe('database URLs in logs', () => {
  it('masks the password in the user info and in the query string', () => {
    const shown = describeDb('postgres://app:s3cret@db.internal:5432/jobs?sslmode=require&password=p4ss&sslpassword=k3y');
    expect(shown).not.toMatch(/s3cret|p4ss|k3y/);
    expect(shown).toContain('app:***@db.internal:5432/jobs');
    expect(shown).toContain('sslmode=require');
    expect(describeDb('postgresql://db/jobs?PassWord=x1')).not.toContain('x1');
  });
});

describe('leasehold dev keys', () => {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-dev-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Starts `dev` until it prints its keys, then stops it with SIGTERM. */
  async function devKeys(db: string): Promise<{ admin: string; worker: string }> {
    const child = spawn(process.execPath, [BIN, 'dev', '--db', db, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keys = await new Promise<{ admin: string; worker: string }>((resolveKeys, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const admin = /admin key\s+(\S+)/.exec(output)?.[1];
        const worker = /worker key\s+(\S+)/.exec(output)?.[1];
        if (admin !== undefined && worker !== undefined) resolveKeys({ admin, worker });
      });
      child.on('exit', (code) => reject(new Error(`dev exited ${code} before printing keys: ${output}`)));
    });
    const exited = new Promise((resolveExit) => child.on('exit', resolveExit));
    child.kill('SIGTERM');
    await exited;
    return keys;
  }

  it('keeps its admin and worker keys across restarts, in a 0600 file beside the database', async () => {
    const db = join(dir, 'dev.db');
    const first = await devKeys(db);
    const second = await devKeys(db);
    expect(second).toEqual(first);
    expect(statSync(devKeysPath(db)).mode & 0o777).toBe(0o600);
  }, 60_000);
});
