/**
 * The randomness seam, injected like the clock (clock.ts): a store draws
 * backoff jitter from the Random in its options, so tests can pin the draw.
 * Ids and lease tokens do not come from here: they must be unguessable, so
 * ids.ts takes them from node:crypto.
 */

/** A uniform draw in [0, 1), as Math.random. */
export type Random = () => number;

export const systemRandom: Random = () => Math.random();
