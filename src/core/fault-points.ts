/**
 * Fault-injection points for the crash-boundary tests: a named place in the
 * coordinator or the worker where a test can make the process die abruptly,
 * as a power cut or `kill -9` would, between two steps whose order matters
 * (a commit and its answer, a claim and the work).
 *
 * The points are armed only by the environment a process starts with:
 *   LEASEHOLD_CRASH_AT=<point>[:<n>][,<point>[:<n>]…]
 * makes the process SIGKILL itself at the n-th time (default the first) it
 * passes <point>. The setting is read once, at module load; when it is unset,
 * `crashPoint` is an empty function, so a production hot path pays one call
 * of a function that does nothing and no lookup.
 */

export const CRASH_POINTS = [
  /** SQLite: inside the enqueue transaction, the job row written, before COMMIT. PostgreSQL: before the INSERT is sent. */
  'enqueue.before-commit',
  /** The enqueue is committed; the 202 has not been written. */
  'enqueue.after-commit',
  /** A lease is committed; the leased jobs have not been sent to the worker. */
  'lease.after-commit',
  /** Inside the complete transaction: result row and success written, COMMIT not yet run. */
  'complete.inside-transaction',
  /** The complete is committed; the worker has not been answered. */
  'complete.after-commit',
  /** Worker: a lease answer arrived; the handler has not started. */
  'worker.after-claim',
  /** Worker: the handler returned; the complete has not been sent. */
  'worker.after-handler',
] as const;

export type CrashPointName = (typeof CRASH_POINTS)[number];

export const CRASH_AT_VARIABLE = 'LEASEHOLD_CRASH_AT';

/** Parses the setting; an unknown point or a bad count throws, so a mistyped test fails instead of passing unharmed. */
export function parseCrashSetting(setting: string | undefined): ReadonlyMap<CrashPointName, number> {
  const armed = new Map<CrashPointName, number>();
  if (setting === undefined || setting.trim() === '') return armed;
  for (const entry of setting.split(',')) {
    const [name = '', count = '1'] = entry.trim().split(':');
    if (!(CRASH_POINTS as readonly string[]).includes(name)) throw new Error(`${CRASH_AT_VARIABLE}: unknown crash point "${name}"`);
    const n = Number(count);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${CRASH_AT_VARIABLE}: "${entry}" needs a positive hit count`);
    armed.set(name as CrashPointName, n);
  }
  return armed;
}

/** The armed form of crashPoint; `die` is SIGKILL of this process (a unit test passes its own). */
export function armedCrashPoint(
  armed: ReadonlyMap<CrashPointName, number>,
  die: () => void = () => process.kill(process.pid, 'SIGKILL'),
): (name: CrashPointName) => void {
  const hits = new Map<CrashPointName, number>();
  return (name) => {
    const at = armed.get(name);
    if (at === undefined) return;
    const hit = (hits.get(name) ?? 0) + 1;
    hits.set(name, hit);
    // SIGKILL, not exit(): no finally blocks, no ROLLBACK, no flush; the kernel closes files and sockets.
    if (hit === at) die();
  };
}

const armedPoints = parseCrashSetting(process.env[CRASH_AT_VARIABLE]);

/** Dies here if the process was started with this point armed; otherwise does nothing. */
export const crashPoint: (name: CrashPointName) => void = armedPoints.size === 0 ? () => {} : armedCrashPoint(armedPoints);
