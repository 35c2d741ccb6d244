/**
 * The package's public surface for applications: the typed client and the
 * worker runtime. The coordinator and the stores are started by the CLI
 * (`leasehold serve`), or built directly from their modules.
 */

export * from './client/index.js';
export * from './worker/index.js';
