/**
 * The distribution gate's measurements (GATE.md): builds a dataset, then
 * measures the synchronous export of the largest user (size, query plan,
 * CPU, memory, database and elapsed time), normal task-request latency with
 * and without concurrent exports (synchronous, then through the queue with a
 * separate worker process), and what the server does when an export's
 * client disconnects. Load comes from undici Pools, never the global fetch.
 *
 *   npm run measure:exports -- [--users 1000 --heavy-users 3 --heavy-tasks 50000 --seconds 10 --clients 8 --exporters 2]
 */

import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, existsSync } from 'node:fs';
import { tmpdir, cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { EXPORT_SQL, openAppDb } from './db.js';
import { DEFAULT_DATASET, generateDataset, type SeededUser } from './dataset.js';
import { processUsage, startApp, type AppProcess } from './processes.js';
import { streamExport } from './sync-export.js';

const { values } = parseArgs({
  options: {
    users: { type: 'string', default: String(DEFAULT_DATASET.users) },
    'heavy-users': { type: 'string', default: String(DEFAULT_DATASET.heavyUsers) },
    'heavy-tasks': { type: 'string', default: String(DEFAULT_DATASET.heavyTasks) },
    seconds: { type: 'string', default: '10' },
    clients: { type: 'string', default: '8' },
    exporters: { type: 'string', default: '2' },
  },
});
const num = (name: keyof typeof values): number => Number(values[name]);
const SECONDS = num('seconds');
const CLIENTS = num('clients');
const EXPORTERS = num('exporters');

const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
const ms = (value: number): number => Math.round(value * 10) / 10;
const summary = (values: number[]): { n: number; p50: number; p99: number; max: number } => {
  const sorted = [...values].sort((a, b) => a - b);
  return { n: sorted.length, p50: ms(percentile(sorted, 50)), p99: ms(percentile(sorted, 99)), max: ms(sorted[sorted.length - 1] ?? NaN) };
};
const fileMiB = (path: string): number => (existsSync(path) ? statSync(path).size / 2 ** 20 : 0);
const dbMiB = (path: string): number => ms(fileMiB(path) + fileMiB(`${path}-wal`));
const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;

const dir = mkdtempSync(join(tmpdir(), 'exports-measure-'));
const path = join(dir, 'tasks.db');
const report: Record<string, unknown> = {
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, model: cpus()[0]?.model, memGiB: ms(totalmem() / 2 ** 30), node: process.version },
};

// 1. The dataset.
let started = performance.now();
const db = openAppDb(path);
const users = generateDataset(db, { ...DEFAULT_DATASET, users: num('users'), heavyUsers: num('heavy-users'), heavyTasks: num('heavy-tasks') });
db.pragma('wal_checkpoint(TRUNCATE)');
const heavy = users.filter((user) => user.tasks === num('heavy-tasks')).slice(0, num('heavy-users'));
const ordinary = users.filter((user) => !heavy.includes(user));
const largest = heavy[0] ?? (users[0] as SeededUser);
report['dataset'] = {
  users: users.length,
  tasks: users.reduce((sum, user) => sum + user.tasks, 0),
  largestUserTasks: largest.tasks,
  dbMiB: dbMiB(path),
  generateMs: Math.round(performance.now() - started),
};
report['queryPlan'] = (db.prepare(`EXPLAIN QUERY PLAN ${EXPORT_SQL}`).all({ userId: largest.id, status: 'all' }) as { detail: string }[]).map(
  (row) => row.detail,
);

