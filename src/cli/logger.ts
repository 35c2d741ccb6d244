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
  return destination === undefined ? pino(options) : pino(options, destination);
}
