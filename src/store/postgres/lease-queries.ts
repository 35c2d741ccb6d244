/**
 * The lease's named statements for PostgreSQL (lease.ts): the probe for due
 * expiries that runs before each lease, the picks without and with a kinds
 * filter, and the restricted path's lock, flow state, rate windows and the
 * skip scan of a tenant's queued kinds. queries.ts exports them with the
 * other statements that move jobs.
 */

import { countJobTerms, UNFINISHED_TERMS } from './counter-triggers.js';
import {
  firstUngroupedReady,
  interval,
  JOB_COLUMNS,
  jobInsertCtes,
  ms,
  namedQuery,
  NEW_JOB_COLUMNS,
  NOW_MS,
  QUEUED_KINDS,
  readyInsert,
  RESTRICTED_KIND,
  ts,
} from './sql-fragments.js';

/**
 * Are leases or deadlines due, in any tenant? Two index probes; like the SQLite store, a lease settles every
 * tenant's due expiries (the store reaps when a lease answers `due`), so the probe needs no tenant filter
 * (which would scan other tenants' entries). The common lease statements answer it themselves (their `flow`);
 * the restricted path runs DUE_PROBE in its transaction.
 */
// The first entry of each index (min): an index probe whatever the planner's statistics say of the tables' sizes.
const DUE_NOW = `coalesce((SELECT min(expires_at) FROM job_leases) <= now(), false)
       OR coalesce((SELECT min(deadline_at) FROM job_ready) <= now(), false)`;

export const DUE_PROBE = namedQuery('lh_due_probe', `SELECT ${DUE_NOW} AS due`);

/** The lease order, written once: priority first, then the earliest due, then the first enqueued. `of` qualifies the columns. */
function leaseOrder(of = ''): string {
  return `${of}priority DESC, ${of}run_after, ${of}seq`;
}

const AVAILABLE_NOW = `r.run_after <= now() AND (r.deadline_at IS NULL OR r.deadline_at > now())`;

/**
 * The picks walk job_ready_order, one kind at a time: each kind's available jobs in lease order, at most $2 of
 * each, locked as they are walked, and the best $2 of those; so a lease reads O(max × kinds) rows whatever
 * other kinds have queued. With a kinds filter ($6) the kinds are the filter's; without one, the skip scan of
 * the tenant's queued kinds (QUEUED_KINDS). The rows walked but not picked stay locked until the statement's
 * transaction ends (a few ms), and concurrent leases skip them meanwhile. Each pick answers the ready rows'
 * ctids, which the lease statement deletes. Both unrestricted picks take nothing when `flow` says a kind they
 * may take is restricted (leaseStatement's `held`).
 */
const UNHELD = 'AND NOT (SELECT held FROM flow)';
const walk = (limit: string, unheld: string): string => `CROSS JOIN LATERAL (
          SELECT r.ctid AS ready_ctid, r.priority, r.run_after, r.seq FROM job_ready r
           WHERE r.tenant = $1 AND r.kind = k.kind AND r.group_key = '' AND ${AVAILABLE_NOW} ${unheld}
           ORDER BY ${leaseOrder('r.')} LIMIT ${limit} FOR UPDATE SKIP LOCKED) c`;
const PICK_ANY_KIND = `${QUEUED_KINDS}
        SELECT c.ready_ctid FROM k ${walk('$2', UNHELD)} WHERE k.kind IS NOT NULL ${UNHELD} ORDER BY ${leaseOrder('c.')} LIMIT $2`;
const PICK_KINDS = `SELECT c.ready_ctid FROM (SELECT DISTINCT unnest($6::text[]) AS kind) k ${walk('$2', UNHELD)}
        ORDER BY ${leaseOrder('c.')} LIMIT $2`;

const RESTRICTED = RESTRICTED_KIND;

/**
 * The capped pick of a tenant with restricted kinds ($6 kinds, $7 the cap of each: what its limits allow,
 * flow-limits.ts): each kind's walk stops at its cap.
 */
const PICK_CAPPED = `SELECT c.ready_ctid FROM unnest($6::text[], $7::int[]) AS k(kind, cap) ${walk('k.cap', '')}
        ORDER BY ${leaseOrder('c.')} LIMIT $2`;

