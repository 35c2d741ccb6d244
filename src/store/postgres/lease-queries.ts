/**
 * The lease's named statements for PostgreSQL (lease.ts): the probe for due
 * expiries that runs before each lease, the picks without and with a kinds
 * filter, and the restricted path's lock, flow state, rate windows and the
 * skip scan of a tenant's queued kinds. queries.ts exports them with the
 * other statements that move jobs.
 */

import { interval, JOB_COLUMNS, ms, namedQuery, NOW_MS, QUEUED_KINDS, RESTRICTED_KIND, ts } from './sql-fragments.js';

/**
 * Are leases or deadlines due, in any tenant? Two index probes; like the SQLite store, a lease settles every
 * tenant's due expiries (the store reaps when a lease answers `due`), so the probe needs no tenant filter
 * (which would scan other tenants' entries). The common lease statements answer it themselves (their `flow`);
 * the restricted path runs DUE_PROBE in its transaction.
 */
const DUE_NOW = `EXISTS (SELECT 1 FROM jobs WHERE status = 'running' AND lease_expires_at <= now())
       OR EXISTS (SELECT 1 FROM jobs WHERE status = 'queued' AND deadline_at <= now())`;

export const DUE_PROBE = namedQuery('lh_due_probe', `SELECT ${DUE_NOW} AS due`);

/** The lease order, written once: priority first, then the earliest due, then the first enqueued. `of` qualifies the columns. */
function leaseOrder(of = ''): string {
  return `${of}priority DESC, ${of}run_after, ${of}seq`;
}

const AVAILABLE_NOW = `status = 'queued' AND run_after <= now() AND (deadline_at IS NULL OR deadline_at > now())`;

/**
 * Without a kinds filter: the tenant's available jobs in lease order (jobs_available). With one ($6): each
 * kind's available jobs in lease order (jobs_available_by_kind), at most $2 of each, locked as they are
 * walked, and the best $2 of those; so a lease reads O(max × kinds) rows whatever other kinds have queued.
 * The rows walked but not picked stay locked until the statement's transaction ends (a few ms), and
 * concurrent leases skip them meanwhile. Both take nothing when `flow` says a kind they may take is
 * restricted (leaseStatement's `held`).
 */
const UNHELD = 'AND NOT (SELECT held FROM flow)';
const PICK_ANY_KIND = `SELECT id FROM jobs WHERE tenant = $1 AND ${AVAILABLE_NOW} ${UNHELD}
        ORDER BY ${leaseOrder()} LIMIT $2 FOR UPDATE SKIP LOCKED`;
const PICK_KINDS = `SELECT c.id FROM (SELECT DISTINCT unnest($6::text[]) AS kind) k
        CROSS JOIN LATERAL (
          SELECT id, priority, run_after, seq FROM jobs WHERE tenant = $1 AND kind = k.kind AND ${AVAILABLE_NOW} ${UNHELD}
           ORDER BY ${leaseOrder()} LIMIT $2 FOR UPDATE SKIP LOCKED) c
        ORDER BY ${leaseOrder('c.')} LIMIT $2`;

const RESTRICTED = RESTRICTED_KIND;

/**
 * The capped pick of a tenant with restricted kinds ($6 kinds, $7 the cap of each: what its limits allow,
 * flow-limits.ts): each kind's walk stops at its cap.
 */
const PICK_CAPPED = `SELECT c.id FROM unnest($6::text[], $7::int[]) AS k(kind, cap)
        CROSS JOIN LATERAL (
          SELECT id, priority, run_after, seq FROM jobs WHERE tenant = $1 AND kind = k.kind AND ${AVAILABLE_NOW}
           ORDER BY ${leaseOrder()} LIMIT k.cap FOR UPDATE SKIP LOCKED) c
        ORDER BY ${leaseOrder('c.')} LIMIT $2`;

/**
 * When the lease took fewer than $2 jobs, the next due time of what is left (jobNextDue's answer, next-due.ts):
 * the earliest run_after still ahead among the tenant's queued jobs of the kinds the lease may take. A short
 * pick walked every due job it could lock, so a due job still queued is one that a concurrent lease holds
 * locked: that lease takes it, or, if its statement fails, the store announces its kinds again (lease.ts).
 * Counting it would send the polls of a busy group back to lease every millisecond until that lease commits.
 * One index range per kind (jobs_delayed, from now); without a filter, the skip scan of the tenant's queued kinds.
 */
const FIRST_LEFT_OF_KIND = `(SELECT j.run_after FROM jobs j WHERE j.tenant = $1 AND j.kind = k.kind AND j.status = 'queued'
    AND j.run_after > now() AND (j.deadline_at IS NULL OR j.deadline_at > now()) ORDER BY j.run_after LIMIT 1)`;
const NEXT_DUE_KINDS = `(SELECT ${ms(`MIN(${FIRST_LEFT_OF_KIND})`)} FROM (SELECT DISTINCT unnest($6::text[]) AS kind) k)`;
const NEXT_DUE_ANY_KIND = `(${QUEUED_KINDS} SELECT ${ms(`MIN(${FIRST_LEFT_OF_KIND})`)} FROM k WHERE k.kind IS NOT NULL)`;

