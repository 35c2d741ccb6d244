/**
 * SQLite: retention batches (src/store/retention.ts). jobPurgeSelect walks
 * jobs_finished (status, finished_at) oldest first from the earliest cutoff
 * any kind could have, and stops after `limit` matches; the job's kind row
 * (its own period) is joined per row. The batch's attempts, result and job
 * rows (and its dependency edges) go in the same transaction as their counter rows (counter-moves.ts), so that
 * transaction holds the write lock for one bounded batch (docs/SCALING.md).
 *
 * A finished parent whose children still wait (a requeued child counts a dead
 * parent as pending) is kept until they no longer do: deleting it would leave
 * them waiting for ever.
 *
 * Freed pages: databases created by this store use auto_vacuum=INCREMENTAL
 * (set before the first table exists; an existing database keeps its mode
 * until an operator runs VACUUM, docs/SCALING.md). After each batch
 * `PRAGMA incremental_vacuum(N)` returns free pages to the file system in
 * steps of N pages, each a write of its own, so no single step holds the lock
 * for long; in a database without auto_vacuum it does nothing and freed pages
 * are reused.
 */

import type { Database, Statement } from 'better-sqlite3';
import type { JobStatus } from '../../core/states.js';
import { NO_KIND_RETENTION, type JobPurgeCountParams, type JobPurgeParams, type KindRetention } from '../retention.js';
import type { CounterMoves } from './counter-moves.js';
import { countedJob } from './rows.js';

interface PurgedRow {
  readonly tenant: string;
  readonly kind: string;
  readonly status: JobStatus;
  readonly created_at: number;
  readonly started_at: number | null;
  readonly finished_at: number | null;
}

/** Free pages one vacuum step returns to the file system (4 KiB pages: 1 MiB). */
export const VACUUM_PAGES_PER_STEP = 256;

/** Vacuum steps after one purge batch at most (16 MiB); what is left waits for the next batch. */
export const VACUUM_STEPS_PER_BATCH = 16;

const PERIOD = `COALESCE(CASE WHEN @kindRetention = 0 THEN NULL WHEN @status = 'succeeded' THEN k.retention_succeeded_ms
    WHEN @status = 'cancelled' THEN k.retention_cancelled_ms ELSE k.retention_dead_ms END, @olderThanMs)`;

// The literal IN list lets the planner use the partial index jobs_finished; @floor bounds the walk.
const MATCHING = `FROM jobs j LEFT JOIN kinds k ON k.tenant = j.tenant AND k.kind = j.kind
  WHERE j.status IN ('succeeded', 'cancelled', 'dead') AND j.status = @status AND j.finished_at <= @floor
    AND j.finished_at <= @now - ${PERIOD} AND (@tenant IS NULL OR j.tenant = @tenant) AND (@kind IS NULL OR j.kind = @kind)
    AND (j.has_children = 0 OR NOT EXISTS (SELECT 1 FROM job_dependencies d JOIN jobs c ON c.seq = d.child_seq
      WHERE d.parent_seq = j.seq AND c.status = 'waiting'))`;

export const RETENTION_SQL = {
  jobPurgeShortestPeriod: `SELECT MIN(CASE @status WHEN 'succeeded' THEN retention_succeeded_ms WHEN 'cancelled' THEN retention_cancelled_ms
      ELSE retention_dead_ms END) AS shortest FROM kinds`,
  jobPurgeSelect: `SELECT j.seq, j.tenant, j.kind, j.status, j.created_at, j.started_at, j.finished_at,
      j.payload_bytes + coalesce(length(CAST(j.checkpoint_state AS BLOB)), 0)
      + coalesce(length(CAST(j.progress AS BLOB)), 0) + coalesce((SELECT r.size_bytes FROM job_results r WHERE r.job_seq = j.seq), 0) AS bytes,
      (SELECT count(*) FROM job_attempts a WHERE a.job_seq = j.seq AND a.ended_at IS NOT NULL) AS ended_attempts,
      (SELECT coalesce(sum(a.ended_at - a.started_at), 0) FROM job_attempts a WHERE a.job_seq = j.seq AND a.ended_at IS NOT NULL) AS attempt_run_ms
    ${MATCHING} ORDER BY j.finished_at LIMIT @limit`,
  jobPurgeCount: `SELECT COUNT(*) AS n ${MATCHING}`,
  jobPurgeAttempts: `DELETE FROM job_attempts WHERE job_seq IN (SELECT value FROM json_each(?))`,
  jobPurgeResults: `DELETE FROM job_results WHERE job_seq IN (SELECT value FROM json_each(?))`,
  jobPurgeDependencies: `DELETE FROM job_dependencies WHERE parent_seq IN (SELECT value FROM json_each(@seqs))
    OR child_seq IN (SELECT value FROM json_each(@seqs))`,
  jobPurgeJobs: `DELETE FROM jobs WHERE seq IN (SELECT value FROM json_each(?))`,
} as const;

