/**
 * The operator commands against a running coordinator (a real HTTP server
 * over SQLite, the compiled CLI in a child process): `jobs list|show|cancel|
 * requeue|reconcile`, `dead`, `stats` (and --watch), `enqueue --file`. Each
 * is run for its table and for --json; bulk actions by filter ask for a
 * confirmation on stdin unless --yes; exit codes are 0, 1, 2 and 3 as
 * documented (docs/CLI.md).
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobDetail } from '../../src/protocol/schemas.js';
import type { JobList, Stats } from '../../src/protocol/schemas.js';
import { startLiveCoordinator, type LiveCoordinator } from '../client/live-coordinator.js';
import { DEAD_JOB_WORKER, deadJobs, unknownJobs } from '../support/dead-jobs.js';
import { BIN, cli } from '../support/run-cli.js';

/** What a command prints on a terminal: run under `script`, which gives it a pty. */
function runInPty(args: readonly string[], env: Record<string, string>): Promise<string> {
  const command = [process.execPath, ...args].map((arg) => `'${arg.replace(/'/g, "'\\''")}'`).join(' ');
  return new Promise((resolvePromise, reject) => {
    const child = spawn('script', ['-q', '-e', '-c', command, '/dev/null'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', () => resolvePromise(output));
  });
}

/** The lines of a table, and the column each header starts at. */
function table(stdout: string): { header: string; rows: string[]; column: (name: string) => number } {
  const [header = '', ...rows] = stdout.trimEnd().split('\n');
  return { header, rows, column: (name) => header.indexOf(name) };
}

/** Every row has a cell starting at each header's column (the table is aligned). */
function expectAligned(stdout: string, headers: readonly string[]): void {
  const { rows, column } = table(stdout);
  for (const name of headers.slice(1)) {
    const at = column(name);
    expect(at, name).toBeGreaterThan(0);
    for (const row of rows) if (row.length > at) expect(row.slice(at - 2, at), `${name} in ${row}`).toBe('  ');
  }
}

describe('operator commands', () => {
  let live: LiveCoordinator;
  let env: Record<string, string>;
  let mailIds: string[];
  let thumbIds: string[];
  let dir: string;

  beforeAll(async () => {
    live = await startLiveCoordinator();
    env = { LEASEHOLD_URL: live.url, LEASEHOLD_KEY: live.keys.admin };
    dir = mkdtempSync(join(tmpdir(), 'leasehold-operator-'));
    const producer = live.client('producer');
    for (let i = 0; i < 3; i += 1) await producer.enqueue({ kind: 'report', payload: { n: i } });
    mailIds = await deadJobs(producer, live.client('worker'), 'mail', 4, 'smtp_down', 'relay refused', { to: 'ada@example.org' });
    thumbIds = await deadJobs(producer, live.client('worker'), 'thumb', 2, 'bad_image', 'not a PNG');
  });
  afterAll(async () => {
    await live.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('jobs list: an aligned table, filters, one JSON page, and NDJSON over every page with --all', async () => {
    const all = await cli(['jobs', 'list'], env);
    expect(all.code, all.stderr).toBe(0);
    expect(table(all.stdout).rows).toHaveLength(9);
    expectAligned(all.stdout, ['ID', 'KIND', 'STATUS', 'ATTEMPTS', 'CREATED', 'LAST ERROR']);

    const filtered = await cli(['jobs', 'list', '--status', 'dead', '--error-code', 'smtp_down', '--since', '1h'], env);
    expect(
      table(filtered.stdout)
        .rows.map((row) => row.split(' ')[0])
        .sort(),
    ).toEqual([...mailIds].sort());
    expect(filtered.stdout).toContain('smtp_down (permanent): relay refused');
    expect((await cli(['jobs', 'list', '--until', '2000-01-01T00:00:00Z'], env)).stdout.trim()).toBe('no jobs match');

    const page = await cli(['jobs', 'list', '--limit', '4', '--json'], env);
    const document = JSON.parse(page.stdout) as JobList;
    expect(document.jobs).toHaveLength(4);
    expect(document.nextCursor).not.toBeNull();
    const first = await cli(['jobs', 'list', '--limit', '4'], env);
    const cursor = /^more: --cursor (\S+)$/m.exec(first.stdout)?.[1] ?? '';
    expect(cursor).not.toBe('');
    const next = await cli(['jobs', 'list', '--limit', '4', '--cursor', cursor], env);
    expect(table(next.stdout).rows.filter((row) => !row.startsWith('more:'))).toHaveLength(4);

    const stream = await cli(['jobs', 'list', '--all', '--limit', '2', '--json'], env);
    const lines = stream.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(9);
    expect(new Set(lines.map((line) => (JSON.parse(line) as { id: string }).id)).size).toBe(9);

    const bad = await cli(['jobs', 'list', '--status', 'lost'], env);
    expect(bad.code).toBe(2);
    expect((await cli(['jobs', 'list', '--since', 'yesterday'], env)).code).toBe(2);
  });

  it('jobs show: the fields, last error with its class, attempts and payload; --json is the detail document', async () => {
    const id = mailIds[0] ?? '';
    const shown = await cli(['jobs', 'show', id], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/last error\s+smtp_down \(permanent\): relay refused/);
    expect(shown.stdout).toContain(DEAD_JOB_WORKER);
    expect(shown.stdout).toContain('"to": "ada@example.org"');
    const json = JSON.parse((await cli(['jobs', 'show', id, '--json'], env)).stdout) as JobDetail;
    expect(json.job.id).toBe(id);
    expect(json.payload).toEqual({ to: 'ada@example.org' });
    expect(json.attempts).toHaveLength(1);
    const missing = await cli(['jobs', 'show', '01a00000-0000-7000-8000-000000000000'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('not_found');
  });

  it('dead: a table of dead jobs with filters, and --json', async () => {
    const dead = await cli(['dead', '--error-code', 'bad_image'], env);
    expect(dead.code, dead.stderr).toBe(0);
    expect(table(dead.stdout).rows).toHaveLength(2);
    expectAligned(dead.stdout, ['ID', 'KIND', 'ATTEMPTS', 'FINISHED', 'LAST ERROR']);
    const json = JSON.parse((await cli(['dead', '--json'], env)).stdout) as JobList;
    expect(json.jobs).toHaveLength(6);
    expect((await cli(['dead', '--status', 'queued'], env)).code).toBe(2);
  });

  it('stats: a table, --json, and --watch refreshing (NDJSON with --json)', async () => {
    const shown = await cli(['stats'], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^STATUS\s+COUNT$/m);
    expect(shown.stdout).toMatch(/^queued\s+3$/m);
    expect(shown.stdout).toMatch(/^dead\s+6$/m);
    expect(shown.stdout).toMatch(/^oldest available\s+\d+ ms$/m);
    expect((JSON.parse((await cli(['stats', '--json'], env)).stdout) as Stats).counts['dead']).toBe(6);
    const watched = await cli(['stats', '--watch', '--count', '2', '--interval-ms', '100', '--json'], env);
    const samples = watched.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Stats);
    expect(samples).toHaveLength(2);
    const tables = await cli(['stats', '--watch', '--count', '2', '--interval-ms', '100'], env);
    expect(tables.stdout.match(/^STATUS\s+COUNT$/gm)).toHaveLength(2);
    expect(tables.stdout).not.toContain('\x1b');
  });

  it('jobs requeue by id: a table per job, exit 3 when some were refused', async () => {
    const one = await cli(['jobs', 'requeue', thumbIds[0] ?? ''], env);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/changed\s+queued/);
    const mixed = await cli(['jobs', 'requeue', thumbIds[1] ?? '', thumbIds[0] ?? '', '--json'], env);
    expect(mixed.code).toBe(3);
    const answer = JSON.parse(mixed.stdout) as { changed: number; total: number; results: { result: string; detail: string }[] };
    expect(answer).toMatchObject({ changed: 1, total: 2 });
    expect(answer.results[1]?.detail).toContain('not_dead');
    expect((await cli(['jobs', 'requeue', thumbIds[0] ?? ''], env)).code).toBe(1);
  });

  it('jobs requeue --all-matching: asks first (no answer changes nothing), then requeues what the filter matches', async () => {
    const filter = ['--kind', 'mail', '--error-code', 'smtp_down'];
    const unanswered = await cli(['jobs', 'requeue', '--all-matching', ...filter], env);
    expect(unanswered.code).toBe(1);
    expect(unanswered.stderr).toContain('requeue 4 jobs?');
    expect(unanswered.stderr).toContain('not_confirmed');
    const declined = await cli(['jobs', 'requeue', '--all-matching', ...filter], env, 'n\n');
    expect(declined.code).toBe(1);
    expect((await live.client('admin').listJobs({ status: 'dead', kind: 'mail' })).jobs).toHaveLength(4);

    const confirmed = await cli(['jobs', 'requeue', '--all-matching', ...filter, '--limit', '3'], env, 'y\n');
    expect(confirmed.code, confirmed.stderr).toBe(0);
    expect(confirmed.stdout.trim()).toBe('requeue: matched 3, changed 3');
    const rest = await cli(['jobs', 'requeue', '--all-matching', ...filter, '--yes', '--json'], env);
    expect(JSON.parse(rest.stdout)).toEqual({ matched: 1, changed: 1 });
    const none = await cli(['jobs', 'requeue', '--all-matching', ...filter, '--yes'], env);
    expect(none.code).toBe(0);
    expect(none.stdout.trim()).toBe('no jobs match; nothing changed');
    expect((await live.client('admin').listJobs({ status: 'dead', kind: 'mail' })).jobs).toHaveLength(0);
  });

  it('jobs cancel and reconcile: by filter with --yes, usage errors exit 2, a refused job exits 1', async () => {
    const cancelled = await cli(['jobs', 'cancel', '--all-matching', '--kind', 'report', '--status', 'queued', '--yes'], env);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stdout.trim()).toBe('cancel: matched 3, changed 3');
    expect((await live.client('admin').listJobs({ status: 'cancelled' })).jobs).toHaveLength(3);
    const wrongStatus = await cli(['jobs', 'cancel', '--all-matching', '--status', 'dead', '--yes'], env);
    expect(wrongStatus.code).toBe(1);
    expect(wrongStatus.stderr).toContain('invalid_request');

    expect((await cli(['jobs', 'reconcile', mailIds[0] ?? ''], env)).code).toBe(2);
    expect((await cli(['jobs', 'reconcile', '--all-matching', '--outcome', 'maybe'], env)).code).toBe(2);
    expect((await cli(['jobs', 'cancel'], env)).code).toBe(2);
    expect((await cli(['jobs', 'cancel', mailIds[0] ?? '', '--all-matching'], env)).code).toBe(2);
    expect((await cli(['jobs', 'cancel', mailIds[0] ?? '', '--kind', 'mail'], env)).code).toBe(2);
    const notUnknown = await cli(['jobs', 'reconcile', mailIds[0] ?? '', '--outcome', 'dead'], env);
    expect(notUnknown.code).toBe(1);
    expect(notUnknown.stdout).toContain('not_unknown');
    const noneUnknown = await cli(['jobs', 'reconcile', '--all-matching', '--outcome', 'dead', '--json'], env);
    expect(JSON.parse(noneUnknown.stdout)).toEqual({ matched: 0, changed: 0 });

    const [first = '', ...others] = await unknownJobs(live.client('producer'), live.client('worker'), 'charge', 3);
    const one = await cli(['jobs', 'reconcile', first, '--outcome', 'succeeded'], env);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/changed\s+succeeded/);
    const rest = await cli(['jobs', 'reconcile', '--all-matching', '--kind', 'charge', '--outcome', 'dead', '--yes'], env);
    expect(rest.stdout.trim()).toBe('reconcile: matched 2, changed 2');
    for (const id of others) expect((await live.client('admin').getJob(id)).status).toBe('dead');
  });

  it('enqueue --file: batches, a summary of accepted, replayed and refused lines, exit 3 when some were refused', async () => {
    const file = join(dir, 'jobs.ndjson');
    const lines = [
      JSON.stringify({ kind: 'import', payload: { row: 1 } }),
      JSON.stringify({ kind: 'import', payload: { row: 2 }, priority: 5 }),
      '',
      '{"kind": "import", "payload": ',
      JSON.stringify({ kind: 'import', payload: {}, colour: 'red' }),
      JSON.stringify({ kind: 'no spaces allowed', payload: {} }),
      JSON.stringify({ kind: 'import', payload: { row: 3 }, idempotencyKey: 'row-3' }),
    ];
    writeFileSync(file, `${lines.join('\n')}\n`);
    const first = await cli(['enqueue', '--file', file], env);
    expect(first.code, first.stderr).toBe(3);
    expect(first.stdout.trim()).toBe('6 lines: 3 accepted, 0 replayed, 3 refused');
    expect(first.stdout).not.toContain('\r');
    expect(first.stderr).toContain('line 4: invalid_json');
    expect(first.stderr).toContain('line 5: invalid_line: unknown field "colour"');
    expect(first.stderr).toContain('line 6: invalid_request');
    const again = await cli(['enqueue', '--file', file, '--json'], env);
    expect(again.code).toBe(3);
    expect(JSON.parse(again.stdout)).toMatchObject({ lines: 6, accepted: 0, replayed: 3, refused: 3 });
    expect((await live.client('admin').listJobs({ kind: 'import' })).jobs).toHaveLength(3);

    const good = join(dir, 'good.ndjson');
    writeFileSync(good, Array.from({ length: 1200 }, (_, i) => JSON.stringify({ kind: 'bulk-load', payload: { i } })).join('\n'));
    const loaded = await cli(['enqueue', '--file', good], env);
    expect(loaded.code, loaded.stderr).toBe(0);
    expect(loaded.stdout.trim()).toBe('1200 lines: 1200 accepted, 0 replayed, 0 refused');
    // On a terminal (a pty from util-linux's script), the same command draws a progress bar.
    const tty = join(dir, 'tty.ndjson');
    writeFileSync(tty, Array.from({ length: 30 }, (_, i) => JSON.stringify({ kind: 'tty-load', payload: { i } })).join('\n'));
    const onTerminal = await runInPty([BIN, 'enqueue', '--file', tty], env);
    expect(onTerminal).toContain('\r\x1b[2K[##############################] 100%');
    expect(onTerminal).toContain('30 lines: 30 accepted, 0 replayed, 0 refused');
    const bad = join(dir, 'bad.ndjson');
    writeFileSync(bad, 'not json\n[]\n');
    expect((await cli(['enqueue', '--file', bad], env)).code).toBe(1);
    expect((await cli(['enqueue', '--file', join(dir, 'missing.ndjson')], env)).code).toBe(1);
    expect((await cli(['enqueue', '--file', good, '--kind', 'x'], env)).code).toBe(2);
  });
});

describe('docs/CLI.md', () => {
  it('documents every command the CLI lists and the four exit codes, which the overview names too', async () => {
    const doc = readFileSync(resolve(import.meta.dirname, '../../docs/CLI.md'), 'utf8');
    const help = await cli(['--help']);
    const names = help.stdout
      .split('commands:\n')[1]
      ?.split('\n\n')[0]
      ?.split('\n')
      .map((line) => /^ {2}(\S+(?: [a-z]+)?)\s{2,}/.exec(line)?.[1])
      .filter((name): name is string => name !== undefined);
    expect(names?.length).toBeGreaterThan(15);
    for (const name of names ?? []) expect(doc, name).toMatch(new RegExp(`\`${name}[ \`]`));
    for (const code of ['0', '1', '2', '3']) expect(doc).toMatch(new RegExp(`^\\| ${code} \\|`, 'm'));
    expect(help.stdout).toContain('Exit codes: 0 success, 1 failure, 2 wrong usage, 3 partial');
  });
});