/**
 * `held`: the guard of the unrestricted statements, the same probe of kinds_flow for the kinds the lease may
 * take (every kind, or $6). It finds no row for a tenant without pauses or limits, and is evaluated once
 * (an InitPlan) before the pick; when it finds one the pick takes nothing and every answer row says so
 * (`held`), so the store takes the restricted path without another round trip to learn it. Every answer
 * row also says whether expired leases or passed deadlines are due anywhere (`due`, DUE_NOW), which the
 * store then settles, without a probe of its own before each lease.
 */
function leaseStatement(name: string, pick: string, held: string | null, nextDue: string | null): ReturnType<typeof namedQuery> {
  // $1 tenant, $2 max, $3 tokens (one per slot, drawn in Node), $4 worker, $5 lease ms[, $6 kinds[, $7 caps]].
  // FOR UPDATE SKIP LOCKED lets concurrent leases pass each other instead of
  // queueing on the same rows. MATERIALIZED: the pick must run exactly once,
  // or a re-scan could skip different rows. The attempt row is written by the
  // same statement.
  return namedQuery(
    name,
    `WITH ${held === null ? '' : `flow AS (SELECT ${held} AS held, ${DUE_NOW} AS due), `}picked AS MATERIALIZED (
       ${pick}
     ), numbered AS (
       SELECT id, row_number() OVER () AS n FROM picked
     ), leased AS (
       UPDATE jobs j SET status = 'running', attempts = j.attempts + 1, epoch = j.epoch + 1,
              lease_token = t.token, lease_owner = $4,
              lease_expires_at = LEAST(now() + ${interval('$5')}, j.deadline_at),
              started_at = coalesce(j.started_at, now()), last_outcome = NULL, effect_started_at = NULL
         FROM numbered JOIN unnest($3::text[]) WITH ORDINALITY AS t(token, n) USING (n)
        WHERE j.id = numbered.id AND j.status = 'queued'
       RETURNING ${JOB_COLUMNS}
     ), attempt_rows AS (
       INSERT INTO job_attempts (job_id, epoch, attempt, worker_id, started_at)
       SELECT id::uuid, epoch, attempts, $4, now() FROM leased
     )
     ${
       held === null
         ? `SELECT * FROM leased ORDER BY ${leaseOrder()}`
         : `SELECT leased.*, flow.held, flow.due,
                   CASE WHEN NOT flow.held AND (SELECT count(*) FROM picked) < $2 THEN ${nextDue} END AS next_due_ms, ${NOW_MS}
              FROM flow LEFT JOIN leased ON true ORDER BY ${leaseOrder('leased.')}`
     }`,
  );
}

const HELD_ANY_KIND = `EXISTS (SELECT 1 FROM kinds WHERE tenant = $1 AND ${RESTRICTED})`;
const HELD_KINDS = `EXISTS (SELECT 1 FROM kinds WHERE tenant = $1 AND kind = ANY($6::text[]) AND ${RESTRICTED})`;

export const JOB_LEASE_ANY_KIND = leaseStatement('lh_job_lease_any_kind', PICK_ANY_KIND, HELD_ANY_KIND, NEXT_DUE_ANY_KIND);
export const JOB_LEASE_KINDS = leaseStatement('lh_job_lease_kinds', PICK_KINDS, HELD_KINDS, NEXT_DUE_KINDS);
export const JOB_LEASE_CAPPED = leaseStatement('lh_job_lease_capped', PICK_CAPPED, null, null);

/**
 * The restricted path's lock ($2: the kinds it may take, NULL for all): the tenant's restricted kinds rows, in
 * kind order so two leases cannot deadlock. Two coordinators leasing one restricted kind queue here, and
 * the second reads the counts (KIND_FLOW_STATE, a later statement with a fresh snapshot) only after the
 * first has committed its leases: so neither can exceed a limit the other already filled.
 */
export const KIND_FLOW_LOCK = namedQuery(
  'lh_kind_flow_lock',
  `SELECT kind FROM kinds WHERE tenant = $1 AND ${RESTRICTED} AND ($2::text[] IS NULL OR kind = ANY($2::text[]))
    ORDER BY kind FOR NO KEY UPDATE`,
);

/** The tenant's restricted kinds with what a lease decides by: live leases (the counters of migration 5) and the rate window. */
export const KIND_FLOW_STATE = namedQuery(
  'lh_kind_flow_state',
  `SELECT k.kind, k.paused, k.max_concurrent, k.rate_limit, k.rate_per_ms::float8 AS rate_per_ms,
          (SELECT sum(c.jobs) FROM job_counters c WHERE c.tenant = k.tenant AND c.kind = k.kind AND c.status = 'running')::float8 AS running,
          ${ms('w.window_start')} AS window_start, w.window_count, ${NOW_MS}
     FROM kinds k LEFT JOIN kind_windows w ON w.tenant = k.tenant AND w.kind = k.kind
    WHERE k.tenant = $1 AND ${RESTRICTED}`,
);

export const KIND_WINDOW_SET = namedQuery(
  'lh_kind_window_set',
  `INSERT INTO kind_windows AS w (tenant, kind, window_start, window_count) VALUES ($1, $2, ${ts('$3')}, $4)
   ON CONFLICT (tenant, kind) DO UPDATE SET window_start = EXCLUDED.window_start, window_count = EXCLUDED.window_count`,
);

/** The distinct kinds of the tenant's queued jobs (a skip scan): a restricted lease without a filter walks each. */
export const JOB_QUEUED_KINDS = namedQuery(
  'lh_job_queued_kinds',
  `${QUEUED_KINDS}
   SELECT kind FROM k WHERE kind IS NOT NULL LIMIT $2`,
);
