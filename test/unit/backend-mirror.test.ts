/**
 * The two backend folders mirror each other: the same file names for the same
 * roles, the same query names (SQLite's camelCase keys of SQL and STATS_SQL
 * against PostgreSQL's exported named queries), and migrations whose value
 * lists come from core. Every difference allowed here says why it exists;
 * anything else that differs fails the test.
 */

import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JOB_FAILURE_CODES } from '../../src/core/errors.js';
import { FAILURE_CLASS_NAMES } from '../../src/core/failure-classes.js';
import { JOB_STATUSES, ROLES } from '../../src/core/states.js';
import { ATTEMPT_OUTCOMES } from '../../src/core/transitions.js';
import * as PgCatalog from '../../src/store/postgres/catalog-queries.js';
import { MIGRATIONS as PG_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import * as PgQueries from '../../src/store/postgres/queries.js';
import { OUTCOME_LIST, ROLE_LIST, STATUS_LIST } from '../../src/store/schema-lists.js';
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SQL, STATS_SQL } from '../../src/store/sqlite/queries.js';

const STORE = join(import.meta.dirname, '../../src/store');

/** Files only one backend has, and why. The store classes are named for their backend. */
const FILES_ONLY_IN = {
  sqlite: {
    'sqlite-store.ts': 'the store class (postgres-store.ts)',
    'group-commit.ts': 'one transaction and one fsync for every write that arrived together; PostgreSQL commits per statement',
    'lease-statements.ts':
      'the lease statements prepared per LIMIT, since a bound LIMIT makes SQLite prepare a statement again at every run; PostgreSQL binds $2',
    'stats-reader.ts': 'the statistics scan every job of a tenant, so they run on a worker thread with its own connection; PostgreSQL runs STATS on the pool',
    'counter-moves.ts':
      'every transition\u2019s counter moves summed in code and written once before COMMIT (the group commit\u2019s transaction spans many operations); PostgreSQL\u2019s statements write their own',
  },
  postgres: {
    'postgres-store.ts': 'the store class (sqlite-store.ts)',
    'availability-listener.ts': 'what a LISTEN of other coordinators\u2019 commits wakes; SQLite polls data_version (availability.ts)',
    'channel-listener.ts': 'the LISTEN connection and its reconnects',
    'listener-peers.ts': 'whether another store listens, so a store alone skips its NOTIFYs; SQLite sends none',
    'coalesced-notifier.ts': 'NOTIFY after a commit, folded per (tenant, kind)',
    'finished-channel.ts': 'NOTIFY of finished jobs and what hearing one wakes',
    'catalog-queries.ts': 'key, kind, listing and stats statements, kept apart from queries.ts for its length',
    'lease-queries.ts':
      'the lease\u2019s statements, kept apart from queries.ts for its length (which exports them); SQLite\u2019s are in its queries.ts and lease-statements.ts',
    'sql-fragments.ts': 'column lists and the timestamptz \u2194 milliseconds conversions every query is built from',
    'statement-batcher.ts': 'concurrent single enqueues folded into one INSERT; SQLite\u2019s group commit does that for every write',
    'statistics.ts':
      'when retention\u2019s upkeep analyzes a queue table (autovacuum off); SQLite\u2019s planner gathers no statistics and ranks the indexes by their columns',
    'warm-up.ts':
      'connections opened and planned before the first request, since each PostgreSQL connection plans a statement at its first run; SQLite prepares its statements when the store opens',
  },
} as const;

