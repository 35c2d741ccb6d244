/**
 * Bounded waiting for a condition that a real process will make true: polls
 * quickly, fails with the description after the timeout. Used only where no
 * event can be awaited (another process's state).
 */

export async function waitFor<T>(
  description: string,
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${description}${lastError instanceof Error ? `: ${lastError.message}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 20));
  }
}
