/**
 * Wakes long polls when another coordinator (or this one) commits work. One
 * dedicated connection LISTENs on the schema's channel; enqueue, requeue,
 * reconcile, retry and lease expiry NOTIFY it right after their commit, so a
 * wake-up never precedes the change. Each notification names the (tenant,
 * kind) that became available (coalesced-notifier.ts), so only the waiters
 * that can lease it wake; an empty or unreadable payload wakes everyone.
 * Whenever LISTEN takes effect (the first connect, or a reconnect after a
 * restart or failover) it wakes everyone once, because notifications sent
 * before that reached nobody. The connection itself is channel-listener.ts.
 */

import type pg from 'pg';
import type { AvailabilityListener as OnAvailable } from '../store.js';
import { ChannelListener } from './channel-listener.js';
import { parseAvailabilityPayload } from './coalesced-notifier.js';

export interface AvailabilityListenerOptions {
  readonly clientConfig: pg.ClientConfig;
  readonly channel: string;
  readonly onAvailable: OnAvailable;
  readonly minRetryMs?: number;
  readonly maxRetryMs?: number;
}

export class AvailabilityListener extends ChannelListener {
  constructor(options: AvailabilityListenerOptions) {
    const { onAvailable, ...connection } = options;
    super({
      ...connection,
      onPayload: (payload) => onAvailable(parseAvailabilityPayload(payload)),
      // Commits made before this LISTEN took effect announced nobody: wake the waiters once so they look.
      onListening: () => onAvailable(null),
    });
  }
}
