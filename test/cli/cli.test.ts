/**
 * The CLI as users run it: `node bin/leasehold.js …` in a child process (the
 * compiled dist/, built by `npm test`'s pretest). Covers --help for every
 * command, usage errors (exit 2), `keys create` printing a key that works,
 * remote commands, and `serve` and `worker` stopping cleanly on SIGTERM.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseholdClient } from '../../src/client/leasehold-client.js';
import { waitFor } from '../support/wait-for.js';
import { startLiveCoordinator, type LiveCoordinator } from '../client/live-coordinator.js';
import { BIN, cli } from '../support/run-cli.js';

/** Starts a long-running command; `output()` is everything it printed so far. */
function start(args: readonly string[], env: Record<string, string> = {}): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolveExit) => child.on('exit', (code) => resolveExit(code)));
  return { child, output: () => output, exited };
}

function lastLine(text: string): string {
  const lines = text.trimEnd().split('\n');
  return lines[lines.length - 1] ?? '';
}

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-cli-'));
  dirs.push(dir);
  return dir;
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('cli usage', () => {
  const commands = [
    ['serve'],
    ['worker'],
    ['dev'],
    ['keys', 'create'],
    ['keys', 'list'],
    ['keys', 'revoke'],
    ['enqueue'],
    ['job'],
    ['jobs', 'list'],
    ['jobs', 'show'],
    ['jobs', 'cancel'],
    ['jobs', 'requeue'],
    ['jobs', 'reconcile'],
    ['dead'],
    ['requeue'],
    ['stats'],
    ['purge'],
    ['kinds', 'set'],
    ['kinds', 'list'],
    ['kinds', 'pause'],
    ['kinds', 'resume'],
  ];

  it('prints help for every command and exits 0', async () => {
    const outcomes = await Promise.all([cli(['--help']), ...commands.map((command) => cli([...command, '--help']))]);
    const [overview, ...each] = outcomes;
    expect(overview?.code).toBe(0);
    for (const command of commands) expect(overview?.stdout).toContain(command.join(' '));
    each.forEach((outcome, i) => {
      expect(outcome.code, commands[i]?.join(' ')).toBe(0);
      expect(outcome.stdout).toContain(`usage: leasehold ${commands[i]?.join(' ')}`);
    });
  }, 60_000);

  it('exits 2 with the usage on an unknown flag, an unknown command, a missing option or no command', async () => {
    const [flag, command, missing, none, role] = await Promise.all([
      cli(['stats', '--no-such-flag']),
      cli(['frobnicate']),
      cli(['keys', 'create', '--tenant', 't'], { LEASEHOLD_DB: '' }),
      cli([]),
      cli(['keys', 'create', '--db', join(tempDir(), 'x.db'), '--tenant', 't', '--user', 'u', '--role', 'king']),
    ]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option '--no-such-flag'");
    expect(flag.stderr).toContain("see 'leasehold stats --help'");
    expect(command.code).toBe(2);
    expect(command.stderr).toContain("unknown command 'frobnicate'");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--db is required');
    expect(none.code).toBe(2);
    expect(role.code).toBe(2);
  }, 30_000);

  it('checks --sqlite-busy-timeout-ms: an integer, and only for a SQLite file', async () => {
    const [word, postgres] = await Promise.all([
      cli(['serve', '--db', join(tempDir(), 'x.db'), '--port', '0', '--sqlite-busy-timeout-ms', 'soon']),
      cli(['serve', '--db', 'postgres://nobody@127.0.0.1:1/none', '--port', '0', '--sqlite-busy-timeout-ms', '100']),
    ]);
    expect(word.code).toBe(2);
    expect(word.stderr).toContain('--sqlite-busy-timeout-ms must be an integer');
    expect(postgres.code).toBe(2);
    expect(postgres.stderr).toContain('applies to a SQLite file');
  }, 30_000);
});

describe('purge', () => {
  let live: LiveCoordinator;

  beforeAll(async () => {
    // Two jobs per retention batch, so 25 jobs take two requests (ten batches each at most).
    live = await startLiveCoordinator({ retentionBatchSize: 2, retentionIntervalMs: 0 });
  });

  afterAll(async () => {
    await live.close();
  });

  async function finishJobs(count: number, kind: string): Promise<string[]> {
    const producer = live.client('producer');
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push((await producer.enqueue({ kind, payload: { i } }, { idempotencyKey: `${kind}-${i}` })).job.id);
    for (const lease of await live.store.jobLease({ tenant: 't1', workerId: 'w', kinds: [kind], leaseMs: 30_000, max: count })) {
      await live.store.jobComplete({ tenant: 't1', id: lease.id, token: lease.token });
    }
    return ids;
  }

  it('deletes finished jobs over HTTP with an admin key, a dry run first; progress only on a terminal; the keys are free again', async () => {
    const env = { LEASEHOLD_URL: live.url, LEASEHOLD_KEY: live.keys.admin };
    const ids = await finishJobs(25, 'old');
    const bad = await cli(['purge', '--older-than', 'a week'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--older-than must be a duration');
    expect((await cli(['purge', '--older-than', '1d', '--status', 'unknown'], env)).code).toBe(2);
    const denied = await cli(['purge', '--older-than', '0s', '--key', live.keys.worker], { LEASEHOLD_URL: live.url });
    expect(denied.code).toBe(1);

    const dry = await cli(['purge', '--older-than', '0s', '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toBe('would purge 25 jobs finished more than 0s ago\n');
    const kept = await cli(['purge', '--older-than', '1h', '--json'], env);
    expect(JSON.parse(kept.stdout)).toEqual({ deleted: 0 });

    const purged = await cli(['purge', '--older-than', '0s', '--status', 'succeeded,dead', '--kind', 'old'], env);
    expect(purged.code, purged.stderr).toBe(0);
    // Not a terminal: the result line only, no progress.
    expect(purged.stdout).toBe('purged 25 jobs finished more than 0s ago\n');
    expect(await live.store.jobGet({ scope: { tenant: 't1' }, id: ids[0] ?? '' })).toBeNull();
    const reused = await live.client('producer').enqueue({ kind: 'old', payload: { fresh: true } }, { idempotencyKey: 'old-0' });
    expect(reused.replayed).toBe(false);
    expect(reused.job.id).not.toBe(ids[0]);

    // On a terminal (script(1) gives the command a pseudo-terminal) the running count is shown on one line.
    await finishJobs(25, 'tty');
    const command = [process.execPath, BIN, 'purge', '--older-than', '0s', '--kind', 'tty', '--url', live.url, '--key', live.keys.admin].join(' ');
    const onTerminal = await new Promise<string>((resolvePromise, reject) => {
      const child = spawn('script', ['-qefc', command, '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.on('error', reject);
      child.on('close', () => resolvePromise(output));
    });
    expect(onTerminal).toContain('\r\x1b[2Kpurged 20 jobs…');
    expect(onTerminal).toContain('\r\x1b[2Kpurged 25 jobs…');
    expect(onTerminal).toContain('purged 25 jobs finished more than 0s ago');
  }, 60_000);
});

describe('kinds pause and resume', () => {
  let live: LiveCoordinator;

  beforeAll(async () => {
    live = await startLiveCoordinator();
  });

  afterAll(async () => {
    await live.close();
  });

  it('pauses and resumes a kind as an admin, shown by kinds list; the paused kind is not leased', async () => {
    const env = { LEASEHOLD_URL: live.url, LEASEHOLD_KEY: live.keys.admin };
    const dir = tempDir();
    writeFileSync(join(dir, 'kind.json'), JSON.stringify({ maxConcurrent: 2, rate: { limit: 5, perMs: 1_000 } }));
    expect((await cli(['kinds', 'set', 'sms', '--file', join(dir, 'kind.json')], env)).code).toBe(0);
    const paused = await cli(['kinds', 'pause', 'sms'], env);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toBe('kind sms paused\n');
    const listed = await cli(['kinds', 'list'], env);
    expect(listed.stdout).toContain('sms  PAUSED  max attempts');
    expect(listed.stdout).toContain('max concurrent 2  rate 5 per 1000 ms');
    await live.client('producer').enqueue({ kind: 'sms', payload: {} }, { idempotencyKey: 'cli-sms' });
    expect(await live.store.jobLease({ tenant: 't1', workerId: 'w', leaseMs: 30_000, max: 5 })).toEqual([]);
    const resumed = await cli(['kinds', 'resume', 'sms', '--json'], env);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ kind: 'sms', paused: false, maxConcurrent: 2 });
    expect(await live.store.jobLease({ tenant: 't1', workerId: 'w', leaseMs: 30_000, max: 5 })).toHaveLength(1);
    const unknown = await cli(['kinds', 'pause', 'nope'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not_found');
    const denied = await cli(['kinds', 'pause', 'sms', '--key', live.keys.worker], { LEASEHOLD_URL: live.url });
    expect(denied.code).toBe(1);
    expect((await cli(['kinds', 'pause'], env)).code).toBe(2);
  }, 60_000);
});

describe('keys create', () => {
  it('prints a usable key as its last line and stores only its hash', async () => {
    const dir = tempDir();
    const db = join(dir, 'keys.db');
    const outcome = await cli(['keys', 'create', '--db', db, '--create', '--tenant', 'acme', '--user', 'ops', '--role', 'admin']);
    expect(outcome.code).toBe(0);
    const key = lastLine(outcome.stdout);
    expect(key).toMatch(/^lh_[A-Za-z0-9_-]{20,}$/);
    for (const file of readdirSync(dir)) expect(readFileSync(join(dir, file)).includes(key)).toBe(false);

    const serve = start(['serve', '--db', db, '--port', '0', '--sqlite-busy-timeout-ms', '750']);
    try {
      const url = await waitFor('serve to listen', () => /listening on (http:\/\/[^"\s]+)/.exec(serve.output())?.[1]);
      expect(serve.output()).toContain('"sqliteBusyTimeoutMs":750');
      const client = new LeaseholdClient({ baseUrl: url, apiKey: key });
      const stats = await client.stats();
      expect(stats.counts['queued']).toBe(0);
      await client.close();
      serve.child.kill('SIGTERM');
      expect(await serve.exited).toBe(0);
    } finally {
      serve.child.kill('SIGKILL');
    }
  }, 30_000);
});

describe('remote commands and the worker process', () => {
  let live: LiveCoordinator;

  beforeAll(async () => {
    live = await startLiveCoordinator({ defaultBackoff: { baseMs: 5, maxMs: 20 } });
  });

  afterAll(async () => {
    await live.close();
  });

  it('enqueues, shows a job with its attempts, lists dead jobs and stats; errors are one line, exit 1', async () => {
    const env = { LEASEHOLD_URL: live.url, LEASEHOLD_KEY: live.keys.admin };
    const enqueued = await cli(['enqueue', '--kind', 'cli-kind', '--payload', '{"n":1}', '--max-attempts', '2', '--json'], env);
    expect(enqueued.code, enqueued.stderr).toBe(0);
    const job = JSON.parse(enqueued.stdout) as { id: string; status: string };
    expect(job.status).toBe('queued');

    const shown = await cli(['job', job.id], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(job.id);
    expect(shown.stdout).toContain('no attempts yet');

    const dead = await cli(['dead'], env);
    expect(dead.code, dead.stderr).toBe(0);
    expect(dead.stdout).toContain('no dead jobs');

    const stats = await cli(['stats', '--json'], env);
    expect((JSON.parse(stats.stdout) as { counts: Record<string, number> }).counts['queued']).toBe(1);

    const denied = await cli(['stats', '--url', live.url, '--key', 'lh_wrong-key-000000000000000000']);
    expect(denied.code).toBe(1);
    expect(denied.stderr.trim().split('\n')).toHaveLength(1);
    expect(denied.stderr).toContain('unauthorized (HTTP 401)');
    expect(denied.stderr).not.toContain('lh_wrong-key');
  }, 30_000);

  it('runs handlers from a module and exits 0 on SIGTERM', async () => {
    const dir = tempDir();
    const handlers = join(dir, 'handlers.mjs');
    writeFileSync(handlers, 'export default { double: async (ctx) => ({ doubled: ctx.payload.n * 2, fence: ctx.fence }) };\n');
    const producer = live.client('producer');
    const { job } = await producer.enqueue({ kind: 'double', payload: { n: 21 } });
    const worker = start(['worker', '--url', live.url, '--key', live.keys.worker, '--handlers', handlers, '--concurrency', '2']);
    try {
      const done = await waitFor('the job to succeed', async () => {
        const current = await producer.getJob(job.id);
        return current.status === 'succeeded' ? current : undefined;
      });
      expect(done.result).toEqual({ doubled: 42, fence: 1 });
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toBe(0);
      expect(worker.output()).not.toContain(live.keys.worker);
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 30_000);
});
