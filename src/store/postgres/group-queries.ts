/**
 * The statements of the fair lease among groups for PostgreSQL (group-lease.ts,
 * docs/FAIRNESS.md §4), named as SQLite's (src/store/sqlite/group-queries.ts),
 * and the CTEs with which the statements that move ready rows or end leases
 * keep the group rows (each one event of core/group-transitions.ts). Only kinds
 * with groups run the statements: a kind without has no group_clocks row, and
 * the plain lease statements' guard keeps it off this path; the CTEs find no
 * row to write for a job without a group or a lease of the plain path.
 */

import { countJobTerms, UNFINISHED_TERMS } from './counter-triggers.js';
import { interval, JOB_COLUMNS, namedQuery, NOW_MS } from './sql-fragments.js';

const LEASABLE = `r.run_after <= now() AND (r.deadline_at IS NULL OR r.deadline_at > now())`;

/**
 * After a CTE `ready_source` of new jobs rows (an INSERT's or UPDATE's RETURNING j.*), the CTEs that count its
 * queued jobs with a group in their groups (queued + n, back into the candidate index) and mark their kinds as
 * having groups. Written as `, ${readyCounted('ins')}` after the statement's other CTEs.
 */
export function readyCounted(source: string): string {
  return `grouped_ready AS (
       INSERT INTO group_states AS g (tenant, kind, group_key, queued)
       SELECT tenant, kind, group_key, count(*) FROM ${source} WHERE status = 'queued' AND group_key <> ''
        GROUP BY tenant, kind, group_key ORDER BY tenant, kind, group_key
       ON CONFLICT (tenant, kind, group_key) DO UPDATE SET queued = g.queued + EXCLUDED.queued, wake_at = NULL
     ), grouped_kinds AS (
       INSERT INTO group_clocks (tenant, kind)
       SELECT DISTINCT tenant, kind FROM ${source} WHERE status = 'queued' AND group_key <> '' ORDER BY tenant, kind
       ON CONFLICT (tenant, kind) DO NOTHING
     )`;
}

/** The CTE that takes ready rows of `gone` (deleted job_ready rows with tenant, kind and group_key) out of their groups' counts. */
export function readyUncounted(gone: string): string {
  return `grouped_gone AS (
       UPDATE group_states g SET queued = GREATEST(0, g.queued - x.n)
         FROM (SELECT tenant, kind, group_key, count(*) AS n FROM ${gone} WHERE group_key <> '' GROUP BY tenant, kind, group_key) x
        WHERE g.tenant = x.tenant AND g.kind = x.kind AND g.group_key = x.group_key
     )`;
}

/** The CTE that frees the group slots of `ended` (deleted job_leases rows): core/fair-share.ts groupAfterFinish. */
export function leasesFreed(ended: string): string {
  return `groups_freed AS (
       UPDATE group_states g SET running = GREATEST(0, g.running - x.n), slot_held = false
         FROM (SELECT tenant, kind, group_key, count(*) AS n FROM ${ended} WHERE group_key IS NOT NULL GROUP BY tenant, kind, group_key) x
        WHERE g.tenant = x.tenant AND g.kind = x.kind AND g.group_key = x.group_key
     )`;
}

/**
 * leasesFreed and readyCounted in one CTE, for a statement whose ended leases (`ended`) may put their jobs back
 * into job_ready (`moved`, new jobs rows): PostgreSQL applies only one of two CTEs' changes to one row, so the
 * group's slot and its queued count move together. A job with a group was leased by its group's plan, so its row
 * exists (an UPDATE is enough).
 */
export function leasesEnded(ended: string, moved: string): string {
  return `groups_ended AS (
       UPDATE group_states g SET running = GREATEST(0, g.running - x.freed), queued = g.queued + x.queued,
              slot_held = g.slot_held AND x.freed = 0, wake_at = CASE WHEN x.queued > 0 THEN NULL ELSE g.wake_at END
         FROM (SELECT tenant, kind, group_key, sum(queued)::int AS queued, sum(freed)::int AS freed FROM (
                 SELECT tenant, kind, group_key, 0 AS queued, 1 AS freed FROM ${ended} WHERE group_key IS NOT NULL
                 UNION ALL
                 SELECT tenant, kind, group_key, 1, 0 FROM ${moved} WHERE status = 'queued' AND group_key <> '') e
               GROUP BY tenant, kind, group_key) x
        WHERE g.tenant = x.tenant AND g.kind = x.kind AND g.group_key = x.group_key
     )`;
}

