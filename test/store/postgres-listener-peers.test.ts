/**
 * A PostgreSQL store skips its NOTIFYs while its listening connection is the only one on the schema, and
 * sends them again as soon as another store listens (listener-peers.ts). A connection of the test's own
 * LISTENs on the availability channel and sees what the server delivers; it is not a store's listener, so
 * the census does not count it. The census repeats every CENSUS_MS, so a listener whose hello went unheard is
 * found too. A burst of hellos is answered one query at a time on the listening connection.
 */

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { ChannelListener } from '../../src/store/postgres/channel-listener.js';
import { CENSUS_MS, encodeHello, LISTENER_ACK, LISTENER_CENSUS, listenerName, parseControl } from '../../src/store/postgres/listener-peers.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { Availability, EnqueueParams } from '../../src/store/store.js';
import { LISTENERS_UP_SQL, listenerPattern } from '../support/pg-listeners.js';
import { waitFor } from '../support/wait-for.js';

const url = process.env['DATABASE_URL'] ?? '';

function job(kind: string): EnqueueParams {
  return {
    tenant: 't',
    owner: 'u',
    idempotencyKey: `${kind}-${randomBytes(4).toString('hex')}`,
    requestHash: 'h',
    kind,
    payload: {},
    maxAttempts: 1,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 2,
  };
}

