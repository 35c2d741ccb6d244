/**
 * Who hears that jobs became available or finished (Store.watchAvailable,
 * Store.watchFinished), in this process and in every other coordinator on the
 * schema. A write announces after its commit: this process's listeners at
 * once, other coordinators through NOTIFY (coalesced-notifier.ts,
 * finished-channel.ts). One LISTEN connection hears both channels, opened
 * when the first listener of either arrives (channel-listener.ts). A store
 * whose connection is the only one listening on the schema skips its NOTIFYs
 * (listener-peers.ts); a store that listens to nothing always sends them.
 */

import { randomBytes } from 'node:crypto';
import type { Availability, AvailabilityListener as OnAvailable, FinishedJob, FinishedListener } from '../store.js';
import { FinishedListeners } from '../finished-jobs.js';
import { hearAvailable } from './availability-listener.js';
import { ChannelListener } from './channel-listener.js';
import { CoalescedNotifier } from './coalesced-notifier.js';
import { clientConfig, type PgDatabase } from './database.js';
import { FinishedSender, hearFinished } from './finished-channel.js';
import { availabilityPayload } from './coalesced-notifier.js';
import { listenerName } from './listener-peers.js';
import * as Q from './queries.js';
import { bind } from './sql-fragments.js';

export class Watchers {
  private readonly available = new Set<OnAvailable>();
  private readonly notifier: CoalescedNotifier;
  private readonly finished = new FinishedListeners();
  private readonly finishedSender: FinishedSender;
  /** The LISTEN connection, from the first watcher of either channel on. */
  private listener: ChannelListener | null = null;
  /** NOTIFY channels: one pair per schema, so test schemas do not wake each other. */
  private readonly availableChannel: string;
  private readonly finishedChannel: string;
  /** Names this store in its own availability and finished notifications, which its listeners then drop (it told its watchers at commit). */
  private readonly origin = randomBytes(6).toString('base64url');
  /** When announceEveryone last woke every waiter (performance.now() ms). */
  private everyoneAnnouncedAt = Number.NEGATIVE_INFINITY;
  private closed = false;

  constructor(
    db: PgDatabase,
    private readonly connection: { readonly connectionString: string; readonly schema: string },
  ) {
    this.availableChannel = `lh_available_${connection.schema}`.slice(0, 63);
    this.finishedChannel = `lh_finished_${connection.schema}`.slice(0, 63);
    this.notifier = new CoalescedNotifier((payloads) => db.query(bind(Q.NOTIFY, [this.availableChannel, payloads])), this.origin);
    this.finishedSender = new FinishedSender((payloads) => db.query(bind(Q.NOTIFY_FINISHED, [this.finishedChannel, payloads])), this.origin);
  }

  /** The NOTIFY of these jobs as a statement for someone else's transaction, delivered only if it commits. */
  availableNotification(jobs: readonly Availability[]): { readonly text: string; readonly values: unknown[] } {
    return { text: Q.NOTIFY.text, values: [this.availableChannel, jobs.map((job) => availabilityPayload(job))] };
  }

  watchAvailable(listener: OnAvailable): () => void {
    this.available.add(listener);
    this.listen();
    return () => {
      this.available.delete(listener);
    };
  }

  watchFinished(listener: FinishedListener): () => void {
    const remove = this.finished.add(listener);
    this.listen();
    return remove;
  }

  private listen(): void {
    if (this.listener !== null || this.closed) return;
    const hear = new Map([
      [this.availableChannel, hearAvailable(this.origin, (available) => this.wake(available))],
      [this.finishedChannel, hearFinished(this.origin, (job) => this.finished.emit(job === null ? null : [job]))],
    ]);
    this.listener = new ChannelListener({
      clientConfig: clientConfig(this.connection),
      channels: [this.availableChannel, this.finishedChannel],
      censusName: listenerName(this.connection.schema),
      origin: this.origin,
      onPayload: (channel, payload) => hear.get(channel)?.(payload),
      // Commits made before this LISTEN took effect, or before another store heard of it, announced nobody here.
      onListening: () => {
        this.wake(null);
        this.finished.emit(null);
      },
    });
    void this.listener.start();
  }

  /** Resolves once the LISTEN that the first watcher started is in effect (at once if nothing watches). */
  listening(): Promise<void> {
    return this.listener?.ready ?? Promise.resolve();
  }

  /** New work committed here: wake this process's waiters now, other coordinators' through NOTIFY. */
  announceAvailable(jobs: readonly Availability[]): void {
    const others = this.othersMayHear();
    for (const available of jobs) {
      this.wake(available);
      if (others) this.notifier.poke(available);
    }
  }

  /** Jobs of any tenant and kind may be available (a failed lease released rows it had locked): wake every waiter, here and elsewhere. */
  announceEveryone(): void {
    // At most once a second: each wakes every parked poll here and elsewhere, and failures come in bursts.
    const now = performance.now();
    if (now - this.everyoneAnnouncedAt < 1_000) return;
    this.everyoneAnnouncedAt = now;
    this.wake(null);
    if (this.othersMayHear()) this.notifier.poke(null);
  }

  /** Jobs ended here (after the commit): this process's watchers now, other coordinators' through NOTIFY. */
  announceFinished(jobs: readonly FinishedJob[] | null): void {
    if (jobs !== null && jobs.length === 0) return;
    this.finished.emit(jobs);
    if (this.othersMayHear()) this.finishedSender.add(jobs);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.notifier.close();
    this.finishedSender.close();
    this.available.clear();
    this.finished.clear();
    await this.listener?.stop();
  }

  /** Whether a NOTIFY may reach another store: always, unless this store listens and knows it is alone. */
  private othersMayHear(): boolean {
    return this.listener?.othersMayListen() ?? true;
  }

  private wake(available: Availability | null): void {
    for (const listener of [...this.available]) {
      try {
        listener(available);
      } catch {
        // A listener's failure is its own; the others still need waking.
      }
    }
  }
}
