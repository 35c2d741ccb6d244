/**
 * The library is a front of the engine, not of the HTTP API: a Queue lists
 * jobs in a process where no module of Fastify was ever loaded (and the same
 * check sees Fastify when the HTTP front is imported, so it can fail),
 * and enqueueInTransaction's jobs count where every other enqueue's do — the
 * acceptance SLI, the enqueued counter, on both backends.
 */

import Database from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseholdError, openQueue, type Queue } from '../../src/index.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';

type Kinds = { ship: { order: string } };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `lh-${label}-`));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Runs, in a fresh node process on the built library (dist/), an enqueue and a list on a Queue over `db`,
 * after importing `extra` if given, and answers the loaded modules under node_modules/fastify or
 * node_modules/@fastify. Fastify and its plugins are CommonJS: an ES import of one loads it through
 * the CommonJS loader, whose cache lists every file it loaded, however it was reached.
 */
function fastifyModulesAfterList(db: string, extra?: string): { readonly listed: number; readonly fastify: string[] } {
  const dist = (path: string): string => pathToFileURL(resolve(import.meta.dirname, '../../dist/src', path)).href;
  const script = `
    import { createRequire } from 'node:module';
    const { openQueue } = await import(${JSON.stringify(dist('index.js'))});
    ${extra === undefined ? '' : `await import(${JSON.stringify(dist(extra))});`}
    const queue = await openQueue({ db: ${JSON.stringify(db)} });
    await queue.enqueue({ kind: 'ship', payload: { order: 'o1' }, idempotencyKey: 'ship-o1' });
    const page = await queue.list({ limit: 10 });
    await queue.close();
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    const fastify = loaded.filter((path) => /[\\\\/]node_modules[\\\\/](fastify|@fastify)[\\\\/]/.test(path));
    console.log(JSON.stringify({ listed: page.jobs.length, fastify, loaded: loaded.length }));
  `;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
  if (child.status !== 0) throw new Error(`the child failed (${child.status}): ${child.stderr}`);
  const answer = JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '{}') as { listed: number; fastify: string[]; loaded: number };
  // The check reads a cache that holds what was loaded: a process that loaded nothing through it proves nothing.
  expect(answer.loaded).toBeGreaterThan(0);
  return answer;
}

describe('a Queue without Fastify', () => {
  it('lists jobs in a process that never loaded a module of Fastify', () => {
    const result = fastifyModulesAfterList(join(tempDir('no-fastify'), 'app.db'));
    expect(result.listed).toBe(1);
    expect(result.fastify).toEqual([]);
  });

  it('sees Fastify where the HTTP front was imported (the check can fail)', () => {
    const result = fastifyModulesAfterList(join(tempDir('with-fastify'), 'app.db'), 'coordinator/app.js');
    expect(result.listed).toBe(1);
    expect(result.fastify.length).toBeGreaterThan(0);
  });
});

/** The value of a counter's series whose labels include `labels`, summed (0 when none). */
async function counted(queue: Queue<Kinds>, name: string, labels: Readonly<Record<string, string>>): Promise<number> {
  const metric = queue.services.ctx.metrics.registry.getSingleMetric(name);
  if (metric === undefined) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return values.filter((value) => Object.entries(labels).every(([key, want]) => value.labels[key] === want)).reduce((sum, value) => sum + value.value, 0);
}

async function acceptance(queue: Queue<Kinds>): Promise<{ valid: number; good: number; created: number; replayed: number }> {
  const tenant = { tenant: 'default' };
  return {
    valid: await counted(queue, 'leasehold_sli_acceptance_valid_total', tenant),
    good: await counted(queue, 'leasehold_sli_acceptance_good_total', tenant),
    created: await counted(queue, 'leasehold_jobs_enqueued_total', { ...tenant, outcome: 'created' }),
    replayed: await counted(queue, 'leasehold_jobs_enqueued_total', { ...tenant, outcome: 'replayed' }),
  };
}

describe('enqueueInTransaction in the acceptance SLI', () => {
  it('counts its jobs as enqueue() counts them, on SQLite; a client’s conflict is not counted', async () => {
    const db = new Database(join(tempDir('sli-tx'), 'app.db'));
    cleanups.push(async () => void db.close());
    const queue = await openQueue<Kinds>({ sqlite: db });
    cleanups.push(() => queue.close());
    const place = (order: string, key: string) =>
      db.transaction(() => queue.enqueueInTransaction(db, { kind: 'ship', payload: { order }, idempotencyKey: key }))();

    place('o1', 'ship-o1');
    expect(await acceptance(queue)).toEqual({ valid: 1, good: 1, created: 1, replayed: 0 });
    place('o1', 'ship-o1');
    expect(await acceptance(queue)).toEqual({ valid: 2, good: 2, created: 1, replayed: 1 });
    expect(() => place('o2', 'ship-o1')).toThrow(LeaseholdError);
    expect(await acceptance(queue)).toEqual({ valid: 2, good: 2, created: 1, replayed: 1 });
    // The library's own enqueue counts the same way.
    await queue.enqueue({ kind: 'ship', payload: { order: 'o3' }, idempotencyKey: 'ship-o3' });
    expect(await acceptance(queue)).toEqual({ valid: 3, good: 3, created: 2, replayed: 1 });
  });

  const url = process.env['DATABASE_URL'] ?? '';
  it.skipIf(url === '')('counts its jobs on PostgreSQL', async () => {
    const schema = `lh_test_sli_${randomBytes(6).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    cleanups.push(async () => {
      await pool.end();
      await PostgresStore.dropSchema({ connectionString: url, schema });
    });
    const queue = await openQueue<Kinds>({ pg: pool, schema });
    cleanups.push(() => queue.close());
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await queue.enqueueInTransaction(client, { kind: 'ship', payload: { order: 'o1' }, idempotencyKey: 'ship-o1' });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await acceptance(queue)).toEqual({ valid: 1, good: 1, created: 1, replayed: 0 });
  });
});
