/**
 * The application's own tables, in the same SQLite file as the queue: the
 * submitted documents (insert-only: a trigger refuses every UPDATE, so a
 * job's input cannot change under it), the step log (one row per tool
 * execution, marked once its checkpoint is stored) and the refused proposals.
 * The job's fenced state (its checkpoint and result) stays in the queue; these
 * rows are the audit trail the HTTP surface shows.
 */

import Database from 'better-sqlite3';
import type { Database as SqliteHandle } from 'better-sqlite3';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS documents (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  job_id TEXT,
  created_at TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS documents_immutable BEFORE UPDATE ON documents
BEGIN SELECT RAISE(ABORT, 'documents are immutable'); END;
CREATE TABLE IF NOT EXISTS document_steps (
  job_id TEXT NOT NULL,
  step_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  tool TEXT NOT NULL,
  pid INTEGER NOT NULL,
  output TEXT,
  checkpointed INTEGER NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL,
  PRIMARY KEY (job_id, step_index, attempt)
);
CREATE TABLE IF NOT EXISTS document_rejections (
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  tool TEXT,
  reason TEXT NOT NULL,
  detail TEXT NOT NULL,
  at TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);
`;

export interface DocumentRow {
  readonly id: string;
  readonly tenant: string;
  readonly title: string;
  readonly body: string;
  readonly sha256: string;
  readonly jobId: string | null;
}

export interface StepRow {
  readonly stepIndex: number;
  readonly attempt: number;
  readonly tool: string;
  readonly pid: number;
  readonly output: unknown;
  readonly checkpointed: boolean;
}

export interface RejectionRow {
  readonly attempt: number;
  readonly tool: string | null;
  readonly reason: string;
  readonly detail: string;
  readonly at: string;
}

interface RawDocument {
  id: string;
  tenant: string;
  title: string;
  body: string;
  sha256: string;
  job_id: string | null;
}

export class DocumentRecords {
  private constructor(readonly db: SqliteHandle) {}

  /** Opens (and creates) the tables in `path`, in WAL mode like the queue's own connections. */
  static open(path: string): DocumentRecords {
    const db = new Database(path);
    db.pragma('journal_mode = WAL');
    db.pragma('busy_timeout = 5000');
    db.exec(SCHEMA);
    return new DocumentRecords(db);
  }

  /** Inserts a document once; a replayed submission (same id) leaves the stored row as it is. */
  insertDocument(doc: DocumentRow, now: Date): void {
    this.db
      .prepare('INSERT INTO documents (id, tenant, title, body, sha256, job_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING')
      .run(doc.id, doc.tenant, doc.title, doc.body, doc.sha256, doc.jobId, now.toISOString());
  }

  document(id: string): DocumentRow | undefined {
    const row = this.db.prepare('SELECT id, tenant, title, body, sha256, job_id FROM documents WHERE id = ?').get(id) as RawDocument | undefined;
    return row === undefined ? undefined : { id: row.id, tenant: row.tenant, title: row.title, body: row.body, sha256: row.sha256, jobId: row.job_id };
  }

  tenantOf(id: string): string | undefined {
    return (this.db.prepare('SELECT tenant FROM documents WHERE id = ?').get(id) as { tenant: string } | undefined)?.tenant;
  }

  /** A tool is about to run: the row exists before its effect, whatever happens to the process next. */
  stepStarted(jobId: string, stepIndex: number, attempt: number, tool: string): void {
    this.db
      .prepare('INSERT OR REPLACE INTO document_steps (job_id, step_index, attempt, tool, pid, started_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(jobId, stepIndex, attempt, tool, process.pid, new Date().toISOString());
  }

  stepFinished(jobId: string, stepIndex: number, attempt: number, output: unknown): void {
    this.db
      .prepare('UPDATE document_steps SET output = ? WHERE job_id = ? AND step_index = ? AND attempt = ?')
      .run(JSON.stringify(output), jobId, stepIndex, attempt);
  }

  /** The checkpoint holding this step's output is stored (called again on resume, for a mark a crash lost). */
  stepCheckpointed(jobId: string, stepIndex: number, attempt: number): void {
    this.db.prepare('UPDATE document_steps SET checkpointed = 1 WHERE job_id = ? AND step_index = ? AND attempt = ?').run(jobId, stepIndex, attempt);
  }

  steps(jobId: string): StepRow[] {
    const rows = this.db
      .prepare('SELECT step_index, attempt, tool, pid, output, checkpointed FROM document_steps WHERE job_id = ? ORDER BY step_index, attempt')
      .all(jobId) as { step_index: number; attempt: number; tool: string; pid: number; output: string | null; checkpointed: number }[];
    return rows.map((row) => ({
      stepIndex: row.step_index,
      attempt: row.attempt,
      tool: row.tool,
      pid: row.pid,
      output: row.output === null ? null : (JSON.parse(row.output) as unknown),
      checkpointed: row.checkpointed === 1,
    }));
  }

  reject(jobId: string, attempt: number, rejection: { tool: string | null; reason: string; detail: string }): void {
    this.db
      .prepare(
        'INSERT INTO document_rejections (job_id, seq, attempt, tool, reason, detail, at) SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? FROM document_rejections WHERE job_id = ?',
      )
      .run(jobId, attempt, rejection.tool, rejection.reason, rejection.detail, new Date().toISOString(), jobId);
  }

  rejections(jobId: string): RejectionRow[] {
    return this.db.prepare('SELECT attempt, tool, reason, detail, at FROM document_rejections WHERE job_id = ? ORDER BY seq').all(jobId) as RejectionRow[];
  }

  close(): void {
    this.db.close();
  }
}
