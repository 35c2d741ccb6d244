/**
 * describeJsonError (src/core/json-error.ts): the engine's reason without the
 * echoed input, and where in the text it stopped, as line, column and offset.
 */

import { expect, it } from 'vitest';
import { describeJsonError } from '../../src/core/json-error.js';

function parseError(text: string): unknown {
  try {
    JSON.parse(text);
  } catch (error) {
    return error;
  }
  throw new Error(`${text} parsed`);
}

it('names the line, column and position of the first bad character', () => {
  const text = '{\n  "a": 1,\n  b: 2\n}';
  const message = describeJsonError(text, parseError(text));
  expect(message).toMatch(/at line 3, column 3 \(position 14\)$/);
  expect(message).not.toMatch(/in JSON at position/);
});

it('on the first line counts columns from 1', () => {
  const text = '{name:"x"}';
  expect(describeJsonError(text, parseError(text))).toBe(`Expected property name or '}' at line 1, column 2 (position 1)`);
});

it('says the text ended early, at its end', () => {
  const text = '[1,';
  expect(describeJsonError(text, parseError(text))).toBe('the text ends before the JSON value is complete (at line 1, column 4 (position 3))');
  const lines = '{\n"a":';
  expect(describeJsonError(lines, parseError(lines))).toBe('the text ends before the JSON value is complete (at line 2, column 5 (position 6))');
});

it('keeps the reason but drops the input V8 echoes after it', () => {
  const text = 'abc';
  const message = describeJsonError(text, parseError(text));
  expect(message).not.toContain('"abc"');
  // A reason that names a position keeps it, as line and column.
  const late = '{"a": [1, 2';
  expect(describeJsonError(late, parseError(late))).toBe(`Expected ',' or ']' after array element at line 1, column 12 (position 11)`);
  expect(message).toBe("Unexpected token 'a'");
});

it('passes through a reason without a position, and what is not an Error', () => {
  expect(describeJsonError('x', new Error('something else went wrong'))).toBe('something else went wrong');
  expect(describeJsonError('x', 'a plain string')).toBe('a plain string');
});
