/**
 * Shared by the fault tests: an in-process coordinator over a SQLite
 * file the test places itself (on a small tmpfs, under immutable files, beside
 * a lock-holding process), the check that a refused request answered 503
 * store_unavailable without driver details (on either backend), what the
 * operator's log must say about it, and a look at the database from a
 * separate connection that lists every half-written trace a failed
 * transaction could leave (an attempt without its lease, a result without its
 * success, storage counters that disagree with the rows).
 */

import Database from 'better-sqlite3';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { expect } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import type { CoordinatorConfigInput } from '../../src/engine/config.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import { createKey, errorCode } from '../support/http-fixtures.js';

export interface SqliteFaultCoordinator {
  readonly app: FastifyInstance;
  readonly store: SqliteStore;
  readonly path: string;
  readonly keys: { readonly producer: string; readonly worker: string; readonly admin: string };
  /** The coordinator's log at warn and above, one JSON line each. */
  readonly logLines: string[];
  close(): Promise<void>;
}

export async function startSqliteCoordinator(
  path: string,
  options: {
    readonly busyTimeoutMs?: number;
    readonly readonly?: boolean;
    readonly config?: CoordinatorConfigInput;
    /** Puts a wrapper between the coordinator and the store (an injected fault). */
    readonly wrap?: (store: Store) => Store;
  } = {},
): Promise<SqliteFaultCoordinator> {
  const store = SqliteStore.open({
    path,
    ...(options.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: options.busyTimeoutMs }),
    ...(options.readonly === true ? { readonly: true } : {}),
  });
  const keys =
    options.readonly === true
      ? { producer: '', worker: '', admin: '' }
      : {
          producer: await createKey(store, 't1', 'alice', 'producer'),
          worker: await createKey(store, 't1', 'w', 'worker'),
          admin: await createKey(store, 't1', 'root', 'admin'),
        };
  const { logger, logLines } = captureLog();
  const app = await buildCoordinator({ store: options.wrap?.(store) ?? store, logger, config: { reaperIntervalMs: 0, ...options.config } });
  return {
    app,
    store,
    path,
    keys,
    logLines,
    async close() {
      await app.close();
      await store.close();
    },
  };
}

/** A pino logger at every level (trace and up) whose JSON lines the test can read. */
export function captureLog(): { readonly logger: Logger; readonly logLines: string[] } {
  const logLines: string[] = [];
  // Every level: a secret written at debug is as leaked as one at warn.
  const logger = pino({ level: 'trace' }, new Writable({ write: (chunk, _encoding, done) => (logLines.push(String(chunk)), done()) }));
  return { logger, logLines };
}

/** A refusal because of the store: 503, the stable code, Retry-After, and nothing of the driver in the body. */
export function expectStoreUnavailable(response: LightMyRequestResponse): void {
  expect({ status: response.statusCode, code: errorCode(response) }).toEqual({ status: 503, code: 'store_unavailable' });
  expect(response.headers['retry-after']).toBe('1');
  expect(response.body).not.toMatch(/SQLITE|sqlite|disk|locked|readonly|at \w+ \(/);
}

/** The operator's log names the driver's code of each refusal, and no key or lease token. */
export function expectRefusalsLogged(lines: readonly string[], driverCode: RegExp, secrets: readonly string[]): void {
  const refusals = lines.map((line) => JSON.parse(line) as { msg?: string; code?: string; cause?: string }).filter((entry) => entry.msg === 'request refused');
  expect(refusals.length).toBeGreaterThan(0);
  for (const entry of refusals) {
    expect(entry.code).toBe('store_unavailable');
    expect(entry.cause).toMatch(driverCode);
  }
  for (const secret of secrets) for (const line of lines) expect(line).not.toContain(secret);
}

/** The driver error under a store_unavailable thrown by the store itself, e.g. SQLITE_FULL. */
export async function driverCodeOf(call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
  } catch (error) {
    const cause = (error as { cause?: { code?: unknown } }).cause;
    expect((error as { code?: unknown }).code).toBe('store_unavailable');
    return typeof cause?.code === 'string' ? cause.code : 'no driver code';
  }
  throw new Error('the store call succeeded during the fault');
}

export interface DatabaseState {
  readonly jobIds: ReadonlySet<string>;
  readonly byStatus: Readonly<Record<string, number>>;
  /** Traces of a transaction that was applied in part; empty when the file is consistent. */
  readonly halfWritten: readonly string[];
}

