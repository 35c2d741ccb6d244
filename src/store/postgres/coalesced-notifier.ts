/**
 * Sends NOTIFY for the availability channel after a write has committed, at
 * most one at a time per store: pokes that arrive while one is in flight are
 * folded into a single follow-up.
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

export class CoalescedNotifier {
  private inFlight = false;
  private pending = false;
  private closed = false;

  constructor(private readonly send: () => Promise<unknown>) {}

  poke(): void {
    if (this.closed) return;
    if (this.inFlight) {
      this.pending = true;
      return;
    }
    this.inFlight = true;
    void this.send()
      .catch(() => undefined) // A lost wake-up costs latency, not correctness; the listener side reconnects.
      .finally(() => {
        this.inFlight = false;
        if (this.pending) {
          this.pending = false;
          this.poke();
        }
      });
  }

  close(): void {
    this.closed = true;
  }
}
