/**
 * The fixed rate window shared by a kind's `rate` and a group's `groups.rate`.
 * Windows lie on a grid that starts at the first lease ever admitted: window n
 * covers [origin + n × perMs, origin + (n + 1) × perMs) and admits `limit`
 * leases. On the grid, a late wake-up (a loaded machine, a slow poll) costs
 * only that window's head start; the next window opens on time, so a steady
 * backlog is leased at `limit / perMs` and not at `limit / (perMs + lateness)`.
 * Two windows that meet may start up to 2 × limit within one `perMs` around
 * their border, as any fixed window may.
 */
export interface RateWindow {
  readonly start: number;
  readonly count: number;
}

/** The window in effect at `now`: the stored one while it lasts, otherwise the grid's window that holds `now`. */
export function rateWindowAt(stored: { readonly windowStart: number | null; readonly windowCount: number }, perMs: number, now: number): RateWindow {
  const { windowStart } = stored;
  if (windowStart === null) return { start: now, count: 0 };
  if (now < windowStart + perMs) return { start: windowStart, count: stored.windowCount };
  return { start: windowStart + Math.floor((now - windowStart) / perMs) * perMs, count: 0 };
}
