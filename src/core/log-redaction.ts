/**
 * Where an API key or a lease token could appear in a log object, for every
 * pino logger leasehold creates (the coordinator's, and those of `serve`,
 * `worker` and `dev`). Each such field is written as LOG_CENSOR.
 */

export const LOG_CENSOR = '[redacted]';

export const LOG_REDACT_PATHS: readonly string[] = [
  'authorization',
  'token',
  'key',
  'apiKey',
  'metricsToken',
  // One level down: headers.authorization, lease.token, client.apiKey, err.token …
  '*.authorization',
  '*.token',
  '*.key',
  '*.apiKey',
  '*.metricsToken',
  // Two levels down: req.headers.authorization (pino's request serializer keeps the headers).
  '*.headers.authorization',
];

/** pino's `redact` option for the paths above. */
export function logRedaction(): { paths: string[]; censor: string } {
  return { paths: [...LOG_REDACT_PATHS], censor: LOG_CENSOR };
}
