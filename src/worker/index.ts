/** The worker's public surface. */

export { Worker, type WorkerOptions } from './worker.js';
export type { Handler, HandlerMap, JobContext } from './handler.js';
export { BinaryResult } from './binary-result.js';
export { PermanentJobError, JobAbortedError, type AbortCode } from './job-errors.js';
export { silentLogger, type WorkerLogger } from './logger.js';
export { DEFAULT_RETRY, type RetryPolicy } from './retry.js';
export type { TypedHandlers, WorkerQueue, WorkerSettings } from './worker.js';
