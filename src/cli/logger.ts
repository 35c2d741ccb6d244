/**
 * The pino logger of `serve`, `worker` and `dev`: JSON lines on stdout (or
 * `destination`), with every field that could hold an API key or a lease
 * token written as [redacted] (src/core/log-redaction.ts).
 */

import type { DestinationStream, Logger } from 'pino';
import { logRedaction } from '../core/log-redaction.js';

/** Info and debug lines wait at most this long (or until LOG_BATCH_BYTES gather) before they are written. */
const LOG_FLUSH_MS = 100;
const LOG_BATCH_BYTES = 8_192;

export async function cliLogger(name: string, level: string, destination?: DestinationStream): Promise<Logger> {
  const { pino } = await import('pino');
  const options = {
    name,
    level,
    redact: logRedaction(),
    hooks: {
      // Warnings and errors are written at once: an operator (or a crash) must not lose them to the batch.
      logMethod(this: Logger, args: Parameters<Logger['info']>, method: Logger['info'], levelNumber: number) {
        method.apply(this, args);
        if (levelNumber >= this.levels.values['warn']!) this.flush();
      },
    },
  };
  // Batched asynchronous writes to stdout: a busy coordinator logs two lines per job (leased, completed),
  // and one write each, even asynchronous, cost the event loop and woke whatever reads stdout once per
  // line. Lines gather until LOG_BATCH_BYTES or LOG_FLUSH_MS, whichever comes first; pino flushes what
  // is pending when the process exits (a SIGKILL loses at most the last LOG_FLUSH_MS of info lines).
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_MS }));
}
