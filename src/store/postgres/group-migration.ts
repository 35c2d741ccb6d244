/**
 * Migration 16 for PostgreSQL (fair_share_groups, docs/FAIRNESS.md §4),
 * mirroring src/store/sqlite/group-migration.ts:
 *
 * - jobs.group_key and job_ready.group_key: the job's group, '' without one.
 *   Adding a column with a constant default rewrites no row.
 * - job_ready_order gains group_key after the kind, (tenant, kind, group_key,
 *   priority DESC, run_after, seq): a group's jobs are one range of the index,
 *   and a kind without groups keeps one range in its old order (the plain
 *   lease walks it with group_key = ''). Building it reads the queued jobs once.
 * - job_leases.group_key: the group a lease counts against, NULL for a lease
 *   of the plain path, so the end frees the group's slot from the lease row.
 * - kinds.group_rules: the kind's `groups` as JSON, NULL for none.
 * - group_clocks: one row per kind with groups, its virtual time (bigint); the
 *   plain lease statements' guard probes it, and the fair lease locks it, so
 *   two coordinators' leases of one kind with groups take turns.
 * - group_states: per group its finish tag, running leases, rate window,
 *   queued count and holds; times in epoch milliseconds (bigint), as the plan
 *   computes them. group_idle holds the rows with nothing queued or running,
 *   which the reaper forgets once they say nothing a new row would not, and
 *   group_slots the groups held at their maxConcurrent (next-due.ts).
 *
 * Every group_key column is COLLATE "C": the candidate index orders keys by
 * code point, as core/fair-share.ts compareGroupKeys does, and a join of two
 * of them (a group row and its range of job_ready) compares in one collation,
 * which is the one job_ready_order is built in, so it is an index seek.
 */

export const FAIR_SHARE_GROUPS_SQL = `
ALTER TABLE jobs ADD COLUMN group_key text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE job_ready ADD COLUMN group_key text COLLATE "C" NOT NULL DEFAULT '';
DROP INDEX job_ready_order;
CREATE INDEX job_ready_order ON job_ready (tenant, kind, group_key, priority DESC, run_after, seq) INCLUDE (deadline_at);
ALTER TABLE job_leases ADD COLUMN group_key text COLLATE "C";
ALTER TABLE kinds ADD COLUMN group_rules json;
CREATE TABLE group_clocks (
  tenant       text   NOT NULL,
  kind         text   NOT NULL,
  virtual_time bigint NOT NULL DEFAULT 0 CHECK (virtual_time >= 0),
  PRIMARY KEY (tenant, kind)
);
CREATE TABLE group_states (
  tenant       text    NOT NULL,
  kind         text    NOT NULL,
  group_key    text    COLLATE "C" NOT NULL CHECK (char_length(group_key) <= 255),
  finish_tag   bigint  NOT NULL DEFAULT 0 CHECK (finish_tag >= 0),
  running      integer NOT NULL DEFAULT 0 CHECK (running >= 0),
  window_start bigint,
  window_count integer NOT NULL DEFAULT 0 CHECK (window_count >= 0),
  queued       integer NOT NULL DEFAULT 0 CHECK (queued >= 0),
  slot_held    boolean NOT NULL DEFAULT false,
  wake_at      bigint,
  PRIMARY KEY (tenant, kind, group_key)
);
CREATE INDEX group_candidates ON group_states (tenant, kind, finish_tag, group_key) WHERE queued > 0 AND NOT slot_held AND wake_at IS NULL;
CREATE INDEX group_wakes ON group_states (tenant, kind, wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX group_idle ON group_states (tenant, kind, group_key) WHERE queued = 0 AND running = 0;
CREATE INDEX group_slots ON group_states (tenant, kind) WHERE slot_held;
`;
