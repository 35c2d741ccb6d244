/**
 * The pure decisions of dependencies and per-key ordering
 * (src/core/dependencies.ts): where a job starts, what a parent's end means
 * for its children, and when a waiting job is released.
 */

import { describe, expect, it } from 'vitest';
import { decideParentEnd, decideRelease, decideStart, hasKeyTurn, holdsKeyTurn } from '../../src/core/dependencies.js';
import { JOB_STATUSES } from '../../src/core/states.js';

const FREE = { earlierHolder: false, otherActive: false };

describe('dependencies and per-key ordering', () => {
  it('starts a job queued only with no pending parent and the key\u2019s turn; dead at once after a failed parent', () => {
    expect(decideStart({ pendingParents: 0, failedParent: false, key: null })).toEqual({ kind: 'queued' });
    expect(decideStart({ pendingParents: 0, failedParent: false, key: FREE })).toEqual({ kind: 'queued' });
    expect(decideStart({ pendingParents: 1, failedParent: false, key: null })).toEqual({ kind: 'waiting' });
    expect(decideStart({ pendingParents: 0, failedParent: false, key: { earlierHolder: true, otherActive: false } })).toEqual({ kind: 'waiting' });
    expect(decideStart({ pendingParents: 0, failedParent: false, key: { earlierHolder: false, otherActive: true } })).toEqual({ kind: 'waiting' });
    // A failed parent wins over everything else.
    expect(decideStart({ pendingParents: 3, failedParent: true, key: { earlierHolder: true, otherActive: true } })).toEqual({ kind: 'dependency_failed' });
  });

  it('satisfies children on success, fails them on dead or cancelled, holds them on every other status', () => {
    for (const status of JOB_STATUSES) {
      const expected = status === 'succeeded' ? 'satisfied' : status === 'dead' || status === 'cancelled' ? 'failed' : 'none';
      expect(decideParentEnd(status), status).toEqual({ kind: expected });
    }
  });

  it('passes the key\u2019s turn on from every final status, never from queued, waiting or running (a retry keeps it)', () => {
    expect(JOB_STATUSES.filter(holdsKeyTurn).sort()).toEqual(['queued', 'running', 'waiting']);
    expect(hasKeyTurn(null)).toBe(true);
    expect(hasKeyTurn(FREE)).toBe(true);
    expect(hasKeyTurn({ earlierHolder: true, otherActive: false })).toBe(false);
    expect(hasKeyTurn({ earlierHolder: false, otherActive: true })).toBe(false);
  });

  it('releases only a waiting job with no pending parent whose key lets it run', () => {
    expect(decideRelease({ status: 'waiting', pendingParents: 0, key: null })).toEqual({ kind: 'release' });
    expect(decideRelease({ status: 'waiting', pendingParents: 0, key: FREE })).toEqual({ kind: 'release' });
    expect(decideRelease({ status: 'waiting', pendingParents: 1, key: null })).toEqual({ kind: 'keep_waiting' });
    expect(decideRelease({ status: 'waiting', pendingParents: 0, key: { earlierHolder: false, otherActive: true } })).toEqual({ kind: 'keep_waiting' });
    expect(decideRelease({ status: 'waiting', pendingParents: 0, key: { earlierHolder: true, otherActive: false } })).toEqual({ kind: 'keep_waiting' });
    for (const status of JOB_STATUSES.filter((s) => s !== 'waiting'))
      expect(decideRelease({ status, pendingParents: 0, key: null })).toEqual({ kind: 'keep_waiting' });
  });
});
