/**
 * What a worker may write under its lease, by size and form: the checkpoint
 * state within its kind's `maxCheckpointBytes`, and the result (canonical JSON,
 * or bytes with an RFC 9110 media type) with the limit of its kind. A job's
 * kind is read only when the write is larger than the smallest limit that
 * could apply, so writes within every limit cost no lookup.
 */

import { canonicalJson } from '../core/canonical-json.js';
import { LeaseholdError } from '../core/errors.js';
import { isJobId } from '../core/ids.js';
import { isMediaType } from '../core/media-type.js';
import type { ResultBytes } from '../protocol/schemas.js';
import type { EngineContext } from './context.js';
import { JSON_CONTENT_TYPE } from './wire.js';

/** Refuses (payload_too_large) a checkpoint state larger than the job's kind allows. */
export async function checkCheckpointSize(ctx: EngineContext, tenant: string, id: string, state: unknown): Promise<void> {
  const bytes = Buffer.byteLength(canonicalJson(state ?? null), 'utf8');
  const found = await kindLimit(ctx, tenant, id, bytes, 'maxCheckpointBytes', ctx.config.maxCheckpointBytes);
  if (found !== undefined && bytes > found.limit) {
    throw new LeaseholdError('payload_too_large', `the checkpoint state is ${bytes} bytes of JSON; kind "${found.kind}" allows ${found.limit}`);
  }
}

export interface ResultInput {
  readonly contentType: string;
  readonly body: Buffer;
}

/** The result to store: JSON in canonical form, or bytes with their content type (an RFC 9110 media type). */
export function resultInput(result: unknown, resultBytes: ResultBytes | undefined): ResultInput | undefined {
  if (resultBytes !== undefined) {
    if (result !== undefined) throw new LeaseholdError('invalid_request', 'body/result and body/resultBytes are exclusive');
    if (!isMediaType(resultBytes.contentType)) {
      throw new LeaseholdError(
        'invalid_request',
        'body/resultBytes/contentType must be an RFC 9110 media type (type/subtype; name=value, ASCII, no control characters)',
      );
    }
    return { contentType: resultBytes.contentType, body: Buffer.from(resultBytes.base64, 'base64') };
  }
  return result === undefined ? undefined : { contentType: JSON_CONTENT_TYPE, body: Buffer.from(canonicalJson(result), 'utf8') };
}

/** The result limit of the job's kind (the coordinator's defaultMaxResultBytes for an unregistered kind), when it could matter. */
export async function maxResultBytesFor(ctx: EngineContext, tenant: string, id: string, result: ResultInput | undefined): Promise<number | undefined> {
  if (result === undefined) return undefined;
  return (await kindLimit(ctx, tenant, id, result.body.length, 'maxResultBytes', ctx.config.defaultMaxResultBytes))?.limit;
}

/**
 * The limit `name` of job `id`'s kind (`fallback` for an unregistered kind), looked up only when `bytes` exceed
 * the smallest such limit of the tenant's kinds; undefined when they do not, or when there is no such job (the
 * store then answers not_found).
 */
async function kindLimit(
  ctx: EngineContext,
  tenant: string,
  id: string,
  bytes: number,
  name: 'maxCheckpointBytes' | 'maxResultBytes',
  fallback: number,
): Promise<{ readonly kind: string; readonly limit: number } | undefined> {
  const kinds = await ctx.kinds.forTenant(tenant);
  const smallest = name === 'maxCheckpointBytes' ? kinds.smallestMaxCheckpointBytes : kinds.smallestMaxResultBytes;
  if (bytes <= Math.min(fallback, smallest ?? fallback)) return undefined;
  const job = isJobId(id) ? await ctx.store.jobGet({ scope: { tenant }, id }) : null;
  if (job === null) return undefined;
  return { kind: job.kind, limit: kinds.byName.get(job.kind)?.record[name] ?? fallback };
}
