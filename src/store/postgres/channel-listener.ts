/**
 * One dedicated connection per store that LISTENs on the schema's channels
 * (availability and finished jobs: availability-listener.ts,
 * finished-channel.ts) and hands each payload on, reconnecting with doubling
 * backoff after a drop (a restart, a failover, a killed backend).
 * Notifications sent while it was not listening reached nobody, so every
 * time LISTEN takes effect it calls `onListening`: the owner tells its
 * waiters to look again. It also keeps the census of the other stores
 * listening on the schema (listener-peers.ts): whether this store's NOTIFYs
 * would reach anyone.
 */

import pg from 'pg';
import {
  CENSUS_MS,
  type Control,
  encodeAck,
  encodeHello,
  LISTENER_ACK,
  LISTENER_CENSUS,
  LISTENER_HELLO_AND_CENSUS,
  ListenerPeers,
  parseControl,
} from './listener-peers.js';

export interface ChannelListenerOptions {
  readonly clientConfig: pg.ClientConfig;
  /** The channels to LISTEN on; hellos and their answers go on the first. */
  readonly channels: readonly [string, ...string[]];
  /** Names the listening connections of every store on the schema (listenerName), which the census counts. */
  readonly censusName: string;
  readonly onPayload: (channel: string, payload: string | undefined) => void;
  /**
   * LISTEN took effect (the first connect or a reconnect), and again each time another listener answers this
   * one's hello: either way, notifications sent before may have reached nobody here.
   */
  readonly onListening: () => void;
  /** Names this store in its hello and its answers to others' hellos. */
  readonly origin: string;
  readonly minRetryMs?: number;
  readonly maxRetryMs?: number;
}

export class ChannelListener {
  private client: pg.Client | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs: number;
  private stopped = false;
  private connecting = false;
  private censusTimer: NodeJS.Timeout | null = null;
  /** Ends the current connection and schedules a reconnect (connect's onDrop for that connection). */
  private dropConnection: () => void = () => undefined;
  private readonly peers = new ListenerPeers();
  /**
   * The tail of the listening connection's queries, run one after another: a burst of hellos sends an answer
   * each, and the census runs on a timer, while pg queues a query sent during another only until pg 9.
   */
  private queries: Promise<unknown> = Promise.resolve();
  private markReady: () => void = () => undefined;
  /** Resolves once LISTEN has first taken effect: wake-ups counted after it come from NOTIFY. */
  readonly ready = new Promise<void>((resolve) => {
    this.markReady = resolve;
  });

  constructor(private readonly options: ChannelListenerOptions) {
    this.retryMs = options.minRetryMs ?? 100;
  }

  /** Whether a NOTIFY on the channel may reach another store's listener (listener-peers.ts). */
  othersMayListen(): boolean {
    return this.peers.othersMayListen();
  }

  /** Starts listening; resolves after the first attempt, whether or not it connected. */
  async start(): Promise<void> {
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.stopCensus();
    const client = this.client;
    this.client = null;
    if (client !== null) await client.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped || this.connecting) return;
    this.connecting = true;
    const client = new pg.Client({ ...this.options.clientConfig, application_name: this.options.censusName });
    let dropped = false;
    const onDrop = (): void => {
      if (dropped) return;
      dropped = true;
      this.peers.deaf();
      this.stopCensus();
      if (this.client === client) this.client = null;
      client.end().catch(() => undefined);
      this.scheduleReconnect();
    };
    this.dropConnection = onDrop;
    client.on('error', onDrop);
    client.on('end', onDrop);
    client.on('notification', (message) => {
      if (!this.options.channels.includes(message.channel)) return;
      const control = message.channel === this.options.channels[0] ? parseControl(message.payload) : null;
      if (control === null) this.options.onPayload(message.channel, message.payload);
      else this.onControl(client, control);
    });
    try {
      await client.connect();
      // Channel names are made of the validated schema name (availability.ts), so quoting them is enough.
      this.queries = Promise.resolve();
      for (const channel of this.options.channels) await this.query(client, { text: `LISTEN "${channel}"` });
      await this.census(client, encodeHello(this.options.origin));
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

  private onControl(client: pg.Client, control: Control): void {
    const { origin } = this.options;
    if ('hello' in control) {
      if (control.hello === origin) return;
      // Counted before the answer is sent: every announcement after the answer is a NOTIFY the new listener hears.
      this.peers.heardHello();
      this.scheduleCensus();
      // While this connection's own hello is not out yet, the store counts as not alone and notifies every
      // commit, so the new listener missed nothing of it and needs no answer.
      if (this.client !== client) return;
      void this.query(client, { text: LISTENER_ACK, values: [this.options.channels[0], encodeAck(control.hello, origin)] }).catch(() => undefined);
    } else if (control.ack === origin && control.from !== origin) {
      this.options.onListening();
    }
  }

  /**
   * Counts the other listeners on `client`, and again every CENSUS_MS while it is connected; with `hello`,
   * says it in the same statement (after LISTEN took effect).
   */
  private async census(client: pg.Client, hello?: string): Promise<void> {
    const token = this.peers.censusStarted();
    const { censusName, channels } = this.options;
    const query =
      hello === undefined ? { text: LISTENER_CENSUS, values: [censusName] } : { text: LISTENER_HELLO_AND_CENSUS, values: [censusName, channels[0], hello] };
    const others = (await this.query<{ others: number }>(client, query)).rows[0]?.others ?? 1;
    this.peers.counted(token, others);
    this.scheduleCensus();
  }

  /** Runs `config` on `client` once every query sent before it on the listening connection has ended. */
  private query<R extends pg.QueryResultRow>(client: pg.Client, config: pg.QueryConfig): Promise<pg.QueryResult<R>> {
    const run = this.queries.then(() => client.query<R>(config));
    this.queries = run.catch(() => undefined);
    return run;
  }

  private scheduleCensus(): void {
    if (this.stopped || this.censusTimer !== null) return;
    this.censusTimer = setTimeout(() => {
      this.censusTimer = null;
      const client = this.client;
      const drop = this.dropConnection;
      // A census that fails, or that the query timeout ends on a connection hung without an error, is a drop.
      if (client !== null) void this.census(client).catch(() => (this.client === client ? drop() : undefined));
    }, CENSUS_MS);
    this.censusTimer.unref();
  }

  private stopCensus(): void {
    if (this.censusTimer !== null) clearTimeout(this.censusTimer);
    this.censusTimer = null;
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
