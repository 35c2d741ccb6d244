/**
 * Schema validation for requests. Two Ajv instances: bodies are validated
 * exactly as sent (no type coercion, unknown fields rejected rather than
 * silently removed, no defaults injected), while querystrings, params and
 * headers — which arrive as strings — are coerced to the schema's types.
 * The same TypeBox schemas generate /openapi.json. The library checks its
 * calls with the same compiler, so both fronts refuse the same input.
 */

import { Ajv, type CodeOptions, type ValidateFunction } from 'ajv';
import { RE2JS } from 're2js';
import addFormatsModule from 'ajv-formats';

const addFormats = addFormatsModule.default;

function newAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    coerceTypes: coerce,
    useDefaults: false,
    removeAdditional: false,
    allErrors: false,
    strict: false,
    // Validation of one request must not add schemas to a shared registry.
    addUsedSchema: false,
  });
  addFormats(ajv, ['date-time']);
  return ajv;
}

/** Which part of a request a schema describes: bodies are checked as sent, the other parts coerced from text. */
export interface SchemaRoute {
  readonly schema: unknown;
  readonly httpPart?: string;
}

/** A compiler of request schemas (Fastify's validator compiler has this shape; the library compiles with it too). */
export function validatorCompiler(): (route: SchemaRoute) => ValidateFunction {
  const bodyAjv = newAjv(false);
  const stringAjv = newAjv(true);
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? bodyAjv : stringAjv;
    const validate: ValidateFunction = ajv.compile(schema as object);
    return validate;
  };
}

/**
 * Ajv's regular-expression engine for tenant schemas: RE2 (re2js), whose
 * matching time is linear in the input, so no `pattern` can backtrack
 * (`^(a+)+$` on 27 × `a` + `!` took 6.8 s with JavaScript's RegExp and blocked
 * every request). RE2 refuses what it cannot run in linear time (lookaround,
 * backreferences); the kind registry reports that at registration.
 */
export const linearRegExp: LinearRegExpEngine = Object.assign(
  (pattern: string) => {
    const compiled = RE2JS.compile(pattern);
    // Ajv shares compiled patterns by toString(): it must name this pattern, or every pattern is the first one.
    return { test: (input: string) => compiled.test(input), toString: () => `re2:${pattern}` };
  },
  // Ajv's standalone code names the engine by this; schema-compiler.ts compiles with its own copy of the engine
  // (in its worker) that names `require('leasehold:re2').linearRegExp`, which resolves to this function.
  { code: 're2js' },
);
type LinearRegExpEngine = NonNullable<CodeOptions['regExp']>;

/** An Ajv for tenant-supplied payload schemas of kinds (formats known, unknown keywords tolerated, patterns in RE2). */
export function payloadAjv(): Ajv {
  const ajv = new Ajv({
    coerceTypes: false,
    useDefaults: false,
    removeAdditional: false,
    allErrors: false,
    strict: false,
    addUsedSchema: false,
    code: { regExp: linearRegExp },
  });
  addFormats(ajv);
  return ajv;
}

/** What describeValidationError reads of an Ajv error (Fastify passes the same objects). */
export interface AjvLikeError {
  readonly instancePath?: string;
  readonly keyword?: string;
  readonly message?: string;
  readonly params?: Record<string, unknown>;
}

/** Describes an Ajv error by the path that failed, e.g. `body/maxAttempts must be <= 1000`. */
export function describeValidationError(error: AjvLikeError | undefined, root: string): string {
  if (error === undefined) return `${root} is invalid`;
  const path = `${root}${error.instancePath ?? ''}`;
  const params = error.params ?? {};
  if (error.keyword === 'additionalProperties' && typeof params['additionalProperty'] === 'string') {
    return `${path}/${params['additionalProperty']} is not an allowed field`;
  }
  if (error.keyword === 'required' && typeof params['missingProperty'] === 'string') {
    return `${path}/${params['missingProperty']} is required`;
  }
  return `${path} ${error.message ?? 'is invalid'}`;
}
