/**
 * RFC 9110 media types as a worker may name a result's content type
 * (src/core/media-type.ts): each row is a value and whether it is one, with
 * the grammar's edge it tests; the expectations are written from the RFC's
 * grammar, not from the scanner.
 */

import { describe, expect, it } from 'vitest';
import { essenceOf, isMediaType, MAX_MEDIA_TYPE_LENGTH } from '../../src/core/media-type.js';

const VALID: readonly (readonly [string, string])[] = [
  ['application/json', 'type and subtype'],
  ['text/plain;charset=utf-8', 'a parameter without whitespace'],
  ['text/plain ; charset=utf-8', 'optional whitespace before and after ;'],
  ['text/plain;\tcharset=utf-8', 'a tab as optional whitespace'],
  ['text/plain; charset="utf-8"', 'a quoted-string value'],
  ['text/plain; a="x\\"y"', 'a quoted-pair inside a quoted-string'],
  ['text/plain; a="x\\\ty"', 'a quoted-pair of a tab'],
  ['text/plain; a="with space\tand tab!#"', 'qdtext: space, tab, ! and #'],
  ['text/plain; a=""', 'an empty quoted-string'],
  ['text/plain;', 'a trailing ; with no parameter'],
  ['text/plain; ', 'a trailing ; and whitespace'],
  ['text/plain;;a=b', 'an empty parameter between two ;'],
  ['text/plain; a=b; c="d"', 'two parameters'],
  ["application/vnd.a+b!#$%&'*.^_`|~-9", 'every tchar in the subtype'],
  ['text/plain ', 'trailing whitespace'],
  ['text/plain; a="x\\ y"', 'a quoted-pair of a space'],
  ['text/plain; a="x\\~y"', 'a quoted-pair of ~, the last visible character'],
  ['text/plain; a="~"', '~ inside a quoted-string'],
];

const INVALID: readonly (readonly [string, string])[] = [
  ['', 'empty'],
  ['text', 'no subtype'],
  ['text/', 'an empty subtype'],
  ['/plain', 'an empty type'],
  ['te xt/plain', 'a space inside the type'],
  ['text/pl ain', 'a space inside the subtype'],
  ['text/plain x', 'text after whitespace that is not a parameter'],
  ['text/plain; charset', 'a parameter without ='],
  ['text/plain; =utf-8', 'a parameter without a name'],
  ['text/plain; charset=', 'a parameter without a value'],
  ['text/plain; charset=utf 8', 'a space in a token value'],
  ['text/plain; a="unterminated', 'an unterminated quoted-string'],
  ['text/plain; a="x"y', 'text after a quoted-string'],
  ['text/plain; a="x\\', 'a backslash at the end'],
  ['text/plain; a="x\\\u0001"', 'a quoted-pair of a control character'],
  ['text/plain; a="x\u0001"', 'a control character inside a quoted-string'],
  ['text/plain; a="x\u007f"', 'DEL inside a quoted-string'],
  ['text/plain; a="é"', 'a non-ASCII character inside a quoted-string'],
  ['text/plain;\u0001', 'a control character after ;'],
  ['text/plain\r\nX-Evil: 1', 'a second header smuggled in'],
  ['text/plain\u0000', 'NUL'],
  ['téxt/plain', 'a non-ASCII character in the type'],
  ['text/plain,text/html', 'a comma'],
  ['text;plain', 'a ; where the / belongs'],
  ['text plain', 'a space where the / belongs'],
  ['text/plain; a;b', 'a parameter name followed by ; instead of ='],
  ['text/plain; a="x\\\u007f"', 'a quoted-pair of DEL'],
];

describe('isMediaType', () => {
  it.each(VALID)('accepts %j (%s)', (value) => {
    expect(isMediaType(value)).toBe(true);
  });
  it.each(INVALID)('refuses %j (%s)', (value) => {
    expect(isMediaType(value)).toBe(false);
  });
  it(`refuses anything longer than ${MAX_MEDIA_TYPE_LENGTH} characters, and accepts exactly that many`, () => {
    const at = `a/${'b'.repeat(MAX_MEDIA_TYPE_LENGTH - 2)}`;
    expect(at.length).toBe(MAX_MEDIA_TYPE_LENGTH);
    expect(isMediaType(at)).toBe(true);
    expect(isMediaType(`${at}b`)).toBe(false);
  });
  it('answers a long run of " ; " at once (no backtracking)', () => {
    const value = `a/b${' ; '.repeat(80)}`;
    const started = performance.now();
    expect(isMediaType(value)).toBe(true);
    expect(performance.now() - started).toBeLessThan(50);
  });
});

describe('essenceOf', () => {
  it('is the lowercased type/subtype without parameters or whitespace', () => {
    expect(essenceOf('Text/HTML; charset=utf-8')).toBe('text/html');
    expect(essenceOf(' application/json ')).toBe('application/json');
    expect(essenceOf('text/plain')).toBe('text/plain');
    expect(essenceOf('')).toBe('');
  });
});