/** A kind's rules make it a kind with groups even before its first job with a group. */
export const GROUP_CLOCK_ENSURE = namedQuery(
  'lh_group_clock_ensure',
  `INSERT INTO group_clocks (tenant, kind) VALUES ($1, $2) ON CONFLICT (tenant, kind) DO NOTHING`,
);

/**
 * The tenant's kinds with groups within reach ($2: the kinds, NULL for all), their virtual time and rules, locked
 * in kind order: two coordinators' fair leases of one kind take turns, and neither reads the group rows before
 * the other has committed what it wrote.
 */
export const GROUP_CLOCKS = namedQuery(
  'lh_group_clocks',
  `SELECT c.kind, c.virtual_time::float8 AS virtual_time, k.group_rules
     FROM group_clocks c LEFT JOIN kinds k ON k.tenant = c.tenant AND k.kind = c.kind
    WHERE c.tenant = $1 AND ($2::text[] IS NULL OR c.kind = ANY($2::text[])) ORDER BY c.kind FOR UPDATE OF c`,
);

/** GROUP_CLOCKS without the locks: what next-due.ts reads of the kinds with groups outside a lease. */
export const GROUP_KINDS = namedQuery(
  'lh_group_kinds',
  `SELECT c.kind, c.virtual_time::float8 AS virtual_time, k.group_rules
     FROM group_clocks c LEFT JOIN kinds k ON k.tenant = c.tenant AND k.kind = c.kind
    WHERE c.tenant = $1 AND ($2::text[] IS NULL OR c.kind = ANY($2::text[])) ORDER BY c.kind`,
);

export const GROUP_CLOCK_SET = namedQuery('lh_group_clock_set', `UPDATE group_clocks SET virtual_time = $3::bigint WHERE tenant = $1 AND kind = $2`);

export const GROUP_REBASE = namedQuery(
  'lh_group_rebase',
  `UPDATE group_states SET finish_tag = GREATEST(0, finish_tag - $3::bigint) WHERE tenant = $1 AND kind = $2`,
);

/** Parked groups whose wake time ($3, ms) has come go back into the candidate index, at most $4 per lease. */
export const GROUP_WAKE = namedQuery(
  'lh_group_wake',
  `UPDATE group_states SET wake_at = NULL WHERE tenant = $1 AND kind = $2 AND group_key IN (
     SELECT group_key FROM group_states WHERE tenant = $1 AND kind = $2 AND wake_at <= $3::bigint ORDER BY wake_at LIMIT $4)`,
);

/** The candidates in (finish tag, key) order, at most $4, each with its leasable count, at most $3: a walk of group_candidates. */
export const GROUP_CANDIDATES = namedQuery(
  'lh_group_candidates',
  `SELECT g.group_key, g.finish_tag::float8 AS finish_tag, g.running, g.window_start::float8 AS window_start, g.window_count, g.queued, c.leasable
     FROM group_states g CROSS JOIN LATERAL (SELECT count(*)::int AS leasable FROM (SELECT 1 FROM job_ready r
            WHERE r.tenant = g.tenant AND r.kind = g.kind AND r.group_key = g.group_key AND ${LEASABLE} LIMIT $3) x) c
    WHERE g.tenant = $1 AND g.kind = $2 AND g.queued > 0 AND NOT g.slot_held AND g.wake_at IS NULL
    ORDER BY g.finish_tag, g.group_key LIMIT $4`,
);

/** The ungrouped group of a kind with groups: its row, if any, and its leasable count, at most $3. */
export const GROUP_UNGROUPED = namedQuery(
  'lh_group_ungrouped',
  `SELECT ''::text AS group_key, s.finish_tag::float8 AS finish_tag, s.running, s.window_start::float8 AS window_start, s.window_count,
          (SELECT count(*)::int FROM (SELECT 1 FROM job_ready r WHERE r.tenant = $1 AND r.kind = $2 AND r.group_key = '' AND ${LEASABLE}
             LIMIT $3) x) AS leasable
     FROM (SELECT 1) o LEFT JOIN group_states s ON s.tenant = $1 AND s.kind = $2 AND s.group_key = ''`,
);