/** The kinds-table bindings of a kind's retention periods. */
export function retentionBindings(retention: KindRetention = NO_KIND_RETENTION): Record<string, number | null> {
  return { retentionSucceededMs: retention.succeededMs, retentionCancelledMs: retention.cancelledMs, retentionDeadMs: retention.deadMs };
}

const INCREMENTAL = 2;

type Statements = { readonly [K in keyof typeof RETENTION_SQL]: Statement };

export class RetentionStatements {
  private readonly statements: Statements;
  /** The database's auto_vacuum mode, read once (it changes only through VACUUM). */
  private readonly autoVacuum: number;

  constructor(private readonly db: Database) {
    this.autoVacuum = db.pragma('auto_vacuum', { simple: true }) as number;
    const entries = Object.entries(RETENTION_SQL).map(([name, sql]) => [name, db.prepare(sql)]);
    this.statements = Object.fromEntries(entries) as Statements;
  }

  /** Runs inside a write transaction: deletes one batch and answers how many jobs went; `moves` takes them out of the counters. */
  purge(params: JobPurgeParams, now: number, moves: CounterMoves): number {
    const rows = this.statements.jobPurgeSelect.all({ ...this.bindings(params, now), limit: params.limit }) as (PurgedRow & {
      seq: number;
      bytes: number;
      ended_attempts: number;
      attempt_run_ms: number;
    })[];
    if (rows.length === 0) return 0;
    const seqs = JSON.stringify(rows.map((row) => row.seq));
    this.statements.jobPurgeAttempts.run(seqs);
    this.statements.jobPurgeResults.run(seqs);
    this.statements.jobPurgeDependencies.run({ seqs });
    this.statements.jobPurgeJobs.run(seqs);
    for (const row of rows) {
      moves.deleted(countedJob(row, row.status));
      moves.storage(row.tenant, -row.bytes);
      for (let i = 0; i < row.ended_attempts; i++) moves.attemptEnded(row.tenant, i === 0 ? row.attempt_run_ms : 0, -1);
    }
    return rows.length;
  }

  count(params: JobPurgeCountParams, now: number): number {
    return (this.statements.jobPurgeCount.get(this.bindings(params, now)) as { n: number }).n;
  }

  /** Returns up to VACUUM_PAGES_PER_STEP free pages to the file system (a no-op without auto_vacuum); true while free pages remain. */
  vacuumStep(): boolean {
    if (this.autoVacuum !== INCREMENTAL) return false;
    this.db.pragma(`incremental_vacuum(${VACUUM_PAGES_PER_STEP})`);
    return (this.db.pragma('freelist_count', { simple: true }) as number) > 0;
  }

  private bindings(params: JobPurgeCountParams, now: number): Record<string, string | number | null> {
    const shortestKind = params.kindRetention
      ? (this.statements.jobPurgeShortestPeriod.get({ status: params.status }) as { shortest: number | null }).shortest
      : null;
    const shortest = shortestKind === null ? params.olderThanMs : Math.min(shortestKind, params.olderThanMs);
    return {
      status: params.status,
      olderThanMs: params.olderThanMs,
      kindRetention: params.kindRetention ? 1 : 0,
      floor: now - shortest,
      now,
      tenant: params.tenant ?? null,
      kind: params.kind ?? null,
    };
  }
}
