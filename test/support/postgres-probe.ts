/**
 * Decides, once per `npm test`, whether the PostgreSQL half of the suite runs.
 * vitest.config.ts calls it before any test file is collected:
 *
 * - DATABASE_URL set: that server is used (tests fail if it is unreachable);
 * - DATABASE_URL unset: the local server at DEFAULT_DATABASE_URL is probed,
 *   and used when it answers (DATABASE_URL is then set for every test file);
 * - otherwise (set empty, or nothing answers) the PostgreSQL half is skipped,
 *   and the reason is printed before and after the run. Where LEASEHOLD_REQUIRE
 *   names `postgres` (CI), a skip is an error instead.
 */

import pg from 'pg';
import { REQUIRE_VARIABLE, requiredHere } from './require-env.js';

export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** Carries the decision to globalSetup's teardown, which prints it again after the summary. */
export const POSTGRES_NOTE_VARIABLE = 'LEASEHOLD_POSTGRES_NOTE';

export interface PostgresDecision {
  readonly url: string | null;
  readonly note: string;
}

function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(an unparsable URL)';
  }
}

async function reachable(url: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function decidePostgres(env: NodeJS.ProcessEnv = process.env): Promise<PostgresDecision> {
  const given = env['DATABASE_URL'];
  let decision: PostgresDecision;
  if (given !== undefined && given !== '') {
    decision = { url: given, note: `PostgreSQL half: runs against DATABASE_URL (${withoutPassword(given)})` };
  } else if (given === '') {
    decision = { url: null, note: 'PostgreSQL half: SKIPPED, because DATABASE_URL is set but empty' };
  } else {
    const failure = await reachable(DEFAULT_DATABASE_URL);
    decision =
      failure === null
        ? { url: DEFAULT_DATABASE_URL, note: `PostgreSQL half: runs against the local server at ${DEFAULT_DATABASE_URL} (DATABASE_URL unset)` }
        : { url: null, note: `PostgreSQL half: SKIPPED, because DATABASE_URL is unset and ${DEFAULT_DATABASE_URL} did not answer (${failure})` };
  }
  if (decision.url === null && requiredHere('postgres', env)) {
    throw new Error(`${REQUIRE_VARIABLE} names "postgres", but ${decision.note.replace(/^PostgreSQL half: SKIPPED, because /, '')}`);
  }
  return decision;
}
