/**
 * Tells every coordinator on the database that jobs reached an end state, so
 * a `GET /jobs/{id}?waitMs` parked on one coordinator answers when another
 * completes the job. Its own LISTEN connection and channel
 * (`lh_finished_<schema>`), apart from the availability channel: finished
 * jobs and new work have different listeners and payloads.
 *
 * Sending: the payloads of commits made while a NOTIFY is in flight are
 * gathered and sent together in one statement after it, so notifying costs
 * at most one extra statement in flight per store, never one per completion.
 * Each payload is `{"t":tenant,"i":id}`, or `*` for "some jobs may have
 * finished" (a reaper batch). Payloads longer than PostgreSQL's 8,000-byte
 * limit are sent as `*`. A notification lost to a dropped connection costs
 * latency, not correctness: the waiter still answers at its timeout, and a
 * reconnect tells listeners to look again (null).
 */

import pg from 'pg';
import type { FinishedJob } from '../store.js';

const WILDCARD = '*';
const MAX_PAYLOAD = 7_999;

export function encodeFinished(job: FinishedJob | null): string {
  if (job === null) return WILDCARD;
  const payload = JSON.stringify({ t: job.tenant, i: job.id });
  return Buffer.byteLength(payload) > MAX_PAYLOAD ? WILDCARD : payload;
}

/** The job a payload names, null for the wildcard, undefined for anything else. */
export function decodeFinished(payload: string | undefined): FinishedJob | null | undefined {
  if (payload === WILDCARD) return null;
  try {
    const value = JSON.parse(payload ?? '') as { t?: unknown; i?: unknown };
    return typeof value.t === 'string' && typeof value.i === 'string' ? { tenant: value.t, id: value.i } : undefined;
  } catch {
    return undefined;
  }
}

export class FinishedSender {
  private pending = new Set<string>();
  private inFlight = false;
  private closed = false;

  constructor(private readonly send: (payloads: readonly string[]) => Promise<unknown>) {}

  add(jobs: readonly FinishedJob[] | null): void {
    if (this.closed) return;
    if (jobs === null) this.pending.add(WILDCARD);
    else for (const job of jobs) this.pending.add(encodeFinished(job));
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

export interface FinishedListenerOptions {
  readonly clientConfig: pg.ClientConfig;
  readonly channel: string;
  readonly onFinished: (job: FinishedJob | null) => void;
}

/** The LISTEN side: one connection, reconnected with backoff; each (re)connect reports null once. */
export class FinishedListenerConnection {
  private client: pg.Client | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs = 100;
  private stopped = false;
  private connecting = false;

  constructor(private readonly options: FinishedListenerOptions) {}

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
      if (message.channel !== this.options.channel) return;
      const job = decodeFinished(message.payload);
      if (job !== undefined) this.options.onFinished(job);
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
      this.retryMs = 100;
      // Completions committed before this LISTEN took effect reached nobody here.
      this.options.onFinished(null);
    } catch {
      onDrop();
    } finally {
      this.connecting = false;
    }
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.retryTimer !== null) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, 5_000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect();
    }, delay);
    this.retryTimer.unref();
  }
}