/** Query names only one backend has, and why (as SCREAMING_SNAKE_CASE). */
const QUERIES_ONLY_IN = {
  sqlite: {
    MIGRATIONS_TABLE: 'PostgreSQL\u2019s migrate.ts runs its bookkeeping as text inside the advisory-locked transaction',
    MIGRATIONS_TABLE_EXISTS: 'as MIGRATIONS_TABLE; SQLite reads it first so that opening an up-to-date file takes no write lock',
    MIGRATIONS_APPLIED: 'as MIGRATIONS_TABLE',
    MIGRATION_RECORD: 'as MIGRATIONS_TABLE',
    JOB_BY_IDEMPOTENCY_KEY:
      'SQLite enqueues one row at a time in the write transaction; PostgreSQL inserts a batch (JOB_INSERT_MANY) and looks up the keys that conflicted (JOB_BY_KEYS)',
    JOB_INSERT: 'as JOB_BY_IDEMPOTENCY_KEY',
    COUNTER_ADD_TERMS: 'a write transaction\u2019s counter moves, written once before COMMIT (counter-moves.ts); PostgreSQL\u2019s statements move their own',
    COUNTER_ADD_TENANT: 'as COUNTER_ADD_TERMS, for the tenant\u2019s stored bytes, ended attempts and lease expirations',
    JOB_MUTABLE_BYTES: 'the change of a job\u2019s checkpoint and progress bytes, for COUNTER_ADD_TENANT',
    JOB_GET_BY_SEQ: 'SQLite re-reads a job by its integer key after a write; PostgreSQL uses JOB_GET',
    JOB_GET_BY_ID_UNSCOPED: 'the replayed job of an idempotency key, read inside the write transaction; PostgreSQL reads it with JOB_BY_KEYS',
    JOB_LIST_BY_STATUS: 'SQLite plans one statement per filter so each walks its index; PostgreSQL plans JOB_LIST for each call\u2019s values',
    JOB_LIST_BY_OWNER: 'as JOB_LIST_BY_STATUS',
    JOB_LIST_BY_TENANT: 'as JOB_LIST_BY_STATUS',
    JOB_LIST_RUNNING: 'as JOB_LIST_BY_STATUS: running jobs from job_leases',
    ATTEMPT_INSERT: 'the attempt row written at the end, by its own statement; PostgreSQL writes it in the statement that ends the lease',
    RESULT_INSERT: 'in PostgreSQL by the statement that completes the job',
    LEASE_END: 'SQLite has no statement that deletes from one table and writes another: the lease row goes first (the guard), then the job row (JOB_END)',
    JOB_END: 'as LEASE_END',
    LEASE_END_MANY: 'LEASE_END for a batch of completions (json_each), one statement',
    JOB_END_MANY: 'JOB_END for the same batch, one statement',
    ATTEMPT_INSERT_MANY: 'ATTEMPT_INSERT for the same batch, one statement',
    LEASE_RENEW: 'renew, the effect mark and a cancel request write the lease row by its own statement; PostgreSQL\u2019s statements join it',
    LEASE_EFFECT_STARTED: 'as LEASE_RENEW',
    LEASE_CANCEL_REQUEST: 'as LEASE_RENEW',
    JOB_PROGRESS: 'a renew\u2019s progress is written to the job row by a statement of its own beside LEASE_RENEW',
    READY_INSERT: 'each write that makes a job queued adds its ready row by its own statement; PostgreSQL\u2019s statements do it in a CTE',
    READY_DELETE: 'as READY_INSERT, for a queued job that leaves (cancel, a dedupe merge moving its run-after)',
    READY_DELETE_MANY: 'the lease\u2019s second statement: the taken ready rows go (SQLite has no statement that moves rows between tables)',
    READY_PAST_DEADLINE: 'the reaper takes queued jobs past their deadline from job_ready, then ends them (JOB_QUEUED_DEADLINE)',
    JOB_LEASED_MANY: 'the lease\u2019s third statement: the taken jobs\u2019 ids and payloads',
    STATS_COUNTS: 'SQLite\u2019s stats reader runs five statements on its own connection; PostgreSQL one (STATS)',
    STATS_TIMES: 'as STATS_COUNTS',
    STATS_ATTEMPT_TIMES: 'as STATS_COUNTS',
    STATS_OLDEST_AVAILABLE: 'as STATS_COUNTS',
    COUNTER_GET: 'as STATS_COUNTS',
    GROUP_READY_ADDED:
      'a ready row of a group counted by its own statement (group-lease.ts insertReady); PostgreSQL\u2019s statements that add ready rows count them in a CTE (group-queries.ts readyCounted)',
    GROUP_READY_REMOVED: 'as GROUP_READY_ADDED, for ready rows that leave (readyUncounted)',
    GROUP_FINISHED: 'as GROUP_READY_ADDED, for a lease of a group that ends (leasesFreed, leasesEnded)',
    JOB_PARENTS_FIND:
      'SQLite reads the parents, then marks them (JOB_PARENTS_MARK) once they are all found; PostgreSQL locks and marks them in one statement and the transaction rolls back when one is missing',
  },
  postgres: {
    NOW: 'PostgreSQL\u2019s now() is the clock; SQLite\u2019s clock is injected',
    DUE_PROBE:
      'PostgreSQL\u2019s lease statements answer whether expiries are due (and its restricted path probes), then it opens a reap transaction; SQLite reaps inside the lease\u2019s write transaction',
    JOB_INSERT_MANY: 'see JOB_INSERT',
    JOB_INSERT_MANY_UNGROUPED:
      'JOB_INSERT_MANY for a batch without groups, whose plan leaves the group rows out; SQLite counts a group only when the row has one',
    JOB_BY_KEYS: 'see JOB_INSERT',
    JOB_LIST: 'see JOB_LIST_BY_STATUS',
    JOB_COMPLETE_ONE: 'the hot completion as one statement without a lock first; SQLite locks the database for its write transaction anyway',
    JOB_COMPLETE_MANY: 'as JOB_COMPLETE_ONE, for a batch',
    JOB_END_LEASES: 'see JOB_END_LEASE',
    JOB_LEASE_ANY_KIND:
      'PostgreSQL walks the tenant\u2019s lease order across kinds; SQLite\u2019s job_ready is clustered by kind, so a lease without a filter names the queued kinds (jobLeaseKindsSql)',
    JOB_RENEW: 'SQLite renews by LEASE_RENEW on the lease row (and JOB_PROGRESS)',
    JOB_EFFECT_STARTED: 'SQLite: LEASE_EFFECT_STARTED',
    JOB_CANCEL_REQUEST: 'SQLite: LEASE_CANCEL_REQUEST',
    COUNTER_ADD_EXPIRATIONS: 'SQLite counts expirations with its other counter moves (COUNTER_ADD_TENANT)',
    JOB_PEEK: 'explains a guarded statement that matched nothing, without a lock; SQLite decides before it writes',
    JOB_PEEK_MANY: 'as JOB_PEEK, for a batch',
    STATS: 'see STATS_COUNTS',
    NOTIFY: 'wakes other coordinators\u2019 long polls; SQLite processes notice commits through data_version',
    NOTIFY_FINISHED: 'as NOTIFY, for finished jobs',
    JOB_LEASE_KINDS:
      'SQLite builds the kinds-filter lease per number of kinds (jobLeaseKindsSql: a UNION ALL of per-kind walks); PostgreSQL walks the kinds of an array with LATERAL in one statement',
    JOB_LEASE_CAPPED: 'as JOB_LEASE_KINDS, with a cap per kind (SQLite: jobLeaseKindsSql(n, true))',
    KIND_FLOW_LOCK:
      'row locks that make two coordinators\u2019 leases of a restricted kind take turns; SQLite\u2019s write transaction holds the database lock',
    GROUP_KINDS: 'the kinds with groups read without locking their clocks, for next-due.ts; SQLite reads GROUP_CLOCKS, its write lock being the lease\u2019s',
    JOB_KEY_LOCK:
      'the advisory lock that makes everything reading a concurrency key\u2019s turn take turns; SQLite\u2019s write transaction holds the database lock',
  },
} as const;

