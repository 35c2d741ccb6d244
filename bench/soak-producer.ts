/**
 * The soak's producer: enqueues at a steady rate through POST /jobs/batch
 * while the coordinator is being killed. A batch that got no answer (lost
 * connection, 503, any 5xx) is sent again unchanged, with the same
 * idempotency keys, until it is answered: a job counts as accepted only when
 * its item was acknowledged with 202, and a replayed 202 (the first answer was
 * lost with the coordinator) names the same job.
 */

import { LeaseholdApiError, LeaseholdNetworkError } from '../src/client/errors.js';
import type { LeaseholdClient } from '../src/client/leasehold-client.js';
import type { EnqueueBatchItem } from '../src/protocol/schemas.js';
import type { SoakFate, SoakPayload } from './soak-handlers.js';

/** The failure policy of payload n: a small deterministic share of each fate. */
export function fateOf(n: number): SoakFate {
  if (n % 20 === 7) return 'permanent';
  if (n % 20 === 13) return 'exhaust';
  if (n % 10 === 3) return 'flaky';
  return 'ok';
}

/** Attempts of an `exhaust` job; the others get enough that kills alone never use them up. */
export const EXHAUST_ATTEMPTS = 3;
export const DEFAULT_ATTEMPTS = 25;

export function soakJob(n: number, leaseMs: number): EnqueueBatchItem {
  const fate = fateOf(n);
  // One job in 50 outlives its lease several times over, so it lives on renewals.
  const workMs = n % 50 === 11 ? Math.round(leaseMs * 1.5) : 20 + ((n * 37) % 180);
  const payload: SoakPayload = { n, fate, workMs };
  return { idempotencyKey: `soak-${n}`, kind: 'soak', payload, maxAttempts: fate === 'exhaust' ? EXHAUST_ATTEMPTS : DEFAULT_ATTEMPTS };
}

export interface Acknowledged {
  readonly n: number;
  readonly idempotencyKey: string;
  readonly id: string;
}

export interface ProducerTally {
  readonly accepted: Acknowledged[];
  /** Items acknowledged by a replay: their first answer was lost. */
  replayedAcks: number;
  /** Times a batch was sent again after no answer. */
  batchRetries: number;
  networkErrors: number;
  /** 5xx answers by status. */
  serverErrors: Record<string, number>;
  /** Items refused (not 202), by code: must stay empty. */
  refused: Record<string, number>;
  /** Items given up on after `giveUpMs` without an answer. */
  unacknowledged: number;
}

export interface ProducerOptions {
  readonly client: LeaseholdClient;
  readonly jobsPerSecond: number;
  readonly leaseMs: number;
  /** Enqueuing stops (after the batch in flight is answered) when this aborts. */
  readonly signal: AbortSignal;
  /** How long one batch is retried without an answer before it is given up. */
  readonly giveUpMs?: number;
}

const TICK_MS = 100;
const MAX_BATCH = 200;

export async function produce(options: ProducerOptions): Promise<ProducerTally> {
  const tally: ProducerTally = { accepted: [], replayedAcks: 0, batchRetries: 0, networkErrors: 0, serverErrors: {}, refused: {}, unacknowledged: 0 };
  const startedAt = performance.now();
  let next = 0;
  while (!options.signal.aborted) {
    const due = Math.floor(((performance.now() - startedAt) / 1000) * options.jobsPerSecond);
    if (due <= next) {
      await pause(TICK_MS);
      continue;
    }
    const items = Array.from({ length: Math.min(due - next, MAX_BATCH) }, (_, k) => soakJob(next + k, options.leaseMs));
    next += items.length;
    await sendUntilAnswered(options, items, tally);
  }
  return tally;
}

async function sendUntilAnswered(options: ProducerOptions, items: EnqueueBatchItem[], tally: ProducerTally): Promise<void> {
  const giveUpAt = performance.now() + (options.giveUpMs ?? 60_000);
  for (let attempt = 1; ; attempt++) {
    try {
      const answer = await options.client.enqueueBatch(items);
      answer.results.forEach((result, index) => {
        const n = (items[index]?.payload as SoakPayload | undefined)?.n ?? -1;
        if (result.status === 202 && result.job !== undefined) {
          tally.accepted.push({ n, idempotencyKey: result.idempotencyKey, id: result.job.id });
          if (result.replayed === true) tally.replayedAcks += 1;
        } else {
          const code = result.error?.code ?? `http_${result.status}`;
          tally.refused[code] = (tally.refused[code] ?? 0) + 1;
        }
      });
      return;
    } catch (error) {
      if (error instanceof LeaseholdNetworkError) tally.networkErrors += 1;
      else if (error instanceof LeaseholdApiError && error.status >= 500) tally.serverErrors[error.status] = (tally.serverErrors[error.status] ?? 0) + 1;
      else throw error;
      if (performance.now() >= giveUpAt) {
        tally.unacknowledged += items.length;
        return;
      }
      tally.batchRetries += 1;
      await pause(Math.min(1_000, 50 * 2 ** Math.min(attempt, 5)));
    }
  }
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
