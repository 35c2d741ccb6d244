/**
 * List cursors that say nothing and cannot be carried elsewhere. A cursor is
 * the position (the job's seq) sealed with AES-256-GCM under the store's
 * cursor secret, with the listing it belongs to (tenant, owner, status and
 * kind filters) as authenticated data: a tenant learns nothing from it about
 * the global sequence (other tenants' volume), and a cursor altered, forged or
 * presented by another tenant, user or filter fails to open.
 *
 * The secret is a row of the database (`store_secrets`), created once by the
 * first store that opens it, so every coordinator over the same database opens
 * every other's cursors.
 */

import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { LeaseholdError } from '../core/errors.js';
import type { JobListItem, JobListParams, JobPage } from './store.js';

export const CURSOR_SECRET_NAME = 'list_cursor';
export const CURSOR_SECRET_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const SEQ_BYTES = 8;
/** A cursor begins with a letter: base64url may begin with '-', which a command line reads as an option (`--cursor -x…`). */
const CURSOR_PREFIX = 'c';

function binding(params: JobListParams): Buffer {
  return Buffer.from(JSON.stringify([params.scope.tenant, params.scope.owner ?? null, params.status ?? null, params.kind ?? null]), 'utf8');
}

export function newCursorSecret(): Buffer {
  return randomBytes(CURSOR_SECRET_BYTES);
}

export function sealCursor(secret: Buffer, params: JobListParams, seq: number): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', secret, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(binding(params));
  const plain = Buffer.alloc(SEQ_BYTES);
  plain.writeBigUInt64BE(BigInt(seq));
  return CURSOR_PREFIX + Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]).toString('base64url');
}

/** The position a cursor of this very listing seals; throws 400 invalid_request for any other string. */
export function openCursor(secret: Buffer, params: JobListParams, cursor: string): number {
  const sealed = cursor.startsWith(CURSOR_PREFIX) ? cursor.slice(CURSOR_PREFIX.length) : '';
  const raw = /^[A-Za-z0-9_-]+$/.test(sealed) ? Buffer.from(sealed, 'base64url') : Buffer.alloc(0);
  // Canonical encoding only: base64 tolerates trailing characters, a cursor does not.
  if (raw.length !== IV_BYTES + SEQ_BYTES + TAG_BYTES || raw.toString('base64url') !== sealed) throw invalidCursor();
  try {
    const decipher = createDecipheriv('aes-256-gcm', secret, raw.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(binding(params));
    decipher.setAuthTag(raw.subarray(IV_BYTES + SEQ_BYTES));
    const plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, IV_BYTES + SEQ_BYTES)), decipher.final()]);
    const seq = plain.readBigUInt64BE();
    if (seq > BigInt(Number.MAX_SAFE_INTEGER)) throw invalidCursor();
    return Number(seq);
  } catch {
    throw invalidCursor();
  }
}

function invalidCursor(): LeaseholdError {
  return new LeaseholdError(
    'invalid_request',
    'query/cursor is not a cursor of this listing (use the nextCursor of the previous page, with the same filters and key)',
  );
}

/** A page from rows asked for with LIMIT limit + 1: the extra row only says that a next page exists. */
export function listPage<R extends { readonly seq: number }>(
  secret: Buffer,
  params: JobListParams,
  rows: readonly R[],
  toItem: (row: R) => JobListItem,
): JobPage {
  const page = rows.slice(0, params.limit);
  const last = page[page.length - 1];
  return {
    jobs: page.map(toItem),
    nextCursor: rows.length > params.limit && last !== undefined ? sealCursor(secret, params, last.seq) : null,
  };
}
