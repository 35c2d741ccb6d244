/**
 * Small pieces both soaks (bench/soak.ts over HTTP, bench/soak-embedded.ts on
 * the library) use: a pause a signal can end early, a seeded shuffle, and the
 * two-decimal rounding of their summaries.
 */

export function abortablePause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Fisher–Yates in place, with the soak's seeded random. */
export function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

export const round = (value: number): number => Math.round(value * 100) / 100;
