/**
 * One entry for the task-export service, from one build: `seed` writes a
 * dataset, `api` serves the HTTP API, `worker` runs the export worker. The API
 * and the worker are separate processes over the same SQLite file.
 *
 *   node dist/apps/exports/main.js seed   --db tasks.db [--users 1000 --heavy-users 3 --heavy-tasks 50000]
 *   node dist/apps/exports/main.js api    --db tasks.db [--port 3000 --max-pending 100]
 *   node dist/apps/exports/main.js worker --db tasks.db [--lease-ms 30000 --max-result-bytes N]
 *   node dist/apps/exports/main.js failed --db tasks.db          (operator: the failed exports, newest first)
 *   node dist/apps/exports/main.js requeue --db tasks.db <id>    (operator: a fresh attempt budget for one)
 *
 * Each process prints one JSON line when it is ready.
 */

import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { openQueue, Worker, type WorkerLogger } from '../../src/index.js';
import { buildApi } from './api.js';
import { openAppDb } from './db.js';
import { DEFAULT_DATASET, generateDataset } from './dataset.js';
import { DEFAULT_EXPORT_SETTINGS, EXPORT_KIND, registerExportKind, type ExportKinds, type ExportSettings } from './export-job.js';
import { exportHandler } from './export-worker.js';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    db: { type: 'string', default: 'tasks.db' },
    port: { type: 'string', default: '3000' },
    host: { type: 'string', default: '127.0.0.1' },
    users: { type: 'string' },
    'heavy-users': { type: 'string' },
    'heavy-tasks': { type: 'string' },
    'max-pending': { type: 'string' },
    'lease-ms': { type: 'string' },
    'max-result-bytes': { type: 'string' },
    'max-attempts': { type: 'string' },
    'reaper-interval-ms': { type: 'string', default: '1000' },
    /** Test hook: after this many rows (once per attempt) the handler says so and waits for a line on stdin. */
    'pause-after-rows': { type: 'string' },
  },
});

function intOption(name: keyof typeof values, fallback: number): number {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (typeof raw !== 'string' || !Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} must be a non-negative integer`);
  return value;
}

const say = (fields: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify(fields)}\n`);

const settings: ExportSettings = {
  ...DEFAULT_EXPORT_SETTINGS,
  maxPendingExports: intOption('max-pending', DEFAULT_EXPORT_SETTINGS.maxPendingExports),
  leaseMs: intOption('lease-ms', DEFAULT_EXPORT_SETTINGS.leaseMs),
  maxResultBytes: intOption('max-result-bytes', DEFAULT_EXPORT_SETTINGS.maxResultBytes),
  maxAttempts: intOption('max-attempts', DEFAULT_EXPORT_SETTINGS.maxAttempts),
};
const path = values.db;
const queueConfig = { reaperIntervalMs: intOption('reaper-interval-ms', 1000) };

async function seed(): Promise<void> {
  const db = openAppDb(path);
  const users = generateDataset(db, {
    ...DEFAULT_DATASET,
    users: intOption('users', DEFAULT_DATASET.users),
    heavyUsers: intOption('heavy-users', DEFAULT_DATASET.heavyUsers),
    heavyTasks: intOption('heavy-tasks', DEFAULT_DATASET.heavyTasks),
  });
  db.close();
  // The keys exist in clear only here: a file beside the database, for trying the API.
  const keysFile = `${path}.keys.json`;
  writeFileSync(keysFile, JSON.stringify(users, null, 2), { mode: 0o600 });
  say({ event: 'seeded', users: users.length, tasks: users.reduce((sum, user) => sum + user.tasks, 0), keysFile });
}

