/**
 * Schema validation for requests. Two Ajv instances: bodies are validated
 * exactly as sent (no type coercion, unknown fields rejected rather than
 * silently removed, no defaults injected), while querystrings, params and
 * headers — which arrive as strings — are coerced to the schema's types.
 * The same TypeBox schemas generate /openapi.json.
 */

import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

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

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const bodyAjv = newAjv(false);
  const stringAjv = newAjv(true);
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? bodyAjv : stringAjv;
    const validate: ValidateFunction = ajv.compile(schema as object);
    return validate;
  };
}

/** An Ajv for tenant-supplied payload schemas of kinds (formats known, unknown keywords tolerated). */
export function payloadAjv(): Ajv {
  const ajv = new Ajv({ coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false, strict: false, addUsedSchema: false });
  addFormats(ajv);
  return ajv;
}
