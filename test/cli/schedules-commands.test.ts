/**
 * `leasehold schedules set|list|delete` against a running coordinator (a real
 * HTTP server over SQLite, the compiled CLI in a child process): the table
 * and --json forms, paging, the API's validation error as one line with exit
 * 1, a bad flag as a usage error with exit 2.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Schedule, ScheduleList } from '../../src/protocol/schemas.js';
import { startLiveCoordinator, type LiveCoordinator } from '../client/live-coordinator.js';
import { cli } from '../support/run-cli.js';

describe('schedules commands', () => {
  let live: LiveCoordinator;
  let env: Record<string, string>;

  beforeAll(async () => {
    live = await startLiveCoordinator();
    env = { LEASEHOLD_URL: live.url, LEASEHOLD_KEY: live.keys.admin };
  });
  afterAll(async () => {
    await live.close();
  });

  it('sets, lists (table, JSON, pages) and deletes schedules', async () => {
    const set = await cli(
      ['schedules', 'set', 'nightly', '--kind', 'report', '--cron', '0 3 * * *', '--timezone', 'Europe/Berlin', '--payload', '{"pages":2}', '--catch-up', '1'],
      env,
    );
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/^schedule nightly saved: 0 3 \* \* \* \(Europe\/Berlin\), next \d{4}-/);
    const json = await cli(['schedules', 'set', 'hourly', '--kind', 'report', '--cron', '@hourly', '--overlap', 'allow', '--json'], env);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout) as Schedule).toMatchObject({ name: 'hourly', overlap: 'allow', catchUp: 0, timezone: 'UTC', payload: null });

    const list = await cli(['schedules', 'list'], env);
    expect(list.code, list.stderr).toBe(0);
    const [header = '', ...rows] = list.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^NAME\s+KIND\s+CRON\s+TIMEZONE\s+OVERLAP\s+CATCH-UP\s+NEXT\s+LAST\s+LAST JOB$/);
    expect(rows.map((r) => r.split(/\s+/)[0])).toEqual(['hourly', 'nightly']);

    const page = await cli(['schedules', 'list', '--limit', '1', '--json'], env);
    const parsed = JSON.parse(page.stdout) as ScheduleList;
    expect(parsed.schedules.map((s) => s.name)).toEqual(['hourly']);
    expect(parsed.nextCursor).toBe('hourly');
    const more = await cli(['schedules', 'list', '--limit', '1'], env);
    expect(more.stdout).toContain('more: --cursor hourly');
    const all = await cli(['schedules', 'list', '--limit', '1', '--all', '--json'], env);
    expect(
      all.stdout
        .trimEnd()
        .split('\n')
        .map((line) => (JSON.parse(line) as Schedule).name),
    ).toEqual(['hourly', 'nightly']);

    const deleted = await cli(['schedules', 'delete', 'hourly'], env);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout.trim()).toBe('schedule hourly deleted');
    const missing = await cli(['schedules', 'delete', 'hourly'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('not_found');
  });

  it('reports a refused schedule in one line (exit 1) and a bad flag as usage (exit 2)', async () => {
    const bad = await cli(['schedules', 'set', 'x', '--kind', 'k', '--cron', '0 25 * * *'], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('invalid_request');
    expect(bad.stderr).toContain('body/cron');
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    const usage = await cli(['schedules', 'set', 'x', '--kind', 'k', '--cron', '@daily', '--overlap', 'never'], env);
    expect(usage.code).toBe(2);
    const payload = await cli(['schedules', 'set', 'x', '--kind', 'k', '--cron', '@daily', '--payload', '{'], env);
    expect(payload.code).toBe(1);
    expect(payload.stderr).toContain('--payload is not valid JSON');
  });
});
