/**
 * After a soak: were any secrets written to a log? The secrets are the API
 * keys the soak created and every lease token still on record (each job's
 * last token and each live lease's, read from the database, since no API
 * returns tokens). Every
 * output line of every coordinator and worker process is searched.
 */

import Database from 'better-sqlite3';
import pg from 'pg';

const TOKEN_SHAPED = /[A-Za-z0-9_-]{24,}/g;

/** The last lease token of every job, straight from the database (SQLite path or postgres:// URL with `schema=`). */
export async function recordedLeaseTokens(db: string): Promise<string[]> {
  if (!/^postgres(ql)?:\/\//i.test(db)) {
    const connection = new Database(db, { readonly: true });
    try {
      // Ended attempts leave their token on the job row; a running job's is on its lease row (migration 14).
      const sql = 'SELECT lease_token FROM jobs WHERE lease_token IS NOT NULL UNION ALL SELECT token FROM job_leases';
      return (connection.prepare(sql).all() as { lease_token: string }[]).map((r) => r.lease_token);
    } finally {
      connection.close();
    }
  }
  const url = new URL(db);
  const schema = url.searchParams.get('schema') ?? 'public';
  url.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const escaped = schema.replace(/"/g, '""');
    const rows = (
      await client.query<{ lease_token: string }>(
        `SELECT lease_token FROM "${escaped}".jobs WHERE lease_token IS NOT NULL UNION ALL SELECT token FROM "${escaped}".job_leases`,
      )
    ).rows;
    return rows.map((r) => r.lease_token);
  } finally {
    await client.end();
  }
}

const TOKEN_LENGTH = 24;

/** Every token-long window of a base64url run, so a token glued to other characters is found too. */
function containsToken(candidate: string, tokens: ReadonlySet<string>): boolean {
  for (let from = 0; from + TOKEN_LENGTH <= candidate.length; from++) {
    if (tokens.has(candidate.slice(from, from + TOKEN_LENGTH))) return true;
  }
  return false;
}

/** How many log lines contain one of the secrets. */
export function linesWithSecrets(outputs: readonly string[], keys: readonly string[], tokens: readonly string[]): number {
  const tokenSet = new Set(tokens);
  let found = 0;
  for (const output of outputs) {
    for (const line of output.split('\n')) {
      const leaksKey = keys.some((key) => line.includes(key));
      const leaksToken = (line.match(TOKEN_SHAPED) ?? []).some((candidate) => containsToken(candidate, tokenSet));
      if (leaksKey || leaksToken) found += 1;
    }
  }
  return found;
}
