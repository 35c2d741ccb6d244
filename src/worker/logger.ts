/**
 * The logging seam of the worker: the subset of pino's API it uses, so a pino
 * logger can be passed as is. Fields name the job (id, kind, attempt) and the
 * worker; lease tokens and API keys are never logged.
 */

export interface WorkerLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

const ignore = (): void => undefined;

export const silentLogger: WorkerLogger = Object.freeze({ debug: ignore, info: ignore, warn: ignore, error: ignore });

/** A loggable summary of an error: name, code and message, never a stack or a request body. */
export function errorFields(error: unknown): Record<string, unknown> {
  if (error instanceof Error) {
    const fields: Record<string, unknown> = { errorName: error.name, errorMessage: error.message };
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string') fields['errorCode'] = code;
    const status = (error as { status?: unknown }).status;
    if (typeof status === 'number') fields['status'] = status;
    return fields;
  }
  return { errorMessage: String(error) };
}
