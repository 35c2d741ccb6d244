/**
 * One job, many leasers, exactly one winner (issue 5, item 2).
 *
 * At the store level, on every backend: each round enqueues one job and fires
 * 200 jobLease calls at once, spread over several stores on the same database
 * (on SQLite each store is its own connection and group-commit queue, so the
 * calls share transactions inside a store and contend for the write lock
 * between stores; on PostgreSQL each store is its own pool). Exactly one call
 * gets the job, at epoch 1, with one attempt row. 500 rounds.
 *
 * Over real HTTP: a coordinator listening on a random port and 200
 * concurrent POST /lease requests on 200 sockets per round, some rounds as
 * long polls that park before the job arrives. Exactly one 200, the rest 204.
 *
 * Each part prints its rounds, duplicates and duration for docs/RELIABILITY.md.
 */

import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import type { LeasedJob, Store } from '../../src/store/store.js';
import { backends, type BackendInstance } from '../support/backends.js';
import { bearer, drainAfterAll, startCoordinator } from '../support/http-fixtures.js';

const LEASERS = 200;
/**
 * Issue 5 asks for 500 rounds. PostgreSQL answers a lease in a round trip
 * (about 130 ms per round of 200 here), so by default it runs fewer;
 * LEASEHOLD_RACE_ROUNDS=500 runs the full count on every backend.
 */
const ROUNDS_OVERRIDE = Number(process.env['LEASEHOLD_RACE_ROUNDS'] ?? '') || undefined;
const STORE_ROUNDS: Record<string, number> = { sqlite: ROUNDS_OVERRIDE ?? 500, postgres: ROUNDS_OVERRIDE ?? 100 };
const HTTP_ROUNDS: Record<string, number> = { sqlite: 25, postgres: 8 };
const LONG_POLL_ROUNDS = 3;
const PEERS = 3;

const lines: string[] = [];
afterAll(() => {
  for (const line of lines) console.log(line);
});

