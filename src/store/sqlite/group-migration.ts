/**
 * Migration 16 for SQLite (fair_share_groups, docs/FAIRNESS.md §4): what the
 * lease needs to share a kind among the groups of its jobs.
 *
 * - jobs.group_key: the job's group, '' without one (core/fair-share.ts UNGROUPED).
 * - job_ready gains group_key after the kind in its primary key, so its lease
 *   order is (tenant, kind, group_key, priority DESC, run_after, seq): a group's
 *   jobs are one range, and a kind whose jobs have no group keeps one range in
 *   its old order (the plain lease walks it with group_key = ''). SQLite cannot
 *   change a primary key, so the table is rebuilt and its indexes made again.
 * - job_leases.group_key: the group a lease counts against, NULL for a lease of
 *   the plain path (a kind without groups), so the end frees the group's slot
 *   without reading the job row, and plain leases cost nothing more.
 * - kinds.group_rules: the kind's `groups` (canonical JSON), NULL for none.
 * - group_clocks: one row per kind that has groups (a job with a group, or
 *   rules), holding the kind's virtual time; its presence sends the kind's
 *   leases down the fair path (the plain statements' guard probes it).
 * - group_states: per (tenant, kind, group) the finish tag, running leases, rate
 *   window, queued count and holds (core/group-transitions.ts); group_candidates
 *   holds the rows a lease may take from, in (finish tag, key) order,
 *   group_wakes the parked rows by when they come back, and group_idle the
 *   rows with nothing queued or running, which the reaper forgets once they
 *   say nothing a new row would not (group-lease.ts forgetIdleGroups);
 *   group_slots the groups held at their maxConcurrent (next-due.ts).
 */

export const FAIR_SHARE_GROUPS_SQL = `
ALTER TABLE jobs ADD COLUMN group_key TEXT NOT NULL DEFAULT '';
CREATE TABLE job_ready_v16 (
  tenant      TEXT    NOT NULL,
  kind        TEXT    NOT NULL,
  group_key   TEXT    NOT NULL DEFAULT '',
  priority    INTEGER NOT NULL,
  run_after   INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  deadline_at INTEGER,
  attempts    INTEGER NOT NULL CHECK (attempts >= 0),
  epoch       INTEGER NOT NULL CHECK (epoch >= 0),
  PRIMARY KEY (tenant, kind, group_key, priority DESC, run_after, seq)
) WITHOUT ROWID;
INSERT INTO job_ready_v16 (tenant, kind, group_key, priority, run_after, seq, deadline_at, attempts, epoch)
  SELECT tenant, kind, '', priority, run_after, seq, deadline_at, attempts, epoch FROM job_ready;
DROP TABLE job_ready;
ALTER TABLE job_ready_v16 RENAME TO job_ready;
CREATE INDEX job_ready_deadline ON job_ready (deadline_at) WHERE deadline_at IS NOT NULL;
CREATE INDEX job_ready_listing ON job_ready (tenant, seq);
ALTER TABLE job_leases ADD COLUMN group_key TEXT;
ALTER TABLE kinds ADD COLUMN group_rules TEXT;
CREATE TABLE group_clocks (
  tenant       TEXT    NOT NULL,
  kind         TEXT    NOT NULL,
  virtual_time INTEGER NOT NULL DEFAULT 0 CHECK (virtual_time >= 0),
  PRIMARY KEY (tenant, kind)
) WITHOUT ROWID;
CREATE TABLE group_states (
  tenant       TEXT    NOT NULL,
  kind         TEXT    NOT NULL,
  group_key    TEXT    NOT NULL CHECK (length(group_key) <= 255),
  finish_tag   INTEGER NOT NULL DEFAULT 0 CHECK (finish_tag >= 0),
  running      INTEGER NOT NULL DEFAULT 0 CHECK (running >= 0),
  window_start INTEGER,
  window_count INTEGER NOT NULL DEFAULT 0 CHECK (window_count >= 0),
  queued       INTEGER NOT NULL DEFAULT 0 CHECK (queued >= 0),
  slot_held    INTEGER NOT NULL DEFAULT 0 CHECK (slot_held IN (0, 1)),
  wake_at      INTEGER,
  PRIMARY KEY (tenant, kind, group_key)
) WITHOUT ROWID;
CREATE INDEX group_candidates ON group_states (tenant, kind, finish_tag, group_key) WHERE queued > 0 AND slot_held = 0 AND wake_at IS NULL;
CREATE INDEX group_wakes ON group_states (tenant, kind, wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX group_idle ON group_states (tenant, kind, group_key) WHERE queued = 0 AND running = 0;
CREATE INDEX group_slots ON group_states (tenant, kind) WHERE slot_held = 1;
`;
