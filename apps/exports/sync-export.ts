/**
 * The synchronous baseline: GET /tasks/export.csv streams the owner's tasks as
 * CSV while the request is open. Each export reads through a read-only
 * connection of its own (a better-sqlite3 connection with an open iterator
 * cannot run other statements), pulled a batch of rows at a time as the socket
 * drains, one batch per turn of the event loop; when the client goes away the stream is destroyed, the iterator is
 * returned and the statement stops reading.
 */

import { Readable } from 'node:stream';
import { exportQuery, openAppDb, type ExportStatusFilter, type Task } from './db.js';
import { CSV_HEADER, csvRow } from './csv.js';

/** How a synchronous export ended: every row written, or stopped after `rowsRead` when the client left. */
export interface SyncExportEnd {
  readonly userId: number;
  readonly rowsRead: number;
  readonly completed: boolean;
}

/** Rows turned into one chunk per pull: large enough to amortize the call, small enough to yield to other requests. */
const ROWS_PER_PULL = 500;

export function streamExport(path: string, userId: number, filter: ExportStatusFilter, onEnd: (end: SyncExportEnd) => void): Readable {
  const db = openAppDb(path, { readonly: true });
  const rows: Iterator<Task> = exportQuery(db).iterate({ userId, status: filter });
  let rowsRead = 0;
  let finished = false;
  let headerSent = false;
  const finish = (completed: boolean): void => {
    if (finished) return;
    finished = true;
    rows.return?.();
    db.close();
    onEnd({ userId, rowsRead, completed });
  };
  let scheduled = false;
  const stream = new Readable({
    // Each chunk is about 90 kB; a small buffer means a slow client stops the reading, not the memory.
    highWaterMark: 64 * 1024,
    read() {
      // One batch per turn of the event loop: pulling in read() itself runs batch after batch from
      // nextTick while a fast client drains, and task requests wait behind the whole export (GATE.md).
      if (scheduled) return;
      scheduled = true;
      setImmediate(pull);
    },
    destroy(error, callback) {
      finish(false);
      callback(error);
    },
  });
  const pull = (): void => {
    scheduled = false;
    if (finished) return;
    let chunk = headerSent ? '' : CSV_HEADER;
    headerSent = true;
    for (let n = 0; n < ROWS_PER_PULL; n++) {
      const next = rows.next();
      if (next.done === true) {
        stream.push(chunk);
        finish(true);
        stream.push(null);
        return;
      }
      rowsRead++;
      chunk += csvRow(next.value);
    }
    stream.push(chunk);
  };
  return stream;
}
