/**
 * Identifiers and secrets. Job ids are time-ordered (UUIDv7 layout) so that
 * indexes stay append-mostly; lease tokens and API keys are 128+ random bits.
 */

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Random bytes drawn from the OS in 4 KiB blocks: one syscall per ~200 ids or
 * tokens instead of one each (it showed up at ~6% of coordinator CPU).
 * Every byte is still from the CSPRNG and used once.
 */
const POOL_SIZE = 4096;
let pool = Buffer.alloc(0);
let poolOffset = 0;

function takeRandom(size: number): Buffer {
  if (poolOffset + size > pool.length) {
    pool = randomBytes(POOL_SIZE);
    poolOffset = 0;
  }
  const slice = Buffer.from(pool.subarray(poolOffset, poolOffset + size));
  poolOffset += size;
  return slice;
}

export function newJobId(now: number = Date.now()): string {
  const bytes = takeRandom(16);
  const ms = BigInt(now);
  for (let i = 0; i < 6; i++) bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x70;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const JOB_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isJobId(value: string): boolean {
  return JOB_ID_PATTERN.test(value);
}

export function newLeaseToken(): string {
  return takeRandom(18).toString('base64url');
}

const API_KEY_PREFIX = 'lh_';

export function newApiKey(): string {
  return API_KEY_PREFIX + randomBytes(24).toString('base64url');
}

/** Keys are stored only as this hash. SHA-256 suffices: keys are 192 random bits, not passwords. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  if (left.length !== right.length) return false;
  return timingSafeEqual(left, right);
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}
