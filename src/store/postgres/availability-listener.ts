/**
 * Wakes long polls when another coordinator (or this one) commits work. The
 * store's listening connection (channel-listener.ts) hears the schema's
 * availability channel; enqueue, requeue, reconcile, retry and lease expiry
 * NOTIFY it right after their commit, so a wake-up never precedes the change.
 * Each notification names the (tenant, kind) that became available
 * (coalesced-notifier.ts), so only the waiters that can lease it wake; an
 * empty or unreadable payload wakes everyone. A notification this store sent
 * itself (its origin) is dropped: the store woke its waiters when it
 * committed. Whenever LISTEN takes effect (the first connect, or a reconnect
 * after a restart or failover) the owner wakes everyone once, because
 * notifications sent before that reached nobody.
 */

import type { AvailabilityListener as OnAvailable } from '../store.js';
import { parseAnnouncement } from './coalesced-notifier.js';

/** What the listening connection does with a payload of the availability channel. */
export function hearAvailable(origin: string, onAvailable: OnAvailable): (payload: string | undefined) => void {
  return (payload) => {
    const announcement = parseAnnouncement(payload);
    if (announcement.origin !== origin) onAvailable(announcement.available);
  };
}
