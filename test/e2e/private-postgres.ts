/**
 * A private PostgreSQL server for tests that must crash and restart the
 * database: its own data directory in a fresh temp dir, its own port and
 * socket directory, so the shared server at 127.0.0.1:5432 that other test
 * files use is never touched. Durable like production (fsync and
 * synchronous_commit on), trust authentication on 127.0.0.1 only.
 *
 * PostgreSQL refuses to run as root, so under root (CI) every binary runs as
 * the `postgres` user through runuser, and the directory is handed to it.
 * Missing binaries are an error, never a reason to skip.
 *
 * Every pg_ctl call is asynchronous on purpose: the test keeps driving load
 * from the same process while the server is down and coming back.
 */

import { execFile as execFileCallback, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../bench/processes.js';

const execFile = promisify(execFileCallback);

export interface PrivatePostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  readonly url: string;
  readonly port: number;
  /** Kills the server as a crash would (pg_ctl stop -m immediate): no checkpoint, recovery on next start. */
  crash(): Promise<void>;
  /** Starts it again and waits until it accepts connections (after crash recovery). */
  start(): Promise<void>;
  /** The server log, for failure messages. */
  log(): string;
  /** Stops the server (immediate) and removes its directory; safe to call twice. */
  destroy(): Promise<void>;
}

/** The directory holding initdb and pg_ctl: the newest /usr/lib/postgresql/N/bin, pg_config --bindir, or PATH. */
export function findPostgresBinDir(): string {
  const candidates: string[] = [];
  const debianRoot = '/usr/lib/postgresql';
  if (existsSync(debianRoot)) {
    const versions = readdirSync(debianRoot).filter((v) => /^\d+(\.\d+)?$/.test(v));
    versions.sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => join(debianRoot, v, 'bin')));
  }
  const pgConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (pgConfig.status === 0) candidates.push(pgConfig.stdout.trim());
  candidates.push(...(process.env['PATH'] ?? '').split(delimiter).filter(Boolean));
  const found = candidates.find((dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')));
  if (found === undefined) {
    throw new Error('PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin, pg_config --bindir or PATH');
  }
  return found;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = findPostgresBinDir();
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-pg-'));
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  if (asRoot) {
    const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
    const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
    if (!Number.isInteger(uid) || uid <= 0) throw new Error('running as root, and there is no `postgres` user to run PostgreSQL as');
    chownSync(dir, uid, gid);
  }
  const run = async (tool: string, args: readonly string[]): Promise<string> => {
    const [command, fullArgs] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]] : [join(bin, tool), [...args]];
    try {
      const { stdout } = await execFile(command, fullArgs, { encoding: 'utf8', timeout: 90_000 });
      return stdout;
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      throw new Error(`${tool} ${args.join(' ')} failed: ${detail}\n${readLog(logFile).slice(-2000)}`);
    }
  };

  const port = await freePort();
  // --no-sync only spares initdb's own final fsync of the fresh cluster; the server itself runs with fsync on.
  await run('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync']);
  appendFileSync(
    join(data, 'postgresql.conf'),
    [
      '',
      '# leasehold private test server',
      `port = ${port}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${dir}'`,
      'fsync = on',
      'synchronous_commit = on',
      'max_connections = 60',
      'shared_buffers = 32MB',
      '',
    ].join('\n'),
  );
  const start = async (): Promise<void> => {
    await run('pg_ctl', ['-D', data, '-l', logFile, '-w', '-t', '60', 'start']);
  };
  let destroyed = false;
  const server: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async crash() {
      await run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', '-t', '60', 'stop']);
    },
    start,
    log: () => readLog(logFile),
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      if (existsSync(join(data, 'postmaster.pid'))) await server.crash().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await start();
  } catch (error) {
    await server.destroy();
    throw error;
  }
  return server;
}

function readLog(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
