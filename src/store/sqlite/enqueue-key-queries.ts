/**
 * The SQLite statements of the dedupe and unique keys (core/dedupe.ts decides,
 * enqueue-keys.ts applies): each key's holder found by its own index, and the
 * guarded merge and releases. queries.ts spreads them into SQL, where the
 * store prepares them with the rest.
 */

import { PURGEABLE_STATUSES } from '../../core/states.js';

/** A dedupe key's holder that still takes duplicates (core/dedupe.ts takesDuplicates), at @now: never leased, and not running now. */
const TAKES_DUPLICATES = `status IN ('queued', 'waiting') AND epoch = 0 AND dedupe_until > @now
    AND NOT EXISTS (SELECT 1 FROM job_leases WHERE job_leases.seq = jobs.seq)`;
/** The finished statuses, after which a unique key's holder keeps it for forMs (core/dedupe.ts decideUnique). */
const FINISHED = PURGEABLE_STATUSES.map((status) => `'${status}'`).join(', ');

export const ENQUEUE_KEY_SQL = {
  /** The job of (tenant, owner, kind) that holds a dedupe key: one entry of jobs_dedupe_key (migration 13); a running one shows as running. */
  jobDedupeHolder: `SELECT j.seq, j.id, j.tenant, j.kind, j.group_key, j.priority, CASE WHEN l.seq IS NULL THEN j.status ELSE 'running' END AS status,
      coalesce(l.epoch, j.epoch) AS epoch, j.created_at, j.run_after, j.dedupe_until, j.payload_bytes
    FROM jobs j INDEXED BY jobs_dedupe_key LEFT JOIN job_leases l ON l.seq = j.seq
    WHERE j.tenant = @tenant AND j.owner = @owner AND j.kind = @kind AND j.dedupe_key = @key`,
  /** decideDedupe's merge, guarded by takesDuplicates: the payload when @replace, runAfter and the window never moved earlier. */
  jobDedupeMerge: `UPDATE jobs SET payload = CASE WHEN @replace = 1 THEN @payload ELSE payload END,
      payload_bytes = CASE WHEN @replace = 1 THEN @payloadBytes ELSE payload_bytes END,
      run_after = MAX(run_after, @runAfter), dedupe_until = MAX(dedupe_until, @dedupeUntil)
    WHERE seq = @seq AND dedupe_key = @key AND ${TAKES_DUPLICATES}
    RETURNING status, run_after`,
  /** decideDedupe's release: a holder that takes no more duplicates gives its key up to the job about to be inserted. */
  jobDedupeRelease: `UPDATE jobs SET dedupe_key = NULL, dedupe_until = NULL WHERE seq = @seq AND dedupe_key = @key AND NOT (${TAKES_DUPLICATES})`,
  /** The job of (tenant, owner, kind) that holds a unique key: one entry of jobs_unique_key (migration 13). */
  jobUniqueHolder: `SELECT seq, id, status, finished_at FROM jobs INDEXED BY jobs_unique_key
    WHERE tenant = @tenant AND owner = @owner AND kind = @kind AND unique_key = @key`,
  /** decideUnique's release: a holder finished at least @forMs ago gives its key up to the job about to be inserted. */
  jobUniqueRelease: `UPDATE jobs SET unique_key = NULL
    WHERE seq = @seq AND unique_key = @key AND status IN (${FINISHED}) AND finished_at + @forMs <= @now`,
} as const;
