/**
 * One task-export deployment per test: a fresh SQLite file with a small
 * dataset, the API (in this process, on a random port, over the app's own
 * handle and a Queue on it) and an undici Pool to call it. Export workers are
 * started by the tests that need them, in process or as real processes.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Pool } from 'undici';
import { openQueue } from '../../../src/index.js';
import { buildApi } from '../../../apps/exports/api.js';
import { openAppDb, type AppDb } from '../../../apps/exports/db.js';
import { generateDataset, type DatasetOptions, type SeededUser } from '../../../apps/exports/dataset.js';
import { DEFAULT_EXPORT_SETTINGS, type ExportKinds, type ExportQueue, type ExportSettings } from '../../../apps/exports/export-job.js';
import type { SyncExportEnd } from '../../../apps/exports/sync-export.js';

export interface Deployment {
  readonly dir: string;
  readonly path: string;
  readonly db: AppDb;
  readonly queue: ExportQueue;
  readonly app: FastifyInstance;
  readonly url: string;
  readonly pool: Pool;
  readonly users: readonly SeededUser[];
  readonly syncEnds: SyncExportEnd[];
  /** Resolves on the next synchronous export end. */
  nextSyncEnd(): Promise<SyncExportEnd>;
  call(
    user: SeededUser,
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer; json: () => unknown }>;
  close(): Promise<void>;
}

export const SMALL: DatasetOptions = { users: 4, minTasks: 3, maxTasks: 8, heavyUsers: 1, heavyTasks: 3_000, seed: 7 };

export async function deploy(options: { dataset?: DatasetOptions; settings?: Partial<ExportSettings> } = {}): Promise<Deployment> {
  const dir = mkdtempSync(join(tmpdir(), 'exports-test-'));
  const path = join(dir, 'tasks.db');
  const db = openAppDb(path);
  const users = generateDataset(db, options.dataset ?? SMALL);
  // The reaper settles expired leases every 100 ms, so lease-expiry recovery takes a lease length.
  const queue = await openQueue<ExportKinds>({ sqlite: db, config: { reaperIntervalMs: 100 } });
  const syncEnds: SyncExportEnd[] = [];
  const waiters: ((end: SyncExportEnd) => void)[] = [];
  const settings = { ...DEFAULT_EXPORT_SETTINGS, ...options.settings };
  const app = await buildApi({
    db,
    path,
    queue,
    exportSettings: settings,
    onSyncExportEnd: (end) => {
      syncEnds.push(end);
      waiters.splice(0).forEach((resolve) => resolve(end));
    },
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const pool = new Pool(url, { connections: 8 });
  return {
    dir,
    path,
    db,
    queue,
    app,
    url,
    pool,
    users,
    syncEnds,
    nextSyncEnd: () => new Promise((resolve) => waiters.push(resolve)),
    async call(user, method, requestPath, { body, headers = {} } = {}) {
      const answer = await pool.request({
        method: method as 'GET',
        path: requestPath,
        headers: { authorization: `Bearer ${user.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const bytes = Buffer.from(await answer.body.arrayBuffer());
      return { status: answer.statusCode, headers: answer.headers, body: bytes, json: () => JSON.parse(bytes.toString('utf8')) as unknown };
    },
    async close() {
      await pool.close();
      await queue.close();
      await app.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Rows in leasehold's job_results for the job, read from the file itself (the invariant the API cannot show). */
export function resultRows(db: AppDb, jobId: string): number {
  return (db.prepare('SELECT COUNT(*) AS n FROM job_results JOIN jobs ON jobs.seq = job_results.job_seq WHERE jobs.id = ?').get(jobId) as { n: number }).n;
}
