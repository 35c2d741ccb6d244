/**
 * Effects ledgers and step logs are JSON Lines files written by handler
 * fixtures in worker processes: one object per line. A missing file is an
 * empty ledger (no handler ran yet).
 */

import { existsSync, readFileSync } from 'node:fs';

export function readJsonLines<T>(path: string): T[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as T);
}

/** Ledger entries by job id, in file order. */
export function byJobId<T extends { readonly id: string }>(entries: readonly T[]): Map<string, T[]> {
  const grouped = new Map<string, T[]>();
  for (const entry of entries) {
    const list = grouped.get(entry.id);
    if (list === undefined) grouped.set(entry.id, [entry]);
    else list.push(entry);
  }
  return grouped;
}
