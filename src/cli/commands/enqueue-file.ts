/**
 * `enqueue --file jobs.ndjson`: one job per line ({kind, payload, …} as POST
 * /jobs takes it, optionally with its own idempotencyKey), sent through POST
 * /jobs/batch in batches. A line without a key gets one derived from its line
 * number and its text, so running the same file again replays instead of
 * enqueuing twice. A batch the coordinator refuses as a whole (one line fails
 * the request schema) is sent again line by line, so that only the bad lines
 * are refused. Prints a progress bar while it runs when stdout is a terminal,
 * then a summary of accepted, replayed, deduplicated (a dedupe key folded the
 * line into an existing job) and refused lines; the refused ones
 * are listed on stderr with their line numbers.
 */

import { createHash } from 'node:crypto';
import { createReadStream, statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { LeaseholdApiError } from '../../client/errors.js';
import type { LeaseholdClient } from '../../client/leasehold-client.js';
import type { EnqueueBatchItem, EnqueueBatchResult } from '../../protocol/schemas.js';
import { CliError, EXIT, type Command, type Io, type Values } from '../command.js';
import { describeError } from '../error-text.js';
import { printJson, withClient } from '../remote.js';
import { terminalSafe } from '../terminal-text.js';

const BATCH_LINES = 500;
/** Well under the coordinator's 16 MiB batch body limit. */
const BATCH_BYTES = 4 * 1024 * 1024;
const REFUSALS_SHOWN = 20;

interface Refusal {
  readonly line: number;
  readonly code: string;
  readonly message: string;
}

interface Tally {
  lines: number;
  accepted: number;
  replayed: number;
  /** Lines their dedupe key folded into an existing job. */
  deduplicated: number;
  readonly refused: Refusal[];
}

/** A line as a batch item, or why it cannot be one; `fields` are the batch item's (EnqueueBatchItem's properties). */
function parseLine(text: string, line: number, fields: ReadonlySet<string>): EnqueueBatchItem | Refusal {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { line, code: 'invalid_json', message: error instanceof Error ? error.message : 'not JSON' };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return { line, code: 'invalid_line', message: 'a line must be a JSON object {kind, payload, …}' };
  const record = value as Record<string, unknown>;
  const unknown = Object.keys(record).filter((key) => !fields.has(key));
  if (unknown.length > 0) return { line, code: 'invalid_line', message: `unknown field ${unknown.map((key) => JSON.stringify(key)).join(', ')}` };
  if (typeof record['kind'] !== 'string' || !('payload' in record)) return { line, code: 'invalid_line', message: 'a line needs a string kind and a payload' };
  const derived = `ndjson:${line}:${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
  return {
    ...(record as Omit<EnqueueBatchItem, 'idempotencyKey'>),
    idempotencyKey: typeof record['idempotencyKey'] === 'string' ? record['idempotencyKey'] : derived,
  } as EnqueueBatchItem;
}

function count(tally: Tally, result: EnqueueBatchResult | undefined, line: number): void {
  if (result !== undefined && result.status === 202) {
    if (result.replayed === true) tally.replayed += 1;
    else if (result.deduplicated === true) tally.deduplicated += 1;
    else tally.accepted += 1;
  } else {
    tally.refused.push({
      line,
      code: result?.error?.code ?? 'missing_result',
      message: result?.error?.message ?? 'the coordinator answered no result for this line',
    });
  }
}

async function send(client: LeaseholdClient, batch: readonly { item: EnqueueBatchItem; line: number }[], tally: Tally): Promise<void> {
  try {
    const { results } = await client.enqueueBatch(batch.map((entry) => entry.item));
    batch.forEach((entry, index) => count(tally, results[index], entry.line));
  } catch (error) {
    // One line that fails the request schema fails the whole batch: find it by sending each alone.
    if (!(error instanceof LeaseholdApiError) || error.code !== 'invalid_request' || batch.length === 1) {
      if (batch.length === 1 && error instanceof LeaseholdApiError && error.status < 500) {
        tally.refused.push({ line: batch[0]?.line ?? 0, code: error.code, message: error.message });
        return;
      }
      throw error;
    }
    for (const entry of batch) await send(client, [entry], tally);
  }
}

function bar(done: number, total: number, tally: Tally): string {
  const fraction = total === 0 ? 1 : Math.min(1, done / total);
  const filled = Math.round(fraction * 30);
  return `[${'#'.repeat(filled)}${'-'.repeat(30 - filled)}] ${Math.round(fraction * 100)}%  ${tally.lines} lines, ${summary(tally)}`;
}

/** The counts of accepted, replayed, deduplicated (only when some were) and refused lines. */
function summary(tally: Tally): string {
  const parts = [`${tally.accepted} accepted`, `${tally.replayed} replayed`];
  if (tally.deduplicated > 0) parts.push(`${tally.deduplicated} deduplicated`);
  return [...parts, `${tally.refused.length} refused`].join(', ');
}

export async function enqueueFile(command: Command, path: string, values: Values, io: Io): Promise<number> {
  let size: number;
  try {
    size = statSync(path).size;
  } catch (error) {
    throw new CliError('file_not_found', `cannot read ${path}: ${describeError(error)}`);
  }
  const tally: Tally = { lines: 0, accepted: 0, replayed: 0, deduplicated: 0, refused: [] };
  // Loaded here, not with the CLI: only this command needs a schema.
  const fields: ReadonlySet<string> = new Set(Object.keys((await import('../../protocol/jobs.js')).EnqueueBatchItem.properties));
  await withClient(command, values, io, async (client) => {
    const input = createReadStream(path);
    const lines = createInterface({ input, crlfDelay: Infinity });
    let batch: { item: EnqueueBatchItem; line: number }[] = [];
    let batchBytes = 0;
    let lineNumber = 0;
    const flush = async (): Promise<void> => {
      if (batch.length > 0) await send(client, batch, tally);
      batch = [];
      batchBytes = 0;
      io.progress?.(bar(input.bytesRead, size, tally));
    };
    for await (const text of lines) {
      lineNumber += 1;
      if (text.trim() === '') continue;
      tally.lines += 1;
      const parsed = parseLine(text, lineNumber, fields);
      if ('code' in parsed) {
        tally.refused.push(parsed);
        continue;
      }
      batch.push({ item: parsed, line: lineNumber });
      batchBytes += Buffer.byteLength(text);
      if (batch.length >= BATCH_LINES || batchBytes >= BATCH_BYTES) await flush();
    }
    await flush();
    io.progress?.('');
  });
  const refused = tally.refused.sort((a, b) => a.line - b.line);
  if (values['json'] === true) {
    printJson(io, {
      lines: tally.lines,
      accepted: tally.accepted,
      replayed: tally.replayed,
      deduplicated: tally.deduplicated,
      refused: refused.length,
      refusals: refused,
    });
  } else {
    for (const refusal of refused.slice(0, REFUSALS_SHOWN)) io.err(terminalSafe(`line ${refusal.line}: ${refusal.code}: ${refusal.message}`));
    if (refused.length > REFUSALS_SHOWN) io.err(`… and ${refused.length - REFUSALS_SHOWN} more refused lines (--json lists them all)`);
    io.out(`${tally.lines} lines: ${summary(tally)}`);
  }
  if (refused.length === 0) return EXIT.ok;
  return tally.accepted + tally.replayed + tally.deduplicated > 0 ? EXIT.partial : EXIT.failure;
}
