export { openQueue, type OpenQueueOptions } from './open-queue.js';
export { Queue, type KindPayloads, type QueueJob, type QueueSettings } from './queue.js';
export { LeaseholdError, type ErrorCode } from '../core/errors.js';
export { leaseholdRoutes, type LeaseholdRoutesOptions } from './http-front.js';
