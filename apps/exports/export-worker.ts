/**
 * The export worker's handler: it reads the owner's tasks through a read-only
 * connection of its own (one statement, so one consistent snapshot: the CSV
 * is the task state this attempt read, not the state at enqueue time) and
 * returns the CSV as a BinaryResult. leasehold commits the result and the
 * success in one transaction under this attempt's live lease and discards
 * the bytes of an attempt whose lease was lost.
 *
 * Failures follow the design's table: a busy database is transient (thrown
 * as is, retried with backoff); invalid parameters, a missing owner and a CSV
 * over the size limit are permanent, with a stable code.
 */

import { BinaryResult, PermanentJobError, type JobContext } from '../../src/index.js';
import { exportQuery, openAppDb, type Task } from './db.js';
import { CSV_HEADER, csvRow } from './csv.js';
import { normalizeParameters, type ExportPayload, type ExportSettings } from './export-job.js';

/** Rows between yields to the event loop, where lease renewal and the abort signal get their turn. */
const ROWS_PER_SLICE = 500;

export interface ExportHooks {
  /** Called after each slice of rows (tests wait for it to kill a worker in the middle of a CSV). */
  readonly onRows?: (jobId: string, attempt: number, rows: number) => Promise<void> | void;
}

export function exportHandler(path: string, settings: Pick<ExportSettings, 'maxResultBytes'>, hooks: ExportHooks = {}) {
  return async (ctx: JobContext<ExportPayload>): Promise<BinaryResult> => {
    const payload = ctx.payload as unknown;
    const ownerId = typeof payload === 'object' && payload !== null ? (payload as { ownerId?: unknown }).ownerId : undefined;
    const checked = normalizeParameters(typeof payload === 'object' && payload !== null ? { status: (payload as { status?: unknown }).status } : payload);
    if (typeof ownerId !== 'number' || !Number.isSafeInteger(ownerId) || !checked.ok) {
      throw new PermanentJobError('the stored export parameters are invalid', 'invalid_parameters');
    }
    const db = openAppDb(path, { readonly: true });
    try {
      if (db.prepare('SELECT 1 FROM users WHERE id = ?').get(ownerId) === undefined) {
        throw new PermanentJobError('the export belongs to no existing user', 'owner_missing');
      }
      const chunks: Buffer[] = [Buffer.from(CSV_HEADER)];
      let bytes = chunks[0]?.length ?? 0;
      let rows = 0;
      let slice = '';
      for (const task of exportQuery(db).iterate({ userId: ownerId, status: checked.parameters.status }) as IterableIterator<Task>) {
        slice += csvRow(task);
        rows++;
        if (rows % ROWS_PER_SLICE !== 0) continue;
        bytes += Buffer.byteLength(slice);
        if (bytes > settings.maxResultBytes) throw new PermanentJobError(`the CSV is over the limit of ${settings.maxResultBytes} bytes`, 'result_too_large');
        chunks.push(Buffer.from(slice));
        slice = '';
        await hooks.onRows?.(ctx.id, ctx.attempt, rows);
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (ctx.signal.aborted) throw ctx.signal.reason;
      }
      bytes += Buffer.byteLength(slice);
      if (bytes > settings.maxResultBytes) throw new PermanentJobError(`the CSV is over the limit of ${settings.maxResultBytes} bytes`, 'result_too_large');
      chunks.push(Buffer.from(slice));
      return new BinaryResult(Buffer.concat(chunks), 'text/csv; charset=utf-8');
    } finally {
      db.close();
    }
  };
}
