/** What the store announces when jobs may have become available (Store.watchAvailable). */

/** A job of `kind` became available to `tenant`'s workers. */
export interface Availability {
  readonly tenant: string;
  readonly kind: string;
}

export type AvailabilityListener = (available: Availability | null) => void;

/** The distinct (tenant, kind) pairs among `jobs`, in first-seen order. */
export function distinctAvailability(jobs: Iterable<Availability>): Availability[] {
  const seen = new Map<string, Availability>();
  for (const job of jobs) {
    const key = `${job.tenant}\n${job.kind}`;
    if (!seen.has(key)) seen.set(key, { tenant: job.tenant, kind: job.kind });
  }
  return [...seen.values()];
}
