/**
 * What the engine logs through: the few methods of a pino logger it calls,
 * so engine modules take a Fastify request's logger, the coordinator's, a
 * library's silent one or a test's recorder alike, without naming Fastify.
 */

/** A log call: an object of fields and a message, or a message alone (pino's shape). */
export interface LogMethod {
  (fields: object, message?: string): void;
  (message: string): void;
}

export interface Logger {
  readonly debug: LogMethod;
  readonly info: LogMethod;
  readonly warn: LogMethod;
  readonly error: LogMethod;
}

/** A logger that writes nothing (a library Queue has no logger of its own yet). */
export const SILENT_LOGGER: Logger = Object.freeze({ debug: () => {}, info: () => {}, warn: () => {}, error: () => {} });
