/**
 * List cursors: opaque, bound to their listing, and safe to paste after
 * `--cursor` on a command line (a value that begins with '-' is read by the
 * CLI's argument parser as another option).
 */

import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { newCursorSecret, openCursor, sealCursor } from '../../src/store/list-cursor.js';
import type { JobListParams } from '../../src/store/store.js';

const listing: JobListParams = { scope: { tenant: 'acme' }, limit: 10 };

describe('list cursors', () => {
  it('never begin with a dash, so `--cursor C` as printed parses; each opens to its position', () => {
    const secret = newCursorSecret();
    // Each cursor has a fresh random IV: 500 of them would include a leading '-' (1 in 64) all but certainly.
    for (let seq = 1; seq <= 500; seq += 1) {
      const cursor = sealCursor(secret, listing, seq);
      expect(cursor).toMatch(/^[A-Za-z]/);
      const { values } = parseArgs({ args: ['--cursor', cursor], options: { cursor: { type: 'string' } } });
      expect(openCursor(secret, listing, values.cursor!)).toBe(seq);
    }
  });

  it('refuse another listing, another secret, and altered text', () => {
    const secret = newCursorSecret();
    const cursor = sealCursor(secret, listing, 42);
    const refused = (text: string, params: JobListParams = listing, key: Buffer = secret): void => {
      expect(() => openCursor(key, params, text)).toThrow(expect.objectContaining({ code: 'invalid_request' }));
    };
    refused(cursor, { ...listing, scope: { tenant: 'other' } });
    refused(cursor, { ...listing, kind: 'mail' });
    refused(cursor, listing, newCursorSecret());
    refused(cursor.slice(1));
    refused(cursor + 'A');
    refused(`${cursor.slice(0, -1)}${cursor.endsWith('A') ? 'B' : 'A'}`);
    refused('');
  });
});