/** The earliest run_after (ms) among a group's ready jobs not past their deadline: a skip scan of its priorities, as SQLite's. */
export const GROUP_EARLIEST = namedQuery(
  'lh_group_earliest',
  `WITH RECURSIVE p(priority) AS (
     SELECT (SELECT max(priority) FROM job_ready WHERE tenant = $1 AND kind = $2 AND group_key = $3)
     UNION ALL
     SELECT (SELECT max(priority) FROM job_ready WHERE tenant = $1 AND kind = $2 AND group_key = $3 AND priority < p.priority)
       FROM p WHERE p.priority IS NOT NULL)
   SELECT floor(extract(epoch FROM min((SELECT r.run_after FROM job_ready r WHERE r.tenant = $1 AND r.kind = $2 AND r.group_key = $3
            AND r.priority = p.priority AND (r.deadline_at IS NULL OR r.deadline_at > now()) ORDER BY r.run_after LIMIT 1))) * 1000)::float8 AS run_after
     FROM p WHERE p.priority IS NOT NULL`,
);

/**
 * A candidate that cannot give a job now leaves the index, guarded by the running ($6) and queued ($7) counts it was
 * decided on: an end or an enqueue that committed since (they do not wait for the kind's clock lock) leaves it a
 * candidate, to be decided again at the next lease, rather than parked on a stale decision.
 */
export const GROUP_PARK = namedQuery(
  'lh_group_park',
  `UPDATE group_states SET slot_held = $4, wake_at = $5::bigint
    WHERE tenant = $1 AND kind = $2 AND group_key = $3 AND running = $6 AND queued = $7`,
);

/** A group's first $4 leasable ready rows in lease order, locked (SKIP LOCKED: a cancel or the reaper may hold one). */
export const GROUP_PICK = namedQuery(
  'lh_group_pick',
  `SELECT r.ctid::text AS ready_ctid, r.seq::float8 AS seq, r.kind, r.group_key, r.priority,
          floor(extract(epoch FROM r.run_after) * 1000)::float8 AS run_after
     FROM job_ready r WHERE r.tenant = $1 AND r.kind = $2 AND r.group_key = $3 AND ${LEASABLE}
    ORDER BY r.priority DESC, r.run_after, r.seq LIMIT $4 FOR UPDATE SKIP LOCKED`,
);

/**
 * Takes the picked ready rows ($5: their ctids; $6, $7: each job's seq and the group its lease counts against, NULL
 * for a kind without groups), as the plain lease statement does (lease-queries.ts): the ready rows deleted, a lease
 * row each with its epoch bumped, the counters moved from queued to running. $1 tenant, $2 tokens, $3 worker, $4 ms.
 */
export const GROUP_LEASE_INSERT = namedQuery(
  'lh_group_lease_insert',
  `WITH picked AS (
     DELETE FROM job_ready r WHERE r.ctid = ANY ($5::tid[]) AND r.tenant = $1 RETURNING r.seq
   ), taken AS MATERIALIZED (
     SELECT j.*, g.lease_group, row_number() OVER () AS n
       FROM picked JOIN jobs j ON j.seq = picked.seq JOIN unnest($6::bigint[], $7::text[]) AS g(seq, lease_group) ON g.seq = j.seq
   ), leased AS (
     INSERT INTO job_leases (job_seq, tenant, kind, epoch, attempt, token, worker_id, started_at, expires_at, deadline_at, group_key)
     SELECT j.seq, j.tenant, j.kind, j.epoch + 1, j.attempts + 1, t.token, $3, now(), LEAST(now() + ${interval('$4')}, j.deadline_at), j.deadline_at,
            j.lease_group
       FROM taken j JOIN unnest($2::text[]) WITH ORDINALITY AS t(token, n) USING (n)
     RETURNING *
   ), counted AS (
     ${countJobTerms(UNFINISHED_TERMS, [
       ['taken', '-', "'queued'"],
       [
         `(SELECT tenant, kind, 'running'::text AS status, coalesce(started_at, now()) AS started_at, created_at, finished_at,
          payload_bytes, checkpoint_state, progress FROM taken)`,
         '',
       ],
     ])}
   )
   SELECT ${JOB_COLUMNS} FROM leased l JOIN taken j ON j.seq = l.job_seq`,
);

