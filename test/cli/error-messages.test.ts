/**
 * Every error a user meets in the first hour says what happened, to what, and
 * what to do: one table, one row per case, each run for real (the CLI as a
 * child process, a coordinator over a SQLite file, PostgreSQL when
 * DATABASE_URL is set) and checked for the value it names and the fix it
 * suggests. The wrong-password row is the one case this machine's server
 * (trust authentication) cannot produce: it feeds the driver's own error
 * type, with the SQLSTATE the server sends, to the store's translation.
 */

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgTarget, translatePgConnectError } from '../../src/store/postgres/errors.js';
import { bearer, startCoordinator, type Harness } from '../support/http-fixtures.js';

const BIN = resolve(import.meta.dirname, '../../bin/leasehold.js');
const DATABASE_URL = process.env['DATABASE_URL'] ?? '';
const PG = DATABASE_URL !== '';
const NO_PERMISSION_ROLE = 'lh_no_create_privilege';

interface Outcome {
  readonly code: number | null;
  readonly stderr: string;
}

function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, LEASEHOLD_URL: '', LEASEHOLD_KEY: '', LEASEHOLD_DB: '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stderr }));
  });
}

function pgUrl(change: (url: URL) => void): string {
  const url = new URL(DATABASE_URL);
  change(url);
  return url.toString();
}

const dir = mkdtempSync(join(tmpdir(), 'leasehold-errors-'));
let harness: Harness;

async function listen(): Promise<Server> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return server;
}

function portOf(server: Server): number {
  const address = server.address();
  return typeof address === 'object' && address !== null ? address.port : 0;
}

// Taken before the table is built, which names them: one port held busy, one known to be closed.
const busy = await listen();
const busyPort = portOf(busy);
const closed = await listen();
const closedPort = portOf(closed);
await new Promise((done) => closed.close(done));

beforeAll(async () => {
  writeFileSync(join(dir, 'syntax.mjs'), 'export default {\n  a: async () => {\n    return {;\n  },\n};\n');
  writeFileSync(join(dir, 'throws.mjs'), 'const x = 1;\nnull.boom;\nexport default { a: () => x };\n');
  writeFileSync(join(dir, 'kind.json'), '{\n  "maxAttempts": 3,\n  "leaseMs": 1000,\n}\n');
  harness = await startCoordinator();
  if (PG) {
    const admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    try {
      // A login role with no CREATE privilege on the database: creating leasehold's schema must fail with 42501.
      await admin.query(
        `DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${NO_PERMISSION_ROLE}') THEN CREATE ROLE ${NO_PERMISSION_ROLE} LOGIN; END IF; END$$`,
      );
    } finally {
      await admin.end();
    }
  }
});