describe.each(backends)('lease races ($name)', (backend) => {
  drainAfterAll(backend);

  const storeRounds = STORE_ROUNDS[backend.name] ?? 100;
  it(`store: 1 job, ${LEASERS} concurrent leases, ${storeRounds} rounds — exactly one winner each round`, { timeout: 300_000 }, async () => {
    const instance: BackendInstance = await backend.create();
    try {
      const stores: Store[] = [instance.store];
      for (let i = 1; i < PEERS; i++) stores.push(await instance.openPeer());
      const started = performance.now();
      let duplicates = 0;
      let empty = 0;
      for (let round = 0; round < storeRounds; round++) {
        const enqueued = await instance.store.jobEnqueue({
          tenant: 'race',
          owner: 'alice',
          idempotencyKey: `round-${round}`,
          requestHash: `round-${round}`,
          kind: round % 2 === 0 ? 'race' : 'other',
          payload: { round },
          maxAttempts: 3,
          priority: 0,
          runAfter: null,
          deadlineMs: null,
          payloadBytes: 12,
        });
        if (enqueued.kind !== 'created') throw new Error('round job not created');
        // Odd rounds filter by kind (the other statement), and some callers ask for a batch.
        const kinds = round % 2 === 0 ? undefined : ['other', 'race'];
        const results: (readonly LeasedJob[])[] = await Promise.all(
          Array.from({ length: LEASERS }, (_, i) =>
            (stores[i % stores.length] as Store).jobLease({
              tenant: 'race',
              workerId: `w${i % 7}`,
              leaseMs: 3_600_000,
              max: 1 + (i % 3),
              ...(kinds === undefined ? {} : { kinds }),
            }),
          ),
        );
        const won = results.flat();
        if (won.length > 1) duplicates += won.length - 1;
        if (won.length === 0) empty += 1;
        expect(
          won.map((job) => job.id),
          `round ${round}`,
        ).toEqual([enqueued.job.id]);
        expect(won[0]?.epoch).toBe(1);
        const attempts = await instance.store.jobAttempts({ scope: { tenant: 'race' }, id: enqueued.job.id });
        expect(attempts?.length, `round ${round}: attempt rows`).toBe(1);
      }
      const seconds = (performance.now() - started) / 1000;
      const stats = await instance.store.stats({ tenant: 'race' });
      expect(stats.counts.running).toBe(storeRounds);
      expect(stats.counts.queued).toBe(0);
      lines.push(
        `lease race (store, ${backend.name}, ${PEERS} stores): ${storeRounds} rounds x ${LEASERS} leasers, ${duplicates} duplicates, ${empty} rounds without a winner, ${seconds.toFixed(1)} s`,
      );
      expect(duplicates).toBe(0);
    } finally {
      await instance.cleanup();
    }
  });

  it(`HTTP: 1 job, ${LEASERS} concurrent POST /lease on ${LEASERS} sockets — exactly one 200 each round`, async () => {
    const h = await startCoordinator({ authCacheMs: 60_000 }, { backend });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const address = h.app.server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const http = new Pool(`http://127.0.0.1:${address.port}`, { connections: LEASERS, pipelining: 1 });
    // Its own connection: behind 200 parked long polls the enqueue would wait for a free socket.
    const producer = new Pool(`http://127.0.0.1:${address.port}`, { connections: 1 });
    try {
      const rounds = HTTP_ROUNDS[backend.name] ?? 20;
      const started = performance.now();
      let duplicates = 0;
      let empty = 0;
      const lease = async (worker: number, waitMs: number): Promise<{ status: number; ids: string[] }> => {
        const response = await http.request({
          method: 'POST',
          path: '/lease',
          headers: { ...bearer(h.keys.worker), 'content-type': 'application/json' },
          body: JSON.stringify({ workerId: `w${worker % 5}`, leaseMs: 3_600_000, max: 1 + (worker % 2), waitMs }),
        });
        const text = await response.body.text();
        if (response.statusCode === 204) return { status: 204, ids: [] };
        if (response.statusCode !== 200) throw new Error(`lease answered ${response.statusCode}: ${text}`);
        return { status: 200, ids: (JSON.parse(text) as { jobs: { id: string }[] }).jobs.map((j) => j.id) };
      };
      const enqueue = async (key: string): Promise<string> => {
        const response = await producer.request({
          method: 'POST',
          path: '/jobs',
          headers: { ...bearer(h.keys.producer), 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ kind: 'race', payload: { key } }),
        });
        const text = await response.body.text();
        expect(response.statusCode, text).toBe(202);
        return (JSON.parse(text) as { id: string }).id;
      };
      for (let round = 0; round < rounds + LONG_POLL_ROUNDS; round++) {
        const longPoll = round >= rounds;
        let id: string;
        let answers: { status: number; ids: string[] }[];
        if (longPoll) {
          // The leasers park first (the queue is empty); the job arrives while they wait.
          const pending = Promise.all(Array.from({ length: LEASERS }, (_, i) => lease(i, 1_000)));
          id = await enqueue(`http-${round}`);
          answers = await pending;
        } else {
          id = await enqueue(`http-${round}`);
          answers = await Promise.all(Array.from({ length: LEASERS }, (_, i) => lease(i, 0)));
        }
        const won = answers.flatMap((a) => a.ids);
        if (won.length > 1) duplicates += won.length - 1;
        if (won.length === 0) empty += 1;
        expect(won, `round ${round}`).toEqual([id]);
        expect(answers.filter((a) => a.status === 200).length).toBe(1);
        expect(answers.filter((a) => a.status === 204).length).toBe(LEASERS - 1);
      }
      const seconds = (performance.now() - started) / 1000;
      lines.push(
        `lease race (HTTP, ${backend.name}): ${rounds + LONG_POLL_ROUNDS} rounds (${LONG_POLL_ROUNDS} as long polls) x ${LEASERS} requests, ${duplicates} duplicates, ${empty} rounds without a winner, ${seconds.toFixed(1)} s`,
      );
      expect(duplicates).toBe(0);
    } finally {
      await http.close();
      await producer.close();
      await h.close();
    }
  });
});
