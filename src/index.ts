/**
 * The package's public surface for applications: the library Queue
 * (`openQueue`, over a SQLite file or a PostgreSQL database, in process),
 * the typed HTTP client, and the worker runtime, which runs on either. The
 * coordinator is started by the CLI (`leasehold serve`), or served from an
 * application's own Fastify instance over a Queue.
 */

export * from './client/index.js';
export * from './worker/index.js';
export * from './queue/index.js';