async function api(): Promise<void> {
  const db = openAppDb(path);
  const queue = await openQueue<ExportKinds>({ sqlite: db, config: queueConfig });
  const app = await buildApi({
    db,
    path,
    queue,
    exportSettings: settings,
    onSyncExportEnd: (end) => say({ event: 'sync_export_end', ...end }),
    onServerError: (error, route) => process.stderr.write(`${JSON.stringify({ level: 'error', route, errorName: error.name, errorMessage: error.message })}\n`),
  });
  const url = await app.listen({ port: intOption('port', 3000), host: values.host });
  say({ event: 'api_listening', url });
  await Promise.race([once(process, 'SIGTERM'), once(process, 'SIGINT')]);
  await queue.close();
  await app.close();
  db.close();
}

const logger: WorkerLogger = {
  debug: () => undefined,
  info: (fields, message) => say({ level: 'info', message, ...fields }),
  warn: (fields, message) => say({ level: 'warn', message, ...fields }),
  error: (fields, message) => say({ level: 'error', message, ...fields }),
};

async function worker(): Promise<void> {
  const db = openAppDb(path);
  const queue = await openQueue<ExportKinds>({ sqlite: db, config: queueConfig });
  await registerExportKind(queue, settings);
  const pauseAfter = values['pause-after-rows'] === undefined ? undefined : intOption('pause-after-rows', 0);
  const paused = new Set<string>();
  const handler = exportHandler(path, settings, {
    onRows: async (jobId, attempt, rows) => {
      say({ event: 'export_rows', jobId, attempt, rows });
      if (pauseAfter !== undefined && rows >= pauseAfter && !paused.has(`${jobId}/${attempt}`)) {
        paused.add(`${jobId}/${attempt}`);
        say({ event: 'export_paused', jobId, attempt, rows });
        await once(process.stdin, 'data');
        process.stdin.pause();
      }
    },
  });
  // One export at a time: the design's starting point, until measurements show the worker is the bottleneck.
  const running = new Worker({ queue, handlers: { [EXPORT_KIND]: handler }, concurrency: 1, leaseMs: settings.leaseMs, logger, waitMs: 1_000 });
  const done = running.run();
  say({ event: 'worker_ready', workerId: running.workerId });
  await Promise.race([once(process, 'SIGTERM'), once(process, 'SIGINT'), done]);
  await running.stop();
  await queue.close();
  db.close();
  say({ event: 'worker_stopped' });
}

/** The failed exports: the terminal rows are this system's dead-letter record, so no other queue holds them. */
async function failed(): Promise<void> {
  const db = openAppDb(path);
  const queue = await openQueue<ExportKinds>({ sqlite: db });
  const owners = db.prepare<[string], { owner_user_id: number }>('SELECT owner_user_id FROM export_requests WHERE job_id = ?');
  for (const status of ['dead', 'unknown', 'cancelled'] as const) {
    for (const job of (await queue.list({ status, kind: EXPORT_KIND, limit: 100 })).jobs) {
      say({
        id: job.id,
        status: job.status,
        owner: owners.get(job.id)?.owner_user_id ?? null,
        attempts: job.attempts,
        errorCode: job.lastError?.code ?? null,
        detail: job.lastError?.message ?? null,
        finishedAt: job.finishedAt,
      });
    }
  }
  await queue.close();
  db.close();
}

/** Deliberately retries one failed export (after its cause is fixed) with a new attempt budget. */
async function requeue(): Promise<void> {
  const id = positionals[1];
  if (id === undefined) throw new Error('usage: main.js requeue --db FILE <export id>');
  const db = openAppDb(path);
  const queue = await openQueue<ExportKinds>({ sqlite: db });
  const job = await queue.requeue(id, { maxAttempts: settings.maxAttempts });
  say({ event: 'requeued', id: job.id, status: job.status });
  await queue.close();
  db.close();
}

const commands: Record<string, () => Promise<void>> = { seed, api, worker, failed, requeue };
const command = commands[positionals[0] ?? ''];
if (command === undefined) {
  process.stderr.write('usage: main.js seed|api|worker|failed|requeue --db FILE [options]\n');
  process.exit(2);
}
await command();