// 2. The largest user's export, in this process: the query alone, then query + CSV.
started = performance.now();
let rows = 0;
for (const _ of db.prepare(EXPORT_SQL).iterate({ userId: largest.id, status: 'all' })) rows++;
const queryMs = performance.now() - started;
db.close();
const cpuBefore = process.cpuUsage();
const rssBefore = process.memoryUsage().rss;
let peakRss = rssBefore;
let bytes = 0;
started = performance.now();
await pipeline(
  streamExport(path, largest.id, 'all', () => undefined),
  new Writable({
    write(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length;
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      callback();
    },
  }),
);
const cpu = process.cpuUsage(cpuBefore);
report['largestExport'] = {
  rows,
  bytes,
  MiB: ms(bytes / 2 ** 20),
  databaseMs: ms(queryMs),
  elapsedMs: ms(performance.now() - started),
  cpuMs: ms((cpu.user + cpu.system) / 1000),
  rssGrowthMiB: ms((peakRss - rssBefore) / 2 ** 20),
};

// 3. Load: CLIENTS loops of task requests (nine reads of a page, one update) for ordinary users.
interface LoadResult {
  reads: number[];
  writes: number[];
  errors: number;
}
async function taskLoad(url: string, until: number): Promise<LoadResult> {
  const pool = new Pool(url, { connections: CLIENTS });
  const result: LoadResult = { reads: [], writes: [], errors: 0 };
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      let n = client;
      while (performance.now() < until) {
        const user = pick(ordinary);
        const write = ++n % 10 === 0;
        const begin = performance.now();
        const answer = await pool.request({
          method: write ? 'PATCH' : 'GET',
          path: write ? `/tasks/${firstTaskOf(user)}` : '/tasks?limit=50',
          headers: { authorization: `Bearer ${user.key}`, ...(write ? { 'content-type': 'application/json' } : {}) },
          ...(write ? { body: JSON.stringify({ status: n % 20 === 0 ? 'done' : 'open' }) } : {}),
        });
        await answer.body.dump();
        (write ? result.writes : result.reads).push(performance.now() - begin);
        if (answer.statusCode >= 400) result.errors++;
      }
    }),
  );
  await pool.close();
  return result;
}
const firstTask = new Map<number, number>();
{
  const read = openAppDb(path, { readonly: true });
  for (const row of read.prepare<[], { user_id: number; id: number }>('SELECT user_id, MIN(id) AS id FROM tasks GROUP BY user_id').all())
    firstTask.set(row.user_id, row.id);
  read.close();
}
const firstTaskOf = (user: SeededUser): number => firstTask.get(user.id) ?? 1;
const loadSummary = (load: LoadResult): Record<string, unknown> => ({
  reads: summary(load.reads),
  writes: summary(load.writes),
  errors: load.errors,
  perSecond: Math.round((load.reads.length + load.writes.length) / SECONDS),
});

async function startApi(extra: readonly string[] = []): Promise<{ api: AppProcess; url: string }> {
  // Port 0: the system picks a free one, and the ready line says which.
  const api = startApp(['api', '--db', path, '--port', '0', ...extra]);
  const ready = await api.next((line) => line['event'] === 'api_listening');
  return { api, url: String(ready['url']) };
}

const usageDelta = (proc: AppProcess, before: ReturnType<typeof processUsage>): Record<string, number> => {
  const after = processUsage(proc.pid);
  return {
    cpuSeconds: ms(after.cpuSeconds - before.cpuSeconds),
    cpuShareOfOneCore: ms((after.cpuSeconds - before.cpuSeconds) / SECONDS),
    peakRssMiB: ms(after.peakRssMiB),
  };
};

