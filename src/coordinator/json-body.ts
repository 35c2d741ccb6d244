/**
 * The only body parser: application/json, read as text and parsed once.
 * Everything else is refused with 415. Beyond JSON syntax it rejects two kinds
 * of input that parse but must not be accepted: keys that could reach an
 * object's prototype (`__proto__`, `constructor.prototype`), and integers
 * beyond Number.MAX_SAFE_INTEGER, which JSON.parse silently rounds — storing
 * them would hand back a different number than the one that was sent, and the
 * idempotency hash would compare the rounded value. It also refuses nesting
 * deeper than MAX_JSON_DEPTH: the parser copes with any depth, but everything
 * after it (canonical JSON, schema compilation, serialization) recurses once
 * per level, and a few thousand levels overflow the stack — a 500 for bad input.
 */

import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { ERRORS, LeaseholdError } from '../core/errors.js';
import { describeJsonError } from '../core/json-error.js';

const SUSPECT_KEY = /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)|"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)/;
/** A run of 16 digits is the shortest text that can hold an unsafe integer; most bodies skip the scan. */
const LONG_DIGITS = /\d{16}/;
/** Arrays and objects inside each other; far beyond any real payload, far below the stack. */
export const MAX_JSON_DEPTH = 128;

export function parseJsonBody(text: string): unknown {
  if (text.length === 0) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new LeaseholdError('invalid_json', `${ERRORS.invalid_json.message}: ${describeJsonError(text, error)}`);
  }
  // A text shorter than two brackets per level cannot be too deep; most bodies skip the scan.
  // Checked first: the prototype-key scan below recurses too.
  if (text.length > 2 * MAX_JSON_DEPTH && exceedsDepth(text, MAX_JSON_DEPTH)) {
    throw new LeaseholdError('invalid_request', `the request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  if (value !== null && typeof value === 'object' && SUSPECT_KEY.test(text)) {
    try {
      secureJson.scan(value, { protoAction: 'error', constructorAction: 'error' });
    } catch {
      throw new LeaseholdError('invalid_request', 'the request body contains a forbidden key (__proto__ or constructor.prototype)');
    }
  }
  if (LONG_DIGITS.test(text) && hasUnsafeInteger(text)) {
    throw new LeaseholdError(
      'invalid_request',
      'the request body contains an integer beyond ±9007199254740991, which cannot be represented exactly; send it as a string',
    );
  }
  return value;
}

/** Whether JSON text (already known to be valid) nests arrays and objects deeper than `max`. */
export function exceedsDepth(text: string, max: number): boolean {
  const length = text.length;
  let depth = 0;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      // Skip a string literal, including escaped quotes.
      for (i++; i < length; i++) {
        const d = text.charCodeAt(i);
        if (d === 92) i++;
        else if (d === 34) break;
      }
    } else if (c === 91 || c === 123) {
      if (++depth > max) return true;
    } else if (c === 93 || c === 125) depth--;
  }
  return false;
}

/** Scans JSON text (already known to be valid) for an integer literal outside the safe range. */
export function hasUnsafeInteger(text: string): boolean {
  const length = text.length;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      // Skip a string literal, including escaped quotes.
      i++;
      while (i < length) {
        const d = text.charCodeAt(i);
        if (d === 92) i += 2;
        else if (d === 34) {
          i++;
          break;
        } else i++;
      }
      continue;
    }
    if (c === 45 || (c >= 48 && c <= 57)) {
      const start = c === 45 ? i + 1 : i;
      let integer = true;
      i++;
      while (i < length) {
        const d = text.charCodeAt(i);
        if (d >= 48 && d <= 57) i++;
        else if (d === 46 || d === 101 || d === 69 || d === 43 || d === 45) {
          integer = false;
          i++;
        } else break;
      }
      if (integer && i - start > 15 && !Number.isSafeInteger(Number(text.slice(start, i)))) return true;
      continue;
    }
    i++;
  }
  return false;
}

export function installJsonBodyParser(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request: FastifyRequest, body: string | Buffer, done) => {
    try {
      done(null, parseJsonBody(typeof body === 'string' ? body : body.toString('utf8')));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}
