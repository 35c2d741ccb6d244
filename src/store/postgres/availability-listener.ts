/**
 * Wakes long polls when another coordinator (or this one) commits work. One
 * dedicated connection LISTENs on the schema's channel; enqueue, requeue,
 * reconcile, retry and lease expiry NOTIFY it right after their commit, so a
 * wake-up never precedes the change. Each notification names the (tenant,
 * kind) that became available (coalesced-notifier.ts), so only the waiters
 * that can lease it wake; an empty or unreadable payload wakes everyone.
 * Whenever LISTEN takes effect (the first connect, or a reconnect after a
 * restart or failover) it wakes everyone once, because notifications sent
 * before that reached nobody.
 */

import pg from 'pg';
import type { AvailabilityListener as OnAvailable } from '../store.js';
import { parseAvailabilityPayload } from './coalesced-notifier.js';

export interface AvailabilityListenerOptions {
  readonly clientConfig: pg.ClientConfig;
  readonly channel: string;
  readonly onAvailable: OnAvailable;
  readonly minRetryMs?: number;
  readonly maxRetryMs?: number;
}

export class AvailabilityListener {
  private client: pg.Client | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs: number;
  private stopped = false;
  private connecting = false;
  private markReady: () => void = () => undefined;
  /** Resolves once LISTEN has first taken effect: wake-ups counted after it come from NOTIFY. */
  readonly ready = new Promise<void>((resolve) => {
    this.markReady = resolve;
  });

  constructor(private readonly options: AvailabilityListenerOptions) {
    this.retryMs = options.minRetryMs ?? 100;
  }

  /** Starts listening; resolves after the first attempt, whether or not it connected. */
  async start(): Promise<void> {
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const client = this.client;
    this.client = null;
    if (client !== null) await client.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped || this.connecting) return;
    this.connecting = true;
    const client = new pg.Client(this.options.clientConfig);
    let dropped = false;
    const onDrop = (): void => {
      if (dropped) return;
      dropped = true;
      if (this.client === client) this.client = null;
      client.end().catch(() => undefined);
      this.scheduleReconnect();
    };
    client.on('error', onDrop);
    client.on('end', onDrop);
    client.on('notification', (message) => {
      if (message.channel === this.options.channel) this.options.onAvailable(parseAvailabilityPayload(message.payload));
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${this.options.channel}"`);
      if (this.stopped) {
        dropped = true;
        await client.end().catch(() => undefined);
        return;
      }
      this.client = client;
      this.retryMs = this.options.minRetryMs ?? 100;
      this.markReady();
      // Commits made before this LISTEN took effect announced nobody: wake the waiters once so they look.
      this.options.onAvailable(null);
    } catch {
      onDrop();
    } finally {
      this.connecting = false;
    }
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.retryTimer !== null) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, this.options.maxRetryMs ?? 5_000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect();
    }, delay);
    this.retryTimer.unref();
  }
}