// 3a. Synchronous: the API alone, then with EXPORTERS loops of GET /tasks/export.csv for the heavy users.
{
  const { api, url } = await startApi();
  let before = processUsage(api.pid);
  const baseline = await taskLoad(url, performance.now() + SECONDS * 1000);
  report['syncBaseline'] = { ...loadSummary(baseline), api: usageDelta(api, before) };

  before = processUsage(api.pid);
  const exportPool = new Pool(url, { connections: EXPORTERS });
  const exportTimes: number[] = [];
  const until = performance.now() + SECONDS * 1000;
  const [loaded] = await Promise.all([
    taskLoad(url, until),
    ...Array.from({ length: EXPORTERS }, async (_, i) => {
      while (performance.now() < until) {
        const begin = performance.now();
        const answer = await exportPool.request({
          method: 'GET',
          path: '/tasks/export.csv',
          headers: { authorization: `Bearer ${(heavy[i % heavy.length] ?? largest).key}` },
        });
        await answer.body.dump({ limit: Number.MAX_SAFE_INTEGER });
        exportTimes.push(performance.now() - begin);
      }
    }),
  ]);
  report['syncWithExports'] = { ...loadSummary(loaded), exports: summary(exportTimes), api: usageDelta(api, before) };

  // 3b. A client that reads the first chunk and goes away.
  const seen = api.lines.length;
  const answer = await exportPool.request({ method: 'GET', path: '/tasks/export.csv', headers: { authorization: `Bearer ${largest.key}` } });
  for await (const _chunk of answer.body) break;
  const gone = performance.now();
  const end = await api.next((line, index = api.lines.indexOf(line)) => line['event'] === 'sync_export_end' && index >= seen && line['completed'] === false);
  report['syncDisconnect'] = { rowsRead: end['rowsRead'], of: largest.tasks, completed: end['completed'], stoppedAfterMs: ms(performance.now() - gone) };
  await exportPool.close();
  await api.stop();
}

// 4. Asynchronous: API and worker processes; EXPORTERS loops of POST /exports, polled to the end, checksum checked.
{
  const sizeBefore = dbMiB(path);
  const { api, url } = await startApi(['--max-pending', '100']);
  const worker = startApp(['worker', '--db', path]);
  await worker.next((line) => line['event'] === 'worker_ready');
  const beforeApi = processUsage(api.pid);
  const beforeWorker = processUsage(worker.pid);
  const pool = new Pool(url, { connections: EXPORTERS * 2 });
  const accept: number[] = [];
  const complete: number[] = [];
  let offered = 0;
  let refused = 0;
  let accepted = 0;
  let succeeded = 0;
  let badChecksums = 0;
  const until = performance.now() + SECONDS * 1000;
  const [loaded] = await Promise.all([
    taskLoad(url, until),
    ...Array.from({ length: EXPORTERS }, async (_, i) => {
      const user = heavy[i % heavy.length] ?? largest;
      const headers = { authorization: `Bearer ${user.key}` };
      while (performance.now() < until) {
        offered++;
        let begin = performance.now();
        const post = await pool.request({
          method: 'POST',
          path: '/exports',
          headers: { ...headers, 'idempotency-key': `m-${i}-${offered}`, 'content-type': 'application/json' },
          body: '{}',
        });
        const job = (await post.body.json()) as { id: string };
        accept.push(performance.now() - begin);
        if (post.statusCode !== 202) {
          refused++;
          continue;
        }
        accepted++;
        begin = performance.now();
        // The measurement polls faster than Retry-After to time completion closely.
        for (;;) {
          const status = await pool.request({ method: 'GET', path: `/exports/${job.id}`, headers });
          const view = (await status.body.json()) as { status: string };
          if (view.status === 'succeeded' || view.status === 'failed') break;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const result = await pool.request({ method: 'GET', path: `/exports/${job.id}/result`, headers });
        const body = Buffer.from(await result.body.arrayBuffer());
        complete.push(performance.now() - begin);
        if (result.statusCode === 200) succeeded++;
        if (createHash('sha256').update(body).digest('hex') !== result.headers['x-checksum-sha256']) badChecksums++;
      }
    }),
  ]);
  report['asyncWithExports'] = {
    ...loadSummary(loaded),
    accept: summary(accept),
    completion: summary(complete),
    offered,
    accepted,
    refused,
    succeeded,
    badChecksums,
    acceptanceRatio: ms(accepted / Math.max(1, offered)),
    completionRatio: ms(succeeded / Math.max(1, accepted)),
    api: usageDelta(api, beforeApi),
    worker: usageDelta(worker, beforeWorker),
    dbGrowthMiB: ms(dbMiB(path) - sizeBefore),
  };
  await pool.close();
  await worker.stop();
  await api.stop();
}

process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
rmSync(dir, { recursive: true, force: true });