/**
 * A group after a lease took $5 of its jobs ($10 of them counted in queued): the plan's finish tag and rate window,
 * which only leases write (under the clock lock), the running count moved by what it leased (ends move it beside
 * the lease, so it is never written whole), and the hold the plan's state implies (holdAfterLease).
 */
export const GROUP_LEASED = namedQuery(
  'lh_group_leased',
  `INSERT INTO group_states AS g (tenant, kind, group_key, finish_tag, running, window_start, window_count, slot_held, wake_at)
   VALUES ($1, $2, $3, $4::bigint, $5, $6::bigint, $7, $8, $9::bigint)
   ON CONFLICT (tenant, kind, group_key) DO UPDATE SET finish_tag = EXCLUDED.finish_tag, running = g.running + EXCLUDED.running,
     window_start = EXCLUDED.window_start, window_count = EXCLUDED.window_count, queued = GREATEST(0, g.queued - $10),
     slot_held = EXCLUDED.slot_held, wake_at = EXCLUDED.wake_at`,
);

/** The kind's rules changed: every hold of the kind is lifted, to be decided again at the next lease. */
export const GROUP_HOLDS_LIFT = namedQuery(
  'lh_group_holds_lift',
  `UPDATE group_states SET slot_held = false, wake_at = NULL WHERE tenant = $1 AND kind = $2 AND (slot_held OR wake_at IS NOT NULL)`,
);

/** What a parked long poll waits for in a kind with groups (next-due.ts), as SQLite's groupNextDue. */
export const GROUP_NEXT_DUE = namedQuery(
  'lh_group_next_due',
  `SELECT EXISTS (SELECT 1 FROM group_states WHERE tenant = $1 AND kind = $2 AND queued > 0 AND NOT slot_held AND wake_at IS NULL) AS candidate,
          (SELECT min(wake_at) FROM group_states WHERE tenant = $1 AND kind = $2 AND wake_at IS NOT NULL AND queued > 0)::float8 AS wake_at,
          EXISTS (SELECT 1 FROM group_states WHERE tenant = $1 AND kind = $2 AND slot_held AND queued > 0) AS slot_held`,
);

/**
 * The reaper's walk of idle group rows (nothing queued or running), after a cursor ($1, $2, $3; all of tenants),
 * at most $4, with their kinds' virtual time and rules, and the clock: what isGroupStateForgettable decides by.
 */
export const GROUP_IDLE = namedQuery(
  'lh_group_idle',
  `SELECT g.tenant, g.kind, g.group_key, g.finish_tag::float8 AS finish_tag, g.running, g.window_start::float8 AS window_start, g.window_count,
          c.virtual_time::float8 AS virtual_time, k.group_rules, ${NOW_MS}
     FROM group_states g JOIN group_clocks c ON c.tenant = g.tenant AND c.kind = g.kind
     LEFT JOIN kinds k ON k.tenant = g.tenant AND k.kind = g.kind
    WHERE g.queued = 0 AND g.running = 0 AND (g.tenant, g.kind, g.group_key) > ($1::text, $2::text, $3::text COLLATE "C")
    ORDER BY g.tenant, g.kind, g.group_key LIMIT $4`,
);

/** An idle row forgotten, guarded by the values it was decided on (a row an enqueue or a lease moved since stays). */
export const GROUP_FORGET = namedQuery(
  'lh_group_forget',
  `DELETE FROM group_states WHERE tenant = $1 AND kind = $2 AND group_key = $3 AND queued = 0 AND running = 0
     AND finish_tag = $4::bigint AND window_count = $5 AND window_start IS NOT DISTINCT FROM $6::bigint`,
);

/** GET /metrics: the tenant's groups with the most jobs waiting or running, at most $2 (group-lease.ts GroupStats). */
export const GROUP_TOP = namedQuery(
  'lh_group_top',
  `SELECT kind, group_key, queued, running FROM group_states
    WHERE tenant = $1 AND group_key <> '' AND (queued > 0 OR running > 0) ORDER BY queued + running DESC, kind, group_key LIMIT $2`,
);

/** … and the tenant's totals, of which the rest is what the top does not show. */
export const GROUP_TOTALS = namedQuery(
  'lh_group_totals',
  `SELECT count(*)::int AS groups, coalesce(sum(queued), 0)::float8 AS queued, coalesce(sum(running), 0)::float8 AS running FROM group_states
    WHERE tenant = $1 AND group_key <> '' AND (queued > 0 OR running > 0)`,
);