function snakeCase(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();
}

function isNamedQuery(value: unknown): boolean {
  return typeof value === 'object' && value !== null && 'name' in value && 'text' in value;
}

const sqliteQueries = [...Object.keys(SQL), ...Object.keys(STATS_SQL)].map(snakeCase);
const postgresQueries = Object.entries({ ...PgQueries, ...PgCatalog })
  .filter(([, value]) => isNamedQuery(value))
  .map(([name]) => name);

function onlyIn(mine: readonly string[], theirs: readonly string[]): string[] {
  return mine.filter((name) => !theirs.includes(name)).sort();
}

describe('the backend folders mirror each other', () => {
  it('have the same file names, but for the differences listed', () => {
    const sqlite = readdirSync(join(STORE, 'sqlite'));
    const postgres = readdirSync(join(STORE, 'postgres'));
    expect(onlyIn(sqlite, postgres)).toEqual(Object.keys(FILES_ONLY_IN.sqlite).sort());
    expect(onlyIn(postgres, sqlite)).toEqual(Object.keys(FILES_ONLY_IN.postgres).sort());
    for (const role of ['errors.ts', 'migrate.ts', 'migrations.ts', 'rows.ts', 'queries.ts', 'availability.ts', 'lease-endings.ts']) {
      expect(sqlite, role).toContain(role);
    }
  });

  it('have the same query names, but for the differences listed', () => {
    expect(new Set(sqliteQueries).size).toBe(sqliteQueries.length);
    expect(onlyIn(sqliteQueries, postgresQueries)).toEqual(Object.keys(QUERIES_ONLY_IN.sqlite).sort());
    expect(onlyIn(postgresQueries, sqliteQueries)).toEqual(Object.keys(QUERIES_ONLY_IN.postgres).sort());
  });

  it('name every PostgreSQL statement after its export', () => {
    for (const [name, query] of Object.entries({ ...PgQueries, ...PgCatalog })) {
      if (isNamedQuery(query)) expect((query as { name: string }).name, name).toBe(`lh_${name.toLowerCase()}`);
    }
  });

  it('write no error code, message or failure class in SQL: the endings bind them (src/store/lease-endings.ts)', () => {
    const texts: [string, string][] = [
      ...Object.entries({ ...SQL, ...STATS_SQL }),
      ...Object.entries({ ...PgQueries, ...PgCatalog }).flatMap(([name, query]) =>
        isNamedQuery(query) ? [[name, (query as { text: string }).text] as [string, string]] : [],
      ),
    ];
    expect(texts.length).toBe(sqliteQueries.length + postgresQueries.length);
    for (const [name, text] of texts) {
      expect(text, name).not.toMatch(/last_error_(code|message|class)\s*=\s*'/);
      for (const message of Object.values(JOB_FAILURE_CODES)) expect(text, name).not.toContain(message);
      for (const failureClass of FAILURE_CLASS_NAMES.filter((c) => !(JOB_STATUSES as readonly string[]).includes(c))) {
        expect(text, name).not.toContain(`'${failureClass}'`);
      }
    }
  });

  it('take the value lists of their CHECK constraints from core', () => {
    expect(STATUS_LIST).toBe(JOB_STATUSES.map((s) => `'${s}'`).join(','));
    expect(OUTCOME_LIST).toBe(ATTEMPT_OUTCOMES.map((o) => `'${o}'`).join(','));
    expect(ROLE_LIST).toBe(ROLES.map((r) => `'${r}'`).join(', '));
    // Migration 1 has been applied with these lists. A value added to a list in core needs a new
    // migration that changes the CHECK of existing databases; then update this pin.
    for (const migrations of [SQLITE_MIGRATIONS, PG_MIGRATIONS]) {
      const initial = migrations[0]?.sql ?? '';
      expect(initial).toContain(`status IN ('queued','running','succeeded','dead','unknown','cancelled')`);
      expect(initial).toContain(`last_outcome IN ('succeeded','failed','expired','cancelled','deadline')`);
      expect(initial).toContain(`role IN ('producer', 'worker', 'admin')`);
    }
  });
});
