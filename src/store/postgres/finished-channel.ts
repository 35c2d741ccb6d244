/**
 * Tells every coordinator on the database that jobs reached an end state, so
 * a `GET /jobs/{id}?waitMs` parked on one coordinator answers when another
 * completes the job. Its own channel (`lh_finished_<schema>`), apart from
 * the availability channel: finished jobs and new work have different
 * listeners and payloads; the store's one listening connection
 * (channel-listener.ts) hears both.
 *
 * Sending: the payloads of commits made while a NOTIFY is in flight are
 * gathered and sent together in one statement after it, so notifying costs
 * at most one extra statement in flight per store, never one per completion.
 * Each payload is `{"t":tenant,"i":id,"o":origin}`, or `*` for "some jobs may
 * have finished" (a reaper batch). The origin names the sending store, whose
 * listener drops its own notifications when LISTEN brings them back: the store
 * told its own watchers at the commit, and hearing it twice would wake the
 * tenant's polls held for a slot, and its job waiters, a second time.
 * Payloads longer than PostgreSQL's 8,000-byte limit are sent as `*`. A
 * notification lost to a dropped connection costs latency, not correctness:
 * the waiter still answers at its timeout, and a reconnect tells listeners to
 * look again (null).
 */

import type { FinishedJob } from '../store.js';

const WILDCARD = '*';
const MAX_PAYLOAD = 7_999;

export function encodeFinished(job: FinishedJob | null, origin: string): string {
  if (job === null) return WILDCARD;
  const payload = JSON.stringify({ t: job.tenant, i: job.id, o: origin });
  return Buffer.byteLength(payload) > MAX_PAYLOAD ? WILDCARD : payload;
}

/** What a payload says: the job (null for the wildcard) and who sent it (null when it does not say); undefined for anything else. */
export function decodeFinished(payload: string | undefined): { readonly job: FinishedJob | null; readonly origin: string | null } | undefined {
  if (payload === WILDCARD) return { job: null, origin: null };
  try {
    const value = JSON.parse(payload ?? '') as { t?: unknown; i?: unknown; o?: unknown };
    if (typeof value.t !== 'string' || typeof value.i !== 'string') return undefined;
    return { job: { tenant: value.t, id: value.i }, origin: typeof value.o === 'string' ? value.o : null };
  } catch {
    return undefined;
  }
}

export class FinishedSender {
  private pending = new Set<string>();
  private inFlight = false;
  private closed = false;

  /** `origin` names the sending store in each payload (its own listener drops them). */
  constructor(
    private readonly send: (payloads: readonly string[]) => Promise<unknown>,
    private readonly origin: string,
  ) {}

  add(jobs: readonly FinishedJob[] | null): void {
    if (this.closed) return;
    if (jobs === null) this.pending.add(WILDCARD);
    else for (const job of jobs) this.pending.add(encodeFinished(job, this.origin));
    this.flush();
  }

  close(): void {
    this.closed = true;
    this.pending.clear();
  }

  private flush(): void {
    if (this.inFlight || this.pending.size === 0 || this.closed) return;
    const payloads = [...this.pending];
    this.pending = new Set();
    this.inFlight = true;
    void this.send(payloads)
      .catch(() => undefined)
      .finally(() => {
        this.inFlight = false;
        this.flush();
      });
  }
}

/** What the listening connection (channel-listener.ts) does with a payload of the finished channel. */
export function hearFinished(origin: string, onFinished: (job: FinishedJob | null) => void): (payload: string | undefined) => void {
  return (payload) => {
    const decoded = decodeFinished(payload);
    if (decoded !== undefined && decoded.origin !== origin) onFinished(decoded.job);
  };
}
