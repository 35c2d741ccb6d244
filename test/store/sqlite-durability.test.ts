/**
 * "A 202 means the job is on disk", seen from outside the process. A SIGKILL
 * cannot tell an fsynced commit from one still in the page cache (the kernel
 * keeps the cache), so these tests look at the syncs themselves:
 *
 * - a real `leasehold serve` runs under `strace -f -e trace=fsync,fdatasync`;
 *   enqueues are sent one at a time, and each one's 202 must have been
 *   preceded, within its own request, by a successful sync of the WAL file;
 * - a power cut (device mapper's dm-flakey dropping unsynced writes) where
 *   the machine has device mapper; elsewhere it reports itself skipped.
 *
 * Without strace the first test is skipped with the reason; CI installs
 * strace and names it in LEASEHOLD_REQUIRE, so there it must run.
 */

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect } from 'vitest';
import { CLI, freePort } from '../../bench/processes.js';
import { LeaseholdClient } from '../../src/client/index.js';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { itNeeds } from '../support/requirements.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** null when strace can trace a child here, else why not. */
function whyNoStrace(): string | null {
  const probe = spawnSync('strace', ['-f', '-e', 'trace=fsync', '-o', '/dev/null', process.execPath, '-e', '0'], { encoding: 'utf8' });
  if (probe.error !== undefined) return `strace could not be started (${probe.error.message}); install it (apt-get install strace)`;
  if (probe.status !== 0) return `strace cannot trace here (exit ${probe.status}): ${probe.stderr.trim().slice(0, 200)}`;
  return null;
}

/**
 * A clock in wall-clock microseconds, the clock `strace -ttt` prints, for the next few milliseconds. The
 * wall clock moves against performance's (monotonic) clock by milliseconds on a VM (up to 4 ms within
 * seconds here), as much as a request takes, so the two are matched afresh for each request: at a tick of
 * Date.now(), the wall clock's microseconds are known, and performance's clock measures from there.
 */
function wallClock(): () => number {
  const start = Date.now();
  let tick = Date.now();
  while (tick === start) tick = Date.now();
  const offset = tick * 1000 - performance.now() * 1000;
  return () => Math.round(performance.now() * 1000 + offset);
}

interface Sync {
  readonly at: number;
  readonly file: string;
}

function parseSyncs(trace: string): Sync[] {
  const syncs: Sync[] = [];
  // "1234 1796109728.617440 fdatasync(3</tmp/…/jobs.db-wal>) = 0"
  for (const match of trace.matchAll(/^\d+\s+(\d+)\.(\d{6}) f(?:data)?sync\(\d+<([^>]*)>\)\s+= 0$/gm)) {
    syncs.push({ at: Number(match[1]) * 1_000_000 + Number(match[2]), file: match[3] ?? '' });
  }
  return syncs;
}

itNeeds('strace', whyNoStrace())(
  'syncs the WAL before every 202: a coordinator under strace, one enqueue at a time',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-fsync-'));
    dirs.push(dir);
    const db = join(dir, 'jobs.db');
    const traceFile = join(dir, 'trace.txt');
    const apiKey = newApiKey();
    const setup = SqliteStore.open({ path: db });
    await setup.apiKeyInsert({ id: 'fsync-producer', tenant: 't1', user: 'alice', role: 'producer', keyHash: hashApiKey(apiKey) });
    await setup.close();

    const port = await freePort();
    const child = spawn(
      'strace',
      [
        '-f',
        '-ttt',
        '-y',
        '-e',
        'trace=fsync,fdatasync',
        '-o',
        traceFile,
        process.execPath,
        CLI,
        'serve',
        '--db',
        db,
        '--port',
        String(port),
        '--host',
        '127.0.0.1',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
    await new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer): void => {
        output += chunk.toString();
        if (/listening on http/.test(output)) resolve();
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      void exited.then((code) => reject(new Error(`serve under strace exited (${code}) before it listened:\n${output.slice(-2000)}`)));
    });

    const client = new LeaseholdClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey, connections: 1 });
    const windows: { readonly sent: number; readonly answered: number }[] = [];
    try {
      for (let i = 0; i < 30; i++) {
        const now = wallClock();
        const sent = now();
        await client.enqueue({ kind: 'email', payload: { n: i } }, { idempotencyKey: `fsync-${i}` });
        windows.push({ sent, answered: now() });
      }
    } finally {
      await client.close();
      // The coordinator is strace's child: stop it, and strace ends with it.
      const traced = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8')
        .trim()
        .split(/\s+/)
        .map(Number)
        .filter((pid) => pid > 0);
      for (const pid of traced) process.kill(pid, 'SIGTERM');
      if (traced.length === 0) child.kill('SIGTERM');
      await exited;
    }

    const walSyncs = parseSyncs(readFileSync(traceFile, 'utf8')).filter((sync) => sync.file.endsWith('jobs.db-wal'));
    const unsynced = windows.filter((w) => !walSyncs.some((sync) => sync.at >= w.sent && sync.at <= w.answered));
    console.log(
      `fsync: ${windows.length} acknowledged enqueues, ${walSyncs.length} WAL syncs in the whole run, ${windows.length - unsynced.length} answers preceded by a WAL sync within their request`,
    );
    expect(walSyncs.length).toBeGreaterThanOrEqual(windows.length);
    expect(unsynced).toEqual([]);
  },
  60_000,
);

/** null when a dm-flakey device could be set up here, else why not. */
function whyNoDeviceMapper(): string | null {
  if (process.getuid?.() !== 0) return 'not root';
  if (!existsSync('/dev/mapper/control')) return 'no /dev/mapper/control (the kernel offers no device mapper to this container)';
  const targets = spawnSync('dmsetup', ['targets'], { encoding: 'utf8' });
  if (targets.error !== undefined || targets.status !== 0)
    return `dmsetup targets failed: ${(targets.stderr ?? String(targets.error)).trim().split('\n')[0] ?? ''}`;
  if (!/^flakey\b/m.test(targets.stdout)) return 'the kernel has no dm-flakey target';
  // A machine that gets this far can run the power-cut test; it is not written yet, so say so rather than pass.
  return 'dm-flakey is available, but the power-cut test is not implemented for it yet';
}

itNeeds('device-mapper', whyNoDeviceMapper())('keeps every acknowledged job across a power cut (dm-flakey drops unsynced writes)', () => {
  throw new Error('unreachable: whyNoDeviceMapper() never returns null');
});