afterAll(async () => {
  await new Promise((done) => busy.close(done));
  await harness.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Row {
  readonly name: string;
  /** Set when the row needs something this run lacks; the row then reports itself skipped. */
  readonly needs?: 'postgres';
  readonly exitCode: number;
  readonly run: () => Promise<Outcome>;
  /** Every pattern must appear in stderr: the value named and the fix suggested. */
  readonly says: readonly (string | RegExp)[];
  /** The whole of stderr has this many lines. */
  readonly lines?: number;
}

const keysCreate = (db: string): Promise<Outcome> => cli(['keys', 'create', '--db', db, '--tenant', 't', '--user', 'u', '--role', 'admin']);

const ROWS: readonly Row[] = [
  {
    name: 'PostgreSQL: unknown database',
    needs: 'postgres',
    exitCode: 1,
    run: () => keysCreate(pgUrl((u) => (u.pathname = '/leasehold_no_such_database'))),
    says: ['pg_unknown_database', 'no database "leasehold_no_such_database"', 'createdb', '--db or $LEASEHOLD_DB'],
  },
  {
    name: 'PostgreSQL: unknown role',
    needs: 'postgres',
    exitCode: 1,
    run: () => keysCreate(pgUrl((u) => (u.username = 'leasehold_no_such_role'))),
    says: ['pg_unknown_role', 'no role "leasehold_no_such_role"', 'createuser', '--db or $LEASEHOLD_DB'],
  },
  {
    name: 'PostgreSQL: no permission to create the schema',
    needs: 'postgres',
    exitCode: 1,
    run: () =>
      keysCreate(
        pgUrl((u) => {
          u.username = NO_PERMISSION_ROLE;
          u.searchParams.set('schema', 'lh_error_table_schema');
        }),
      ),
    says: ['pg_permission_denied', `user "${NO_PERMISSION_ROLE}"`, 'schema "lh_error_table_schema"', 'GRANT CREATE ON DATABASE'],
  },
  {
    name: 'PostgreSQL: nothing listens on the port',
    exitCode: 1,
    run: () => keysCreate(`postgres://postgres@127.0.0.1:${closedPort}/jobs`),
    says: ['store_unavailable', `127.0.0.1:${closedPort}`, 'start PostgreSQL there or correct the host and port', '--db or $LEASEHOLD_DB'],
  },
  {
    name: 'PostgreSQL: the host does not resolve',
    exitCode: 1,
    run: () => keysCreate('postgres://postgres@leasehold-no-such-host.invalid:5432/jobs'),
    says: ['cannot resolve the PostgreSQL host "leasehold-no-such-host.invalid"', '--db or $LEASEHOLD_DB'],
  },
  {
    name: '--url without its scheme',
    exitCode: 1,
    run: () => cli(['stats', '--url', '127.0.0.1:8090', '--key', 'lh_x']),
    says: ['invalid_url', '"127.0.0.1:8090"', 'http://127.0.0.1:8090', '--url or $LEASEHOLD_URL'],
    lines: 1,
  },
  {
    name: 'a refused connection to the coordinator',
    exitCode: 1,
    run: () => cli(['stats', '--url', `http://127.0.0.1:${closedPort}`, '--key', 'lh_x']),
    says: ['network_error', `http://127.0.0.1:${closedPort}`, 'ECONNREFUSED', 'is the coordinator running', '--url'],
    lines: 1,
  },
  {
    name: '--payload that is not JSON',
    exitCode: 2,
    run: () => cli(['enqueue', '--kind', 'k', '--payload', '{name:"x"}', '--url', 'http://127.0.0.1:1', '--key', 'lh_x']),
    says: ['--payload is not JSON', 'line 1, column 2 (position 1)', `'{"name":"x"}'`, "see 'leasehold enqueue --help'"],
    lines: 2,
  },
  {
    name: 'a usage error: one line and where the help is',
    exitCode: 2,
    run: () => cli(['stats', '--no-such-flag']),
    says: ["Unknown option '--no-such-flag'", "see 'leasehold stats --help'"],
    lines: 2,
  },
  {
    name: 'an unknown command',
    exitCode: 2,
    run: () => cli(['frobnicate']),
    says: ["unknown command 'frobnicate'", "see 'leasehold --help'"],
    lines: 2,
  },
  {
    name: 'the port is in use',
    exitCode: 1,
    run: () => cli(['serve', '--db', join(dir, 'serve.db'), '--port', String(busyPort)]),
    says: ['port_in_use', `port ${busyPort} on 127.0.0.1`, 'EADDRINUSE', '--port'],
  },
  {
    name: 'a handlers module with a syntax error',
    exitCode: 1,
    run: () => cli(['worker', '--url', 'http://127.0.0.1:1', '--key', 'lh_x', '--handlers', join(dir, 'syntax.mjs')]),
    says: ['handlers_unloadable', `${join(dir, 'syntax.mjs')}:3`, "SyntaxError: Unexpected token ';'"],
    lines: 1,
  },
  {
    name: 'a handlers module that throws while loading',
    exitCode: 1,
    run: () => cli(['worker', '--url', 'http://127.0.0.1:1', '--key', 'lh_x', '--handlers', join(dir, 'throws.mjs')]),
    says: ['handlers_unloadable', `${join(dir, 'throws.mjs')}:2:6`, 'TypeError'],
    lines: 1,
  },
  {
    name: 'a kind file that is not JSON',
    exitCode: 1,
    run: () => cli(['kinds', 'set', 'email', '--file', join(dir, 'kind.json'), '--url', 'http://127.0.0.1:1', '--key', 'lh_x']),
    says: ['invalid_json', join(dir, 'kind.json'), 'line 4, column 1'],
    lines: 1,
  },
  {
    name: 'a --db file that does not exist',
    exitCode: 1,
    run: () => keysCreate(join(dir, 'missing', 'job.db')),
    says: ['database_not_found', join(dir, 'missing', 'job.db'), '--create'],
    lines: 1,
  },
];

describe('error messages', () => {
  for (const row of ROWS) {
    it.skipIf(row.needs === 'postgres' && !PG)(
      row.name,
      async () => {
        const outcome = await row.run();
        expect(outcome.code, outcome.stderr).toBe(row.exitCode);
        for (const part of row.says) {
          if (typeof part === 'string') expect(outcome.stderr).toContain(part);
          else expect(outcome.stderr).toMatch(part);
        }
        if (row.lines !== undefined) expect(outcome.stderr.trimEnd().split('\n')).toHaveLength(row.lines);
        expect(outcome.stderr).not.toMatch(/\n\s+at /); // never a stack
      },
      30_000,
    );
  }

  it('a missing --db file is not created, and --create creates it', async () => {
    const db = join(dir, 'later', 'jobs.db');
    expect((await keysCreate(db)).code).toBe(1);
    expect(existsSync(join(dir, 'later'))).toBe(false);
    expect((await cli(['keys', 'create', '--db', db, '--create', '--tenant', 't', '--user', 'u', '--role', 'admin', '--quiet'])).code).toBe(0);
    expect(existsSync(db)).toBe(true);
  }, 30_000);

  it('serve creates a missing SQLite file and logs that it did; on an existing file it says nothing of the kind', async () => {
    const db = join(dir, 'served', 'new.db');
    const logOf = (): Promise<string> =>
      new Promise((resolvePromise, reject) => {
        const child = spawn(process.execPath, [BIN, 'serve', '--db', db, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
        let output = '';
        const onData = (chunk: Buffer): void => {
          output += chunk.toString();
          if (output.includes('listening on')) child.kill('SIGTERM');
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
        child.on('error', reject);
        child.on('close', () => resolvePromise(output));
      });
    const first = await logOf();
    expect(first).toContain('created a new SQLite database');
    expect(first).toContain(db);
    expect(existsSync(db)).toBe(true);
    expect(await logOf()).not.toContain('created a new SQLite database');
  }, 30_000);

  it('PostgreSQL: a refused password names the user and the setting', () => {
    const refused = Object.assign(new pg.DatabaseError('password authentication failed for user "app"', 0, 'error'), { code: '28P01' });
    const error = translatePgConnectError(refused, pgTarget('postgres://app:wrong@db.internal:6432/jobs', 'public'));
    expect(error).toMatchObject({ code: 'pg_auth_failed' });
    expect(error.message).toContain('db.internal:6432');
    expect(error.message).toContain('password of user "app"');
    expect(error.message).toContain('$PGPASSWORD');
    expect(error.message).not.toContain('wrong');
  });

  it('HTTP: 415 names application/json, and invalid JSON gives its position', async () => {
    const noType = await harness.app.inject({
      method: 'POST',
      url: '/jobs',
      headers: { ...bearer(harness.keys.producer), 'idempotency-key': 'a', 'content-type': 'text/plain' },
      payload: 'x',
    });
    expect(noType.statusCode).toBe(415);
    expect(noType.json()).toEqual({ error: { code: 'unsupported_media_type', message: expect.stringContaining('Content-Type: application/json') } });
    const broken = await harness.app.inject({
      method: 'POST',
      url: '/jobs',
      headers: { ...bearer(harness.keys.producer), 'idempotency-key': 'b', 'content-type': 'application/json' },
      payload: '{"kind":"k",\n "payload": {x: 1}}',
    });
    expect(broken.statusCode).toBe(400);
    expect(broken.json()).toEqual({ error: { code: 'invalid_json', message: expect.stringContaining('at line 2, column 14 (position 26)') } });
  });
});
