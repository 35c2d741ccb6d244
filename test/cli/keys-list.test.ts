/**
 * `leasehold keys list`: a tenant's keys from the database, as an aligned
 * table and as JSON, with revocations shown and never a key or its hash.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { cli } from '../support/run-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'lh-keys-list-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("lists a tenant's keys as a table and as JSON, revoked ones marked, never the key or its hash", async () => {
  const db = join(dir, 'keys.db');
  const created: { id: string; key: string }[] = [];
  for (const [tenant, user, role] of [
    ['acme', 'ops', 'admin'],
    ['acme', 'fleet', 'worker'],
    ['other', 'x', 'producer'],
  ] as const) {
    const answer = await cli(['keys', 'create', '--db', db, '--create', '--tenant', tenant, '--user', user, '--role', role]);
    expect(answer.code).toBe(0);
    const lines = answer.stdout.trim().split('\n');
    created.push({ id: /key (\S+) for/.exec(lines[0] ?? '')?.[1] ?? '', key: lines.at(-1) ?? '' });
  }
  expect((await cli(['keys', 'revoke', '--db', db, '--id', created[1]?.id ?? ''])).code).toBe(0);

  const table = await cli(['keys', 'list', '--db', db, '--tenant', 'acme']);
  expect(table.code).toBe(0);
  const rows = table.stdout.trim().split('\n');
  expect(rows[0]).toMatch(/^ID\s+USER\s+ROLE\s+CREATED\s+REVOKED$/);
  expect(rows).toHaveLength(3);
  // Aligned: every column starts at the same offset on every row.
  const userColumn = rows[0]?.indexOf('USER');
  for (const row of rows.slice(1)) expect(row.slice(userColumn).split(/\s+/)[0]).toMatch(/^(ops|fleet)$/);
  expect(rows.find((row) => row.includes('fleet'))).toMatch(/\d{4}-\d\d-\d\dT\S+\s*$/);
  expect(rows.find((row) => row.includes('ops'))).toMatch(/\s-\s*$/);

  const json = await cli(['keys', 'list', '--db', db, '--tenant', 'acme', '--json']);
  expect(json.code).toBe(0);
  const listed = JSON.parse(json.stdout) as { keys: { id: string; user: string; role: string; revokedAt: string | null }[] };
  expect(listed.keys.map((k) => [k.user, k.role, k.revokedAt === null])).toEqual([
    ['ops', 'admin', true],
    ['fleet', 'worker', false],
  ]);
  for (const output of [table.stdout, json.stdout]) {
    for (const { key } of created) expect(output).not.toContain(key);
    expect(output).not.toMatch(/[0-9a-f]{64}/);
  }
  // Another tenant's keys are not listed; a database that does not exist is refused.
  expect(json.stdout).not.toContain(created[2]?.id);
  expect((await cli(['keys', 'list', '--db', join(dir, 'missing.db'), '--tenant', 'acme'])).code).toBe(1);
});
