/**
 * Sends NOTIFY for the availability channel after a write has committed, at
 * most one statement at a time per store. Each notification carries the
 * (tenant, kind) of the job that became available (availability-listener.ts
 * reads it), so another coordinator wakes only the waiters that can lease it,
 * and the sending store's origin, so the store that sent it, which has woken
 * its own waiters already, does not wake them a second time when LISTEN
 * brings it back (each echo cost an empty lease and a next-due read per job).
 * Pokes that arrive while a statement is in flight are folded per (tenant,
 * kind) into the follow-up, which sends one notification per distinct pair in
 * a single statement. More distinct pairs than MAX_PENDING_PAIRS fold into one
 * notification without a payload, which wakes every waiter.
 *
 * Why not pg_notify inside the writing transaction: PostgreSQL serializes the
 * commits of all transactions that notify (a database-wide lock held through
 * the WAL flush), which defeats its group commit; measured here, notifying in
 * every enqueue cut concurrent enqueues to about a third. A NOTIFY sent alone
 * writes no WAL, so it holds that lock only for a moment. The order is kept:
 * the notification is sent only after the write it announces has committed.
 * If the process dies between the two, other coordinators' long polls miss one
 * wake-up and find the job on their next poll.
 */

import type { Availability } from '../store.js';

/** Distinct (tenant, kind) pairs held for the follow-up before they fold into one "everyone" notification. */
export const MAX_PENDING_PAIRS = 1_000;

/** PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more; a longer pair is sent without one. */
const MAX_PAYLOAD_BYTES = 7_999;

/**
 * The payload of a notification: `["tenant","kind"]`, `["tenant","kind","origin"]` when a store sends it after
 * its own commit (it woke its own waiters already), or '' for "look, whoever you are".
 */
export function availabilityPayload(available: Availability | null, origin?: string): string {
  if (available === null) return '';
  const payload = JSON.stringify(origin === undefined ? [available.tenant, available.kind] : [available.tenant, available.kind, origin]);
  return Buffer.byteLength(payload, 'utf8') > MAX_PAYLOAD_BYTES ? '' : payload;
}

/** What a notification says: the (tenant, kind), null for everyone (an empty or foreign payload), and who sent it. */
export interface Announcement {
  readonly available: Availability | null;
  readonly origin: string | null;
}

/** The inverse of availabilityPayload. */
export function parseAnnouncement(payload: string | undefined): Announcement {
  if (payload === undefined || payload === '') return { available: null, origin: null };
  try {
    const value: unknown = JSON.parse(payload);
    if (Array.isArray(value) && (value.length === 2 || value.length === 3) && value.every((part) => typeof part === 'string')) {
      const [tenant, kind, origin] = value as string[];
      return { available: { tenant: tenant as string, kind: kind as string }, origin: origin ?? null };
    }
  } catch {
    // Not ours: treated as a wake-up for everyone.
  }
  return { available: null, origin: null };
}

/** The (tenant, kind) a payload names; null for an empty or foreign payload (wake everyone). */
export function parseAvailabilityPayload(payload: string | undefined): Availability | null {
  return parseAnnouncement(payload).available;
}

export class CoalescedNotifier {
  private inFlight = false;
  private pending = new Map<string, string>();
  private closed = false;

  /** `send` issues one NOTIFY per payload, in one statement; `origin` names the sending store in each payload. */
  constructor(
    private readonly send: (payloads: readonly string[]) => Promise<unknown>,
    private readonly origin?: string,
  ) {}

  poke(available: Availability | null): void {
    if (this.closed) return;
    const payload = availabilityPayload(available, this.origin);
    if (this.pending.size >= MAX_PENDING_PAIRS && !this.pending.has(payload)) this.pending = new Map([['', '']]);
    else if (!this.pending.has('')) this.pending.set(payload, payload);
    if (!this.inFlight) this.flush();
  }

  close(): void {
    this.closed = true;
  }

  private flush(): void {
    if (this.pending.size === 0 || this.closed) return;
    const payloads = [...this.pending.values()];
    this.pending = new Map();
    this.inFlight = true;
    void this.send(payloads)
      .catch(() => undefined) // A lost wake-up costs latency, not correctness; the listener side reconnects.
      .finally(() => {
        this.inFlight = false;
        this.flush();
      });
  }
}
