/**
 * The statements of the fair lease among groups for SQLite (group-lease.ts,
 * docs/FAIRNESS.md §4), by name; queries.ts adds them to SQL, so the store
 * prepares them like the others. Only kinds with groups run them: a kind
 * without has no group_clocks row, and the plain lease statements' guard
 * keeps it off this path. Each statement that writes a group row applies one
 * event of core/group-transitions.ts.
 */

/*
 * Every LIMIT here is a scalar subquery of its parameter, `LIMIT (SELECT @n)`: SQLite's planner reads the value of
 * a bound LIMIT (STAT4), which expires the prepared statement at every run with another value, so that it is
 * prepared again (lease-statements.ts says what that cost the plain lease); a subquery's value it does not read.
 * Measured on a walk like groupPick's (2,000 rows in 50 groups, 20,000 runs): 16.7 µs a run with the bound
 * LIMIT, 6.6 µs with the subquery, 8.7 µs with the LIMIT written in the text.
 */

/** A ready row the lease may take now: due, and not past its deadline (queries.ts LEASABLE, over alias r). */
const LEASABLE = `r.run_after <= @now AND (r.deadline_at IS NULL OR r.deadline_at > @now)`;

/** How many of a group's ready rows are leasable now, at most @max: a walk of its range of job_ready, never more than @max entries found. */
const leasableOf = (group: string): string => `(SELECT count(*) FROM (SELECT 1 FROM job_ready r
      WHERE r.tenant = @tenant AND r.kind = @kind AND r.group_key = ${group} AND ${LEASABLE} LIMIT (SELECT @max)))`;

