/**
 * What a library call is checked against before the engine runs it: the
 * HTTP API's own TypeBox schemas, compiled as the coordinator compiles them
 * (engine/validation.ts), so a value the HTTP API would refuse is refused
 * here with the same invalid_request message. A body is checked as given; a
 * query and path parameters are coerced as the route coerces their text (on
 * a copy: the caller's object is left alone).
 */

import type { TSchema } from '@sinclair/typebox';
import { LeaseholdError } from '../core/errors.js';
import { describeValidationError, validatorCompiler, type AjvLikeError } from '../engine/validation.js';

type Check = ((value: unknown) => boolean) & { errors?: AjvLikeError[] | null };

/** Where a value travels in the HTTP API: its error names the part, e.g. `body/kind is required`. */
export type RequestPart = 'body' | 'querystring' | 'params';

const compile = validatorCompiler();

/** A check of `schema` for the given part: the value, as the route would see it, or invalid_request. */
export function partCheck<T>(schema: TSchema, part: RequestPart = 'body'): (value: unknown) => T {
  const check = compile({ schema, httpPart: part }) as Check;
  return (value) => {
    const seen = part === 'body' || value === null || typeof value !== 'object' ? value : { ...value };
    if (!check(seen)) throw new LeaseholdError('invalid_request', describeValidationError(check.errors?.[0] ?? undefined, part));
    return seen as T;
  };
}

/** A body check that only refuses (the worker's calls keep their own value). */
export function bodyCheck(schema: TSchema): (value: unknown) => void {
  const check = partCheck<unknown>(schema, 'body');
  return (value) => {
    check(value);
  };
}
