/**
 * The pure decisions of dedupe and unique keys (core/dedupe.ts), every branch:
 * which holders take duplicates, what each mode writes, the bounds of extend,
 * and when a unique key's holder refuses or lets go.
 */

import { describe, expect, it } from 'vitest';
import { decideDedupe, decideUnique, dedupeUntilOf, takesDuplicates, type DedupeHolder } from '../../src/core/dedupe.js';
import { JOB_STATUSES } from '../../src/core/states.js';

const holder: DedupeHolder = { status: 'queued', epoch: 0, createdAt: 1_000, runAfter: 1_000, dedupeUntil: 11_000 };

describe('takesDuplicates', () => {
  it('only a never-leased queued or waiting job inside its window', () => {
    for (const status of JOB_STATUSES) {
      expect(takesDuplicates({ ...holder, status }, 5_000), status).toBe(status === 'queued' || status === 'waiting');
    }
    expect(takesDuplicates({ ...holder, epoch: 1 }, 5_000)).toBe(false);
    expect(takesDuplicates(holder, 10_999)).toBe(true);
    expect(takesDuplicates(holder, 11_000)).toBe(false);
  });
});

describe('decideDedupe', () => {
  it('releases a holder that takes no more duplicates', () => {
    expect(decideDedupe({ ...holder, status: 'running', epoch: 1 }, { key: 'k', mode: 'drop', ttlMs: 10_000 }, 5_000)).toEqual({ kind: 'release' });
    expect(decideDedupe(holder, { key: 'k', mode: 'extend', ttlMs: 10_000 }, 11_000)).toEqual({ kind: 'release' });
  });

  it('drop leaves the holder as it is; replace replaces the payload only', () => {
    expect(decideDedupe(holder, { key: 'k', mode: 'drop', ttlMs: 10_000 }, 5_000)).toEqual({
      kind: 'merge',
      replacePayload: false,
      runAfter: 1_000,
      dedupeUntil: 11_000,
    });
    expect(decideDedupe(holder, { key: 'k', mode: 'replace', ttlMs: 99_000 }, 5_000)).toEqual({
      kind: 'merge',
      replacePayload: true,
      runAfter: 1_000,
      dedupeUntil: 11_000,
    });
  });

  it('extend pushes runAfter and the window to now + ttlMs, capped at creation + maxDelayMs, never earlier', () => {
    expect(decideDedupe(holder, { key: 'k', mode: 'extend', ttlMs: 10_000 }, 5_000)).toEqual({
      kind: 'merge',
      replacePayload: true,
      runAfter: 15_000,
      dedupeUntil: 15_000,
    });
    expect(decideDedupe(holder, { key: 'k', mode: 'extend', ttlMs: 10_000, maxDelayMs: 12_000 }, 5_000)).toMatchObject({
      runAfter: 13_000,
      dedupeUntil: 13_000,
    });
    // A holder due later, or a window open longer, than the push keeps its own.
    expect(decideDedupe({ ...holder, runAfter: 50_000 }, { key: 'k', mode: 'extend', ttlMs: 1_000 }, 5_000)).toMatchObject({
      runAfter: 50_000,
      dedupeUntil: 11_000,
    });
    // A cap below the holder's own times moves nothing.
    expect(decideDedupe({ ...holder, runAfter: 4_000 }, { key: 'k', mode: 'extend', ttlMs: 10_000, maxDelayMs: 1 }, 5_000)).toMatchObject({
      runAfter: 4_000,
      dedupeUntil: 11_000,
    });
  });

  it('a new holder’s window is its enqueue + ttlMs', () => {
    expect(dedupeUntilOf({ key: 'k', mode: 'drop', ttlMs: 250 }, 1_000)).toBe(1_250);
  });
});

describe('decideUnique', () => {
  it('refuses while the holder is unfinished (unknown included), whatever forMs', () => {
    for (const status of ['queued', 'waiting', 'running', 'unknown'] as const) {
      expect(decideUnique({ status, finishedAt: status === 'unknown' ? 1_000 : null }, { forMs: 0 }, 1e12), status).toEqual({ kind: 'refuse' });
    }
  });

  it('refuses a finished holder within forMs, releases it from then on', () => {
    for (const status of ['succeeded', 'cancelled', 'dead'] as const) {
      expect(decideUnique({ status, finishedAt: 1_000 }, { forMs: 500 }, 1_499), status).toEqual({ kind: 'refuse' });
      expect(decideUnique({ status, finishedAt: 1_000 }, { forMs: 500 }, 1_500), status).toEqual({ kind: 'release' });
      expect(decideUnique({ status, finishedAt: 1_000 }, { forMs: 0 }, 1_000), status).toEqual({ kind: 'release' });
    }
  });
});
