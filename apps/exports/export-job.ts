/**
 * What the API and the export worker agree on: the job kind, its payload (the
 * canonical export parameters and the owner), and the kind's rules. One
 * module, imported by both processes, so they cannot drift apart.
 */

import type { Queue } from '../../src/index.js';
import type { ExportStatusFilter } from './db.js';

export const EXPORT_KIND = 'tasks.export';

export interface ExportPayload {
  readonly ownerId: number;
  readonly status: ExportStatusFilter;
}

export type ExportKinds = { [EXPORT_KIND]: ExportPayload };
export type ExportQueue = Queue<ExportKinds>;

/** Canonical parameters: the only form stored and compared for idempotency. */
export interface ExportParameters {
  readonly status: ExportStatusFilter;
}

export type ParametersCheck = { readonly ok: true; readonly parameters: ExportParameters } | { readonly ok: false; readonly message: string };

/** Accepts `{}` or `{status: 'all'|'open'|'done'}` and nothing else; the default is 'all'. */
export function normalizeParameters(body: unknown): ParametersCheck {
  const source = body === undefined || body === null ? {} : body;
  if (typeof source !== 'object' || Array.isArray(source)) return { ok: false, message: 'the body must be a JSON object' };
  const entries = Object.entries(source);
  for (const [name] of entries) if (name !== 'status') return { ok: false, message: `unknown parameter "${name}"` };
  const status = (source as { status?: unknown }).status ?? 'all';
  if (status !== 'all' && status !== 'open' && status !== 'done') return { ok: false, message: 'status must be one of all, open, done' };
  return { ok: true, parameters: { status } };
}

/** The canonical text of the parameters (fixed key order), as stored in export_requests. */
export function canonicalParameters(parameters: ExportParameters): string {
  return JSON.stringify({ status: parameters.status });
}

export interface ExportSettings {
  /** Queued plus running export jobs before POST /exports answers 503. */
  readonly maxPendingExports: number;
  /** The largest CSV the worker stores; a larger one fails with `result_too_large`. */
  readonly maxResultBytes: number;
  /** Attempts before a transient failure becomes terminal. */
  readonly maxAttempts: number;
  /** Lease of one attempt; the worker renews it every third while the CSV is built. */
  readonly leaseMs: number;
  /** Polling interval suggested to clients (Retry-After), in seconds. */
  readonly pollSeconds: number;
}

export const DEFAULT_EXPORT_SETTINGS: ExportSettings = {
  maxPendingExports: 100,
  maxResultBytes: 64 * 1024 * 1024,
  maxAttempts: 5,
  leaseMs: 30_000,
  pollSeconds: 2,
};

/** An export nobody can use after an hour is not worth retrying. */
export const EXPORT_DEADLINE_MS = 3_600_000;

/**
 * Registers the kind's rules (lease, backoff, result ceiling); the worker calls it at start. The API does not:
 * a change of rules makes its queue reload them, and an enqueue inside a transaction cannot wait for that.
 */
export async function registerExportKind(queue: ExportQueue, settings: ExportSettings): Promise<void> {
  await queue.putKind(EXPORT_KIND, {
    maxAttempts: settings.maxAttempts,
    leaseMs: settings.leaseMs,
    // Exponential with jitter (leasehold's backoff), from half a second up to half a minute.
    backoff: { baseMs: 500, maxMs: 30_000 },
    // leasehold's own ceiling sits above the worker's check, so the worker's stable code is what clients see.
    maxResultBytes: Math.min(settings.maxResultBytes * 2, 1024 ** 3),
    deadlineMs: EXPORT_DEADLINE_MS,
  });
}
