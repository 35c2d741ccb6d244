/**
 * Wakes long polls when another coordinator (or this one) commits work. One
 * dedicated connection LISTENs on the schema's channel; enqueue, requeue,
 * reconcile, retry and lease expiry NOTIFY it right after their commit, so a
 * wake-up never precedes the change. Each notification names the (tenant,
 * kind) that became available (coalesced-notifier.ts), so only the waiters
 * that can lease it wake; an empty or unreadable payload wakes everyone. A
 * notification this store sent itself (its origin) is dropped: the store woke
 * its waiters when it committed.
 * Whenever LISTEN takes effect (the first connect, or a reconnect after a
 * restart or failover) it wakes everyone once, because notifications sent
 * before that reached nobody. The connection itself is channel-listener.ts.
 */

import type pg from 'pg';
import type { AvailabilityListener as OnAvailable } from '../store.js';
import { ChannelListener } from './channel-listener.js';
import { parseAnnouncement } from './coalesced-notifier.js';

export interface AvailabilityListenerOptions {
  readonly clientConfig: pg.ClientConfig;
  readonly channel: string;
  readonly onAvailable: OnAvailable;
  /** The origin this store's own notifications carry: those are not passed on. */
  readonly origin: string;
  readonly minRetryMs?: number;
  readonly maxRetryMs?: number;
}

export class AvailabilityListener extends ChannelListener {
  constructor(options: AvailabilityListenerOptions) {
    const { onAvailable, origin, ...connection } = options;
    super({
      ...connection,
      onPayload: (payload) => {
        const announcement = parseAnnouncement(payload);
        if (announcement.origin !== origin) onAvailable(announcement.available);
      },
      // Commits made before this LISTEN took effect announced nobody: wake the waiters once so they look.
      onListening: () => onAvailable(null),
    });
  }
}
