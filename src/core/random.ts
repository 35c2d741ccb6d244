/**
 * The randomness seam, injected like the clock: the stores draw backoff
 * jitter from a Random, so tests can pin it. This module is the one place the
 * stores' randomness comes from by default. (Tokens and ids come from
 * node:crypto in ids.ts: they must be unguessable, not reproducible.)
 */

/** A uniform draw in [0, 1), as Math.random. */
export type Random = () => number;

export const systemRandom: Random = () => Math.random();