describe.skipIf(url === '')('NOTIFY only when another store listens (postgres)', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  async function open(schema: string): Promise<PostgresStore> {
    const store = await PostgresStore.connect({ connectionString: url, schema, poolSize: 2 });
    cleanups.push(() => store.close());
    return store;
  }

  /** A store that listens: what its watcher heard (null: look, whatever was announced). */
  async function listening(store: PostgresStore): Promise<(Availability | null)[]> {
    const heard: (Availability | null)[] = [];
    const stop = store.watchAvailable((available) => heard.push(available));
    cleanups.push(async () => stop());
    await store.listening();
    return heard;
  }

  /** The kinds named by the availability notifications the server delivers on the schema's channel. */
  async function observe(schema: string): Promise<string[]> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    cleanups.push(() => client.end());
    const kinds: string[] = [];
    client.on('notification', (message) => {
      const parsed: unknown = JSON.parse(message.payload === '' || message.payload === undefined ? 'null' : message.payload);
      if (Array.isArray(parsed)) kinds.push(String(parsed[1]));
    });
    await client.query(`LISTEN "${`lh_available_${schema}`.slice(0, 63)}"`);
    return kinds;
  }

  /**
   * A store that listens alone on a fresh schema, a producer beside it (it listens to nothing, so it cannot know
   * who listens and always sends) and the test's own observer; `sentBy(kind)` enqueues `kind` through the lone
   * store, then a marker through the producer, and says whether the first was delivered.
   */
  async function loneStore(): Promise<{
    readonly schema: string;
    readonly heardAlone: (Availability | null)[];
    readonly sentBy: (kind: string) => Promise<boolean>;
  }> {
    const schema = `lh_peers_${randomBytes(6).toString('hex')}`;
    cleanups.push(() => PostgresStore.dropSchema({ connectionString: url, schema }));
    const alone = await open(schema);
    const producer = await open(schema);
    const delivered = await observe(schema);
    const heardAlone = await listening(alone);
    const sentBy = async (kind: string): Promise<boolean> => {
      await alone.jobEnqueue(job(kind));
      const marker = `marker-${kind}`;
      await producer.jobEnqueue(job(marker));
      // Notifications arrive in commit order: once the marker's has, the other one's would have too.
      await waitFor(`the notification of ${marker}`, () => delivered.includes(marker), { timeoutMs: 5_000 });
      return delivered.includes(kind);
    };
    return { schema, heardAlone, sentBy };
  }

  it('sends none while it listens alone, sends again once another store listens, and stops after that store leaves', async () => {
    const { schema, heardAlone, sentBy } = await loneStore();
    expect(await sentBy('alone')).toBe(false);
    // Its own watcher was told at the commit all the same.
    expect(heardAlone).toContainEqual({ tenant: 't', kind: 'alone' });

    // Another store listens: it hears null when its LISTEN takes effect and again once the first store has answered its
    // hello, which that store does after it has started notifying again.
    const other = await PostgresStore.connect({ connectionString: url, schema, poolSize: 2 });
    const heardOther = await listening(other);
    await waitFor('the first store’s answer to the hello', () => heardOther.filter((a) => a === null).length >= 2, { timeoutMs: 10_000 });
    expect(await sentBy('in-company')).toBe(true);
    await waitFor('the other store to hear the job', () => heardOther.some((a) => a?.kind === 'in-company'), { timeoutMs: 5_000 });

    // The other store leaves; the next census (every CENSUS_MS) finds the first alone again.
    await other.close();
    let round = 0;
    await waitFor('the first store to stop notifying', async () => !(await sentBy(`after-${round++}`)), { timeoutMs: 15_000, intervalMs: 200 });
  }, 40_000);

  it('finds by its census, within a few CENSUS_MS, another listener whose hello it never heard, and notifies it', async () => {
    const { schema, sentBy } = await loneStore();
    expect(await sentBy('alone')).toBe(false);
    // A listener as a store's connection looks to the census (its application name), whose hello never went out:
    // a hello lost to a dropped connection, or a store whose own census ran before the first store's LISTEN.
    const silent = new pg.Client({ connectionString: url, application_name: listenerName(schema) });
    await silent.connect();
    cleanups.push(() => silent.end());
    await silent.query(`LISTEN "${`lh_available_${schema}`.slice(0, 63)}"`);
    let round = 0;
    await waitFor('the lone store to notify the silent listener', () => sentBy(`found-${round++}`), { timeoutMs: 3 * CENSUS_MS + 5_000, intervalMs: 100 });
  }, 30_000);

  it('counts as up to the tests’ probe from its hello on, through its later censuses and its answers to hellos', async () => {
    const { schema } = await loneStore();
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    cleanups.push(() => admin.end());
    const up = async (): Promise<number> => (await admin.query<{ n: number }>(LISTENERS_UP_SQL, [listenerPattern(schema)])).rows[0]?.n ?? 0;
    /** The last statement of each idle listening connection of the schema. */
    const lastStatements = async (): Promise<string[]> =>
      (
        await admin.query<{ query: string }>(`SELECT query FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle'`, [listenerName(schema)])
      ).rows.map((r) => r.query);
    expect(await up()).toBe(1);
    // Each check reads twice (the last statements, then the probe), so one is retried if a census ran in between.
    await waitFor(
      'the lone store’s next census, the probe still counting it',
      async () => (await lastStatements()).includes(LISTENER_CENSUS) && (await up()) === 1,
      {
        timeoutMs: CENSUS_MS + 5_000,
        intervalMs: 5,
      },
    );
    await listening(await open(schema));
    await waitFor(
      'the lone store’s answer to the other’s hello, the probe counting both',
      async () => (await lastStatements()).includes(LISTENER_ACK) && (await up()) === 2,
      {
        timeoutMs: CENSUS_MS + 5_000,
        intervalMs: 5,
      },
    );
  }, 30_000);

  it('answers a burst of 200 hellos one query at a time on its listening connection, every hello answered', async () => {
    const channel = `lh_burst_${randomBytes(4).toString('hex')}`;
    const censusName = `lh-listen:burst-${randomBytes(4).toString('hex')}`;
    // Queries in flight on each client, the most the listening connection ever had.
    const inFlight = new WeakMap<pg.Client, number>();
    let most = 0;
    const query = pg.Client.prototype.query;
    const counted = function (this: pg.Client, ...args: Parameters<typeof query>): unknown {
      const mine = (this as unknown as { connectionParameters: { application_name?: string } }).connectionParameters.application_name === censusName;
      const result = (query as (...a: unknown[]) => unknown).apply(this, args);
      if (!mine || !(result instanceof Promise)) return result;
      const now = (inFlight.get(this) ?? 0) + 1;
      inFlight.set(this, now);
      most = Math.max(most, now);
      return result.finally(() => inFlight.set(this, (inFlight.get(this) ?? 1) - 1));
    };
    pg.Client.prototype.query = counted as typeof query;
    cleanups.push(async () => {
      pg.Client.prototype.query = query;
    });
    const listener = new ChannelListener({
      clientConfig: { connectionString: url },
      channels: [channel],
      censusName,
      origin: 'burst-listener',
      onPayload: () => undefined,
      onListening: () => undefined,
    });
    cleanups.push(() => listener.stop());
    await listener.start();
    await listener.ready;
    const observer = new pg.Client({ connectionString: url });
    await observer.connect();
    cleanups.push(() => observer.end());
    const answered = new Set<string>();
    observer.on('notification', (message) => {
      const control = parseControl(message.payload);
      if (control !== null && 'ack' in control && control.from === 'burst-listener') answered.add(control.ack);
    });
    await observer.query(`LISTEN "${channel}"`);
    // One statement, so the 200 hellos reach the listener together.
    const hellos = Array.from({ length: 200 }, (_, i) => encodeHello(`peer-${i}`));
    await observer.query('SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p', [channel, hellos]);
    await waitFor('an answer to each hello', () => answered.size === 200, { timeoutMs: 10_000, intervalMs: 10 });
    expect(most).toBe(1);
  }, 30_000);
});