/**
 * When the lease took fewer than $2 jobs, the next due time of what is left (jobNextDue's answer, next-due.ts):
 * the earliest run_after still ahead among the tenant's queued jobs of the kinds the lease may take. A short
 * pick walked every due job it could lock, so a due job still queued is one that a concurrent lease holds
 * locked: that lease takes it, or, if its statement fails, the store announces its kinds again (lease.ts).
 * Counting it would send the polls of a busy group back to lease every millisecond until that lease commits.
 * Per kind, the first entry ahead of now of each of its priorities (firstUngroupedReady: a kind with groups
 * is held, so the statements answer no next due for it); without a filter, the skip scan of the tenant's
 * queued kinds.
 */
const FIRST_LEFT_OF_KIND = firstUngroupedReady('k.kind', 'r.run_after > now() AND (r.deadline_at IS NULL OR r.deadline_at > now())');
const NEXT_DUE_KINDS = `(SELECT ${ms(`MIN(${FIRST_LEFT_OF_KIND})`)} FROM (SELECT DISTINCT unnest($6::text[]) AS kind) k)`;
const NEXT_DUE_ANY_KIND = `(${QUEUED_KINDS} SELECT ${ms(`MIN(${FIRST_LEFT_OF_KIND})`)} FROM k WHERE k.kind IS NOT NULL)`;

/**
 * The lease of each job of `from` (rows of jobs `j`, each with its token `t.token`): the epoch and the attempt
 * one past the job's, held by `worker` until `leaseMs` from now or the job's deadline, whichever comes first.
 */
function leaseRows(from: string, worker: string, leaseMs: string): string {
  return `INSERT INTO job_leases (job_seq, tenant, kind, epoch, attempt, token, worker_id, started_at, expires_at, deadline_at)
       SELECT j.seq, j.tenant, j.kind, j.epoch + 1, j.attempts + 1, t.token, ${worker}, now(), LEAST(now() + ${interval(leaseMs)}, j.deadline_at), j.deadline_at
         FROM ${from}
       RETURNING *`;
}

/** A taken job as the running counter counts it: started now if this is its first lease. */
const RUNNING_JOBS = `(SELECT tenant, kind, 'running'::text AS status, coalesce(started_at, now()) AS started_at, created_at, finished_at,
          payload_bytes, checkpoint_state, progress FROM taken)`;

/**
 * `held`: the guard of the unrestricted statements, the same probe of kinds_flow for the kinds the lease may
 * take (every kind, or $6), and one of group_clocks for kinds with groups. It finds no row for a tenant without
 * pauses, limits or groups, and is evaluated once
 * (an InitPlan) before the pick; when it finds one the pick takes nothing and every answer row says so
 * (`held`), so the store takes the restricted path without another round trip to learn it. Every answer
 * row also says whether expired leases or passed deadlines are due anywhere (`due`, DUE_NOW), which the
 * store then settles, without a probe of its own before each lease.
 */
function leaseStatement(name: string, pick: string, held: string | null, nextDue: string | null): ReturnType<typeof namedQuery> {
  // $1 tenant, $2 max, $3 tokens (one per slot, drawn in Node), $4 worker, $5 lease ms[, $6 kinds[, $7 caps]].
  // One statement: the pick (FOR UPDATE SKIP LOCKED, so concurrent leases pass each other instead of
  // queueing on the same rows; an InitPlan, so it runs exactly once) deletes the ready rows, and each job
  // gets a lease row with its epoch bumped (job_leases' primary key admits one live lease per job). The job's
  // own row is read, not written; the counters move from queued to running.
  const leasedJobs = `SELECT ${JOB_COLUMNS} FROM leased l JOIN taken j ON j.seq = l.job_seq`;
  return namedQuery(
    name,
    `WITH ${held === null ? '' : `flow AS (SELECT ${held} AS held, ${DUE_NOW} AS due), `}picked AS (
       DELETE FROM job_ready r WHERE r.ctid = ANY (ARRAY(${pick}))
       RETURNING r.seq
     ), taken AS MATERIALIZED (
       SELECT j.*, row_number() OVER () AS n FROM picked JOIN jobs j ON j.seq = picked.seq
     ), leased AS (
       ${leaseRows('taken j JOIN unnest($3::text[]) WITH ORDINALITY AS t(token, n) USING (n)', '$4', '$5')}
     ), counted AS (
       ${countJobTerms(UNFINISHED_TERMS, [
         ['taken', '-', "'queued'"],
         [RUNNING_JOBS, ''],
       ])}
     )
     ${
       held === null
         ? `${leasedJobs} ORDER BY ${leaseOrder('j.')}`
         : `SELECT lj.*, flow.held, flow.due,
                   CASE WHEN NOT flow.held AND (SELECT count(*) FROM picked) < $2 THEN ${nextDue} END AS next_due_ms, ${NOW_MS}
              FROM flow LEFT JOIN (${leasedJobs}) lj ON true ORDER BY ${leaseOrder('lj.')}`
     }`,
  );
}

