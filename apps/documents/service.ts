/**
 * Puts the review service together over one SQLite file: the application's
 * tables and the queue's live side by side, so a submission and its job
 * commit in one transaction. A process may serve the HTTP surface, run a
 * worker, or both; any number of worker processes can share the file.
 */

import { openQueue, Worker, type Queue } from '../../src/index.js';
import { buildDocumentsApp, type ReviewKinds } from './http.js';
import type { Planner } from './planner.js';
import { DocumentRecords } from './records.js';
import { REVIEW_KIND, REVIEW_PAYLOAD_SCHEMA, reviewHandler, type ReviewDeps } from './workflow.js';
import type { FastifyInstance } from 'fastify';

/** The leasehold tenant every review job lives in; the application's own tenants are in each job's input. */
export const QUEUE_TENANT = 'documents';

export interface DocumentServiceOptions {
  readonly path: string;
  readonly planner: Planner;
  readonly apiKeys?: ReadonlyMap<string, string>;
  readonly deliverNote?: ReviewDeps['deliverNote'];
  readonly afterCheckpoint?: ReviewDeps['afterCheckpoint'];
  readonly now?: () => number;
  /** Run a worker in this process. Default true. */
  readonly worker?: boolean;
  readonly leaseMs?: number;
  readonly concurrency?: number;
  readonly timeBudgetMs?: number;
  readonly maxAttempts?: number;
  /** How often expired leases are looked for; short in tests. Default 1 s. */
  readonly reaperIntervalMs?: number;
}

export interface DocumentService {
  readonly queue: Queue<ReviewKinds>;
  readonly records: DocumentRecords;
  readonly app: FastifyInstance;
  readonly worker: Worker<ReviewKinds> | undefined;
  close(): Promise<void>;
}

export async function openDocumentService(options: DocumentServiceOptions): Promise<DocumentService> {
  const records = DocumentRecords.open(options.path);
  const open = (): Promise<Queue<ReviewKinds>> =>
    openQueue<ReviewKinds>({ sqlite: records.db, tenant: QUEUE_TENANT, config: { reaperIntervalMs: options.reaperIntervalMs ?? 1_000 } });
  // The payload schema is the queue's own check that a job's input is what the API writes, and nothing more.
  // A Queue forgets its loaded kinds at putKind, and enqueueInTransaction cannot wait for them to load:
  // the kind is registered through a first Queue, and the one kept open loads it as it opens.
  const setup = await open();
  try {
    await setup.putKind(REVIEW_KIND, { payloadSchema: REVIEW_PAYLOAD_SCHEMA, maxAttempts: options.maxAttempts ?? 3, backoff: { baseMs: 100, maxMs: 2_000 } });
  } finally {
    await setup.close();
  }
  const queue = await open();
  const app = buildDocumentsApp({
    queue,
    records,
    apiKeys: options.apiKeys ?? new Map(),
    ...(options.timeBudgetMs === undefined ? {} : { timeBudgetMs: options.timeBudgetMs }),
    ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
  });
  let worker: Worker<ReviewKinds> | undefined;
  if (options.worker !== false) {
    const handler = reviewHandler({
      records,
      planner: options.planner,
      ...(options.deliverNote === undefined ? {} : { deliverNote: options.deliverNote }),
      ...(options.afterCheckpoint === undefined ? {} : { afterCheckpoint: options.afterCheckpoint }),
      ...(options.now === undefined ? {} : { now: options.now }),
    });
    worker = new Worker<ReviewKinds>({
      queue,
      handlers: { [REVIEW_KIND]: handler },
      leaseMs: options.leaseMs ?? 30_000,
      concurrency: options.concurrency ?? 4,
      waitMs: 1_000,
    });
    // run() rejects only when the queue refuses the worker for good; the process's owner sees it in the log.
    worker.run().catch((error: unknown) => console.error(`documents: the worker stopped: ${error instanceof Error ? error.message : String(error)}`));
  }
  return {
    queue,
    records,
    app,
    worker,
    async close() {
      await worker?.stop({ graceMs: 5_000 });
      await app.close();
      await queue.close();
      records.close();
    },
  };
}
