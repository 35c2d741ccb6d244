/**
 * One dedicated connection that LISTENs on a channel and hands each payload
 * on, reconnecting with doubling backoff after a drop (a restart, a failover,
 * a killed backend). Notifications sent while it was not listening reached
 * nobody, so every time LISTEN takes effect it calls `onListening`: the owner
 * tells its waiters to look again. The availability and finished-job
 * channels (availability-listener.ts, finished-channel.ts) both run on it.
 */

import pg from 'pg';

export interface ChannelListenerOptions {
  readonly clientConfig: pg.ClientConfig;
  readonly channel: string;
  readonly onPayload: (payload: string | undefined) => void;
  /** LISTEN took effect (the first connect or a reconnect). */
  readonly onListening: () => void;
  readonly minRetryMs?: number;
  readonly maxRetryMs?: number;
}

export class ChannelListener {
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

  constructor(private readonly options: ChannelListenerOptions) {
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
      if (message.channel === this.options.channel) this.options.onPayload(message.payload);
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
      this.options.onListening();
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