// A kind with groups (a group_clocks row) is held too: the restricted path leases it by its fair plan (group-lease.ts).
const HELD_ANY_KIND = `(EXISTS (SELECT 1 FROM kinds WHERE tenant = $1 AND ${RESTRICTED}) OR EXISTS (SELECT 1 FROM group_clocks WHERE tenant = $1))`;
const HELD_KINDS = `(EXISTS (SELECT 1 FROM kinds WHERE tenant = $1 AND kind = ANY($6::text[]) AND ${RESTRICTED})
         OR EXISTS (SELECT 1 FROM group_clocks WHERE tenant = $1 AND kind = ANY($6::text[])))`;

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

/** The distinct kinds of the tenant's queued jobs (a skip scan of job_ready_order): a restricted lease without a filter walks each. */
export const JOB_QUEUED_KINDS = namedQuery(
  'lh_job_queued_kinds',
  `${QUEUED_KINDS}
   SELECT kind FROM k WHERE kind IS NOT NULL LIMIT $2`,
);

/**
 * The enqueue of one plain job ($1-$12 as JOB_INSERT_MANY_UNGROUPED's, one element each) that a poll parked for
 * its kind takes at once: unless its kind is paused, limited or has groups (`held`, as the lease statements
 * probe it), the job gets its lease ($13 the token, $14 the worker, $15 the lease ms) in place of a job_ready
 * row and is counted running; a held kind's job is queued as any other. Answers the job as inserted (`handed`
 * false) and, when leased, the job as leased (`handed` true). The caller hands only a job available now to a
 * poll whose group's last lease left nothing it could take, so no queued job comes before it in lease order.
 */
export const JOB_INSERT_LEASED = namedQuery(
  'lh_job_insert_leased',
  `WITH ${jobInsertCtes(false)}, flow AS (
       SELECT EXISTS (SELECT 1 FROM kinds WHERE tenant = ($2::text[])[1] AND kind = ($6::text[])[1] AND ${RESTRICTED})
              OR EXISTS (SELECT 1 FROM group_clocks WHERE tenant = ($2::text[])[1] AND kind = ($6::text[])[1]) AS held
     ), ready AS (
       ${readyInsert('ins')} AND (SELECT held FROM flow)
     ), leased AS (
       ${leaseRows('ins j CROSS JOIN (SELECT $13::text AS token) t WHERE NOT (SELECT held FROM flow)', '$14', '$15')}
     ), counted AS (
       ${countJobTerms(UNFINISHED_TERMS, [
         [
           `(SELECT tenant, kind, CASE WHEN held THEN 'queued' ELSE 'running' END AS status, CASE WHEN held THEN NULL ELSE now() END AS started_at,
                    created_at, finished_at, payload_bytes, checkpoint_state, progress FROM ins CROSS JOIN flow)`,
           '',
         ],
       ])}
     )
   SELECT false AS handed, ${NEW_JOB_COLUMNS} FROM ins j
   UNION ALL
   SELECT true, ${JOB_COLUMNS} FROM leased l JOIN ins j ON j.seq = l.job_seq`,
);