/** Reads the file through a connection of its own, as an operator would after the fault. */
export function inspectDatabase(path: string): DatabaseState {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const jobIds = new Set((db.prepare('SELECT id FROM jobs').all() as { id: string }[]).map((r) => r.id));
    const byStatus: Record<string, number> = {};
    // A running job's row says 'queued' while its lease row exists (SQLite migration 14).
    const statuses = `SELECT CASE WHEN l.seq IS NULL THEN j.status ELSE 'running' END AS status, count(*) AS n
      FROM jobs j LEFT JOIN job_leases l ON l.seq = j.seq GROUP BY 1`;
    for (const row of db.prepare(statuses).all() as { status: string; n: number }[]) {
      byStatus[row.status] = row.n;
    }
    const checks: readonly [string, string][] = [
      [
        'jobs whose ended attempt rows do not number their epoch',
        'SELECT count(*) FROM jobs j WHERE j.epoch <> (SELECT count(*) FROM job_attempts a WHERE a.job_seq = j.seq)',
      ],
      ['attempt rows not ended (a running attempt is its lease row)', 'SELECT count(*) FROM job_attempts WHERE ended_at IS NULL'],
      [
        "lease rows that are not the attempt after their job row's last",
        'SELECT count(*) FROM job_leases l JOIN jobs j ON j.seq = l.seq WHERE l.epoch <> j.epoch + 1',
      ],
      [
        'queued jobs with no ready row and no lease, or both',
        `SELECT count(*) FROM jobs j WHERE j.status = 'queued'
           AND EXISTS (SELECT 1 FROM job_ready r WHERE r.tenant = j.tenant AND r.kind = j.kind AND r.seq = j.seq)
             = EXISTS (SELECT 1 FROM job_leases l WHERE l.seq = j.seq)`,
      ],
      [
        'ready or lease rows of jobs that are not queued',
        `SELECT (SELECT count(*) FROM job_ready r JOIN jobs j ON j.seq = r.seq WHERE j.status <> 'queued')
              + (SELECT count(*) FROM job_leases l JOIN jobs j ON j.seq = l.seq WHERE j.status <> 'queued')`,
      ],
      [
        'ready rows that disagree with their job row',
        `SELECT count(*) FROM job_ready r JOIN jobs j ON j.seq = r.seq WHERE r.tenant <> j.tenant OR r.kind <> j.kind OR r.priority <> j.priority
           OR r.run_after <> j.run_after OR r.deadline_at IS NOT j.deadline_at OR r.attempts <> j.attempts OR r.epoch <> j.epoch`,
      ],
      ['results of jobs that did not succeed', "SELECT count(*) FROM job_results r JOIN jobs j ON j.seq = r.job_seq WHERE j.status <> 'succeeded'"],
      [
        'succeeded jobs without their result',
        "SELECT count(*) FROM jobs j WHERE j.status = 'succeeded' AND NOT EXISTS (SELECT 1 FROM job_results r WHERE r.job_seq = j.seq)",
      ],
      [
        'tenants whose storage counter disagrees with their payloads, checkpoints, progress and results',
        `SELECT count(*) FROM tenant_counters c WHERE c.storage_bytes <>
           (SELECT coalesce(sum(payload_bytes + coalesce(length(CAST(checkpoint_state AS BLOB)), 0) + coalesce(length(CAST(progress AS BLOB)), 0)), 0)
              FROM jobs WHERE tenant = c.tenant)
         + (SELECT coalesce(sum(r.size_bytes), 0) FROM job_results r JOIN jobs j ON j.seq = r.job_seq WHERE j.tenant = c.tenant)`,
      ],
      ['tenants with jobs but no counter', 'SELECT count(DISTINCT tenant) FROM jobs WHERE tenant NOT IN (SELECT tenant FROM tenant_counters)'],
    ];
    const halfWritten: string[] = [];
    for (const [description, sql] of checks) {
      const count = db.prepare(sql).pluck().get() as number;
      if (count !== 0) halfWritten.push(`${count} ${description}`);
    }
    const integrity = db.pragma('quick_check', { simple: true });
    if (integrity !== 'ok') halfWritten.push(`quick_check: ${String(integrity)}`);
    return { jobIds, byStatus, halfWritten };
  } finally {
    db.close();
  }
}
