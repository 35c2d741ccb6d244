/**
 * The pino logger of `serve`, `worker` and `dev`: JSON lines on stdout (or
 * `destination`), with every field that could hold an API key or a lease
 * token written as [redacted] (src/core/log-redaction.ts).
 */

import type { DestinationStream, Logger } from 'pino';
import { logRedaction } from '../core/log-redaction.js';

export async function cliLogger(name: string, level: string, destination?: DestinationStream): Promise<Logger> {
  const { pino } = await import('pino');
  const options = { name, level, redact: logRedaction() };
  // Asynchronous writes to stdout: lines that arrive while a write is in flight go out together in the
  // next one, so a busy coordinator's per-job lines (leased, completed) cost a few syscalls per batch
  // instead of one blocking write each (a synchronous stdout halved end-to-end throughput in
  // `npm run bench`). pino flushes what is pending when the process exits.
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false }));
}
