/**
 * A job result that is not JSON. A handler returns `new BinaryResult(bytes,
 * 'image/png')` (or a bare Buffer/Uint8Array, sent as
 * application/octet-stream); the worker sends it base64-encoded and the
 * coordinator stores the bytes with their content type and checksum.
 */

import type { ResultBytes } from '../protocol/schemas.js';

export class BinaryResult {
  constructor(
    readonly body: Uint8Array,
    readonly contentType: string = 'application/octet-stream',
  ) {}
}

/** The wire form of a handler's return value when it is bytes; undefined when it is JSON. */
export function resultBytesOf(value: unknown): ResultBytes | undefined {
  if (value instanceof BinaryResult)
    return { contentType: value.contentType, base64: Buffer.from(value.body.buffer, value.body.byteOffset, value.body.byteLength).toString('base64') };
  if (value instanceof Uint8Array)
    return { contentType: 'application/octet-stream', base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
  return undefined;
}