export const GROUP_SQL = {
  /** A kind has groups from its first job with a group (or its first rules) on: its clock row sends its leases down the fair path. */
  groupClockEnsure: `INSERT INTO group_clocks (tenant, kind) VALUES (@tenant, @kind) ON CONFLICT (tenant, kind) DO NOTHING`,
  /** The tenant's kinds with groups, their virtual time and rules (read inside the lease's write transaction). */
  groupClocks: `SELECT c.kind, c.virtual_time, k.group_rules FROM group_clocks c LEFT JOIN kinds k ON k.tenant = c.tenant AND k.kind = c.kind
    WHERE c.tenant = @tenant`,
  groupClockSet: `UPDATE group_clocks SET virtual_time = @virtualTime WHERE tenant = @tenant AND kind = @kind`,
  /** A rebase of the kind's virtual time (core/fair-share.ts virtualTimeRebase): every finish tag of the kind moves down by @by. */
  groupRebase: `UPDATE group_states SET finish_tag = MAX(0, finish_tag - @by) WHERE tenant = @tenant AND kind = @kind`,
  /** Ready jobs of a group appeared (@n of them; 0 for a job that moved within it): counted, and the group looks again at the next lease. */
  groupReadyAdded: `INSERT INTO group_states (tenant, kind, group_key, queued) VALUES (@tenant, @kind, @groupKey, @n)
    ON CONFLICT (tenant, kind, group_key) DO UPDATE SET queued = queued + excluded.queued, wake_at = NULL`,
  /** Ready jobs of a group left other than by a lease (cancel, deadline). */
  groupReadyRemoved: `UPDATE group_states SET queued = MAX(0, queued - @n) WHERE tenant = @tenant AND kind = @kind AND group_key = @groupKey`,
  /** Parked groups whose wake time has come go back into the candidate index, a bounded number per lease. */
  groupWake: `UPDATE group_states SET wake_at = NULL WHERE tenant = @tenant AND kind = @kind AND group_key IN (
      SELECT group_key FROM group_states INDEXED BY group_wakes WHERE tenant = @tenant AND kind = @kind AND wake_at <= @now LIMIT (SELECT @limit))`,
  /**
   * The candidates in (finish tag, key) order, at most @budget, each with its leasable count (at most @max): a
   * walk of group_candidates, which holds only groups with queued jobs and no hold.
   */
  groupCandidates: `SELECT g.group_key, g.finish_tag, g.running, g.window_start, g.window_count, g.queued, ${leasableOf('g.group_key')} AS leasable
    FROM group_states g INDEXED BY group_candidates
    WHERE g.tenant = @tenant AND g.kind = @kind AND g.queued > 0 AND g.slot_held = 0 AND g.wake_at IS NULL
    ORDER BY g.finish_tag, g.group_key LIMIT (SELECT @budget)`,
  /** The ungrouped group of a kind with groups: its state row, if any, and its leasable count (it keeps no queued count). */
  groupUngrouped: `SELECT '' AS group_key, s.finish_tag, s.running, s.window_start, s.window_count, ${leasableOf("''")} AS leasable
    FROM (SELECT 1) LEFT JOIN group_states s ON s.tenant = @tenant AND s.kind = @kind AND s.group_key = ''`,
  /**
   * The earliest run_after among a group's ready jobs not past their deadline: when a group with none leasable comes
   * back. A skip scan of the group's range, its first row of each priority (the range is in run_after order within one).
   */
  groupEarliest: `WITH RECURSIVE p(priority) AS (
      SELECT (SELECT MAX(priority) FROM job_ready WHERE tenant = @tenant AND kind = @kind AND group_key = @groupKey)
      UNION ALL
      SELECT (SELECT MAX(priority) FROM job_ready WHERE tenant = @tenant AND kind = @kind AND group_key = @groupKey AND priority < p.priority)
        FROM p WHERE p.priority IS NOT NULL)
    SELECT MIN((SELECT r.run_after FROM job_ready r WHERE r.tenant = @tenant AND r.kind = @kind AND r.group_key = @groupKey
      AND r.priority = p.priority AND (r.deadline_at IS NULL OR r.deadline_at > @now) ORDER BY r.run_after LIMIT 1)) AS run_after
    FROM p WHERE p.priority IS NOT NULL`,
  /**
   * A candidate that cannot give a job now leaves the index (core/group-transitions.ts candidateVerdict), guarded by
   * the running and queued counts it was decided on: an end or an enqueue that moved them since (PostgreSQL's run
   * beside the lease) leaves it a candidate, to be decided again at the next lease.
   */
  groupPark: `UPDATE group_states SET slot_held = @slotHeld, wake_at = @wakeAt
    WHERE tenant = @tenant AND kind = @kind AND group_key = @groupKey AND running = @running AND queued = @queued`,
  /**
   * The first @n leasable ready rows of a group, in lease order (priority first): the jobs its share of the plan
   * takes; with group_key '' and a kind without groups, the restricted path's walk of that kind up to its cap.
   */
  groupPick: `SELECT r.seq, r.kind, r.group_key, r.priority, r.run_after FROM job_ready r
    WHERE r.tenant = @tenant AND r.kind = @kind AND r.group_key = @groupKey AND ${LEASABLE}
    ORDER BY r.priority DESC, r.run_after, r.seq LIMIT (SELECT @n)`,
  /**
   * Takes the ready rows named by @rows (a JSON array of [kind, group_key, priority, run_after, seq, lease group]): a
   * lease row each, as the plain lease statement writes it (queries.ts leaseInsert), with the group it counts
   * against (NULL for a kind without groups). The store deletes the ready rows next (readyDeleteMany).
   */
  groupLeaseInsert: `INSERT INTO job_leases (seq, tenant, kind, priority, run_after, deadline_at, epoch, attempt, token, worker_id, started_at,
      expires_at, group_key)
    SELECT r.seq, @tenant, r.kind, r.priority, r.run_after, r.deadline_at, r.epoch + 1, r.attempts + 1, lh_token(), @workerId, @now,
      CASE WHEN r.deadline_at IS NOT NULL AND r.deadline_at < @now + @leaseMs THEN r.deadline_at ELSE @now + @leaseMs END, x.value ->> 5
    FROM json_each(@rows) x CROSS JOIN job_ready r ON r.tenant = @tenant AND r.kind = x.value ->> 0 AND r.group_key = x.value ->> 1
      AND r.priority = x.value ->> 2 AND r.run_after = x.value ->> 3 AND r.seq = x.value ->> 4
    RETURNING seq, kind, priority, run_after, deadline_at, epoch, attempt, token, expires_at, group_key`,
  /**
   * A group after a lease took @leased of its jobs (@taken of them counted in queued): the plan's finish tag and rate
   * window, which only leases write, the running count moved by what it leased (ends move it beside a PostgreSQL
   * lease), and the hold the plan's state implies (holdAfterLease).
   */
  groupLeased: `INSERT INTO group_states (tenant, kind, group_key, finish_tag, running, window_start, window_count, slot_held, wake_at)
    VALUES (@tenant, @kind, @groupKey, @finishTag, @leased, @windowStart, @windowCount, @slotHeld, @wakeAt)
    ON CONFLICT (tenant, kind, group_key) DO UPDATE SET finish_tag = excluded.finish_tag, running = running + excluded.running,
      window_start = excluded.window_start, window_count = excluded.window_count, queued = MAX(0, queued - @taken),
      slot_held = excluded.slot_held, wake_at = excluded.wake_at`,
  /** A lease of the group ended (complete, fail, expiry): its slot is free (core/fair-share.ts groupAfterFinish). */
  groupFinished: `UPDATE group_states SET running = MAX(0, running - 1), slot_held = 0 WHERE tenant = @tenant AND kind = @kind AND group_key = @groupKey`,
  /** The kind's rules changed: every hold of the kind is lifted, to be decided again at the next lease under the new rules. */
  groupHoldsLift: `UPDATE group_states SET slot_held = 0, wake_at = NULL WHERE tenant = @tenant AND kind = @kind AND (slot_held = 1 OR wake_at IS NOT NULL)`,
  /**
   * What a parked long poll waits for in a kind with groups (next-due.ts): a candidate (due now), the earliest wake
   * time of a parked group with queued jobs, and whether one waits for a slot.
   */
  groupNextDue: `SELECT EXISTS (SELECT 1 FROM group_states INDEXED BY group_candidates
        WHERE tenant = @tenant AND kind = @kind AND queued > 0 AND slot_held = 0 AND wake_at IS NULL) AS candidate,
      (SELECT MIN(wake_at) FROM group_states WHERE tenant = @tenant AND kind = @kind AND wake_at IS NOT NULL AND queued > 0) AS wake_at,
      EXISTS (SELECT 1 FROM group_states INDEXED BY group_slots WHERE tenant = @tenant AND kind = @kind AND slot_held = 1 AND queued > 0) AS slot_held`,
  /**
   * The reaper's walk of idle group rows (nothing queued or running), from a cursor, with their kinds' virtual
   * time and rules: what isGroupStateForgettable decides by.
   */
  groupIdle: `SELECT g.tenant, g.kind, g.group_key, g.finish_tag, g.running, g.window_start, g.window_count, c.virtual_time, k.group_rules
    FROM group_states g INDEXED BY group_idle JOIN group_clocks c ON c.tenant = g.tenant AND c.kind = g.kind
      LEFT JOIN kinds k ON k.tenant = g.tenant AND k.kind = g.kind
    WHERE g.queued = 0 AND g.running = 0 AND (g.tenant, g.kind, g.group_key) > (@tenant, @kind, @groupKey)
    ORDER BY g.tenant, g.kind, g.group_key LIMIT (SELECT @limit)`,
  /** An idle row forgotten, guarded by the values it was decided on. */
  groupForget: `DELETE FROM group_states WHERE tenant = @tenant AND kind = @kind AND group_key = @groupKey AND queued = 0 AND running = 0
    AND finish_tag = @finishTag AND window_count = @windowCount AND window_start IS @windowStart`,
  /** GET /metrics: the tenant's groups with the most jobs waiting or running (group-lease.ts GroupStats). */
  groupTop: `SELECT kind, group_key, queued, running FROM group_states
    WHERE tenant = @tenant AND group_key <> '' AND (queued > 0 OR running > 0) ORDER BY queued + running DESC, kind, group_key LIMIT (SELECT @limit)`,
  /** … and the tenant's totals, of which the rest is what the top does not show. */
  groupTotals: `SELECT count(*) AS groups, coalesce(sum(queued), 0) AS queued, coalesce(sum(running), 0) AS running FROM group_states
    WHERE tenant = @tenant AND group_key <> '' AND (queued > 0 OR running > 0)`,
} as const;
