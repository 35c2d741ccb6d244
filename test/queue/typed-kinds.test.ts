/**
 * Typed kinds, proven by the compiler: `npm run check` and `npm test` compile
 * this file (tsconfig.test.json), and each `@ts-expect-error` below fails the
 * build if the line after it compiles. The runtime part only keeps vitest
 * from reporting an empty file; the functions are never called.
 */

import { expect, it } from 'vitest';
import { Worker, type Queue } from '../../src/index.js';

type Kinds = { email: { to: string }; report: { pages: number } };

export async function wrongPayloads(queue: Queue<Kinds>): Promise<void> {
  await queue.enqueue({ kind: 'email', payload: { to: 'a@example.com' }, idempotencyKey: 'ok' });
  // @ts-expect-error: an email's payload needs `to`.
  await queue.enqueue({ kind: 'email', payload: { pages: 3 }, idempotencyKey: 'k' });
  // @ts-expect-error: `to` is a string.
  await queue.enqueue({ kind: 'email', payload: { to: 42 }, idempotencyKey: 'k' });
  // @ts-expect-error: no such kind.
  await queue.enqueue({ kind: 'sms', payload: {}, idempotencyKey: 'k' });
  // @ts-expect-error: the idempotency key is required.
  await queue.enqueue({ kind: 'report', payload: { pages: 1 } });
  await queue.enqueueMany([
    { kind: 'report', payload: { pages: 1 }, idempotencyKey: 'a' },
    // @ts-expect-error: in a batch too, the payload matches its kind.
    { kind: 'report', payload: { to: 'x' }, idempotencyKey: 'b' },
  ]);
}

export function wrongHandlers(queue: Queue<Kinds>): void {
  new Worker({ queue, handlers: { email: (ctx) => ctx.payload.to.toUpperCase(), report: (ctx) => ctx.payload.pages + 1 } });
  // @ts-expect-error: an email handler's payload has no `pages`.
  new Worker({ queue, handlers: { email: (ctx) => ctx.payload.pages } });
  // @ts-expect-error: no handler for a kind the queue does not have.
  new Worker({ queue, handlers: { sms: () => null } });
}

it('is checked by the compiler (see the @ts-expect-error lines)', () => {
  expect(typeof wrongPayloads).toBe('function');
  expect(typeof wrongHandlers).toBe('function');
});
