/**
 * Which backend a database string names: a `postgres://` or `postgresql://`
 * connection string is PostgreSQL, anything else is a SQLite file path. Both
 * composition roots read a string this way (the CLI's `--db`,
 * src/cli/open-store.ts, and `openQueue({ db })`, src/queue/open-queue.ts);
 * it lives beside the store interface because both may import it and neither
 * may import the other.
 */

const POSTGRES_URL = /^postgres(ql)?:\/\//i;

export function isPostgresUrl(db: string): boolean {
  return POSTGRES_URL.test(db);
}
