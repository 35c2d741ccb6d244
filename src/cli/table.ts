/**
 * Listings for people: an aligned table with a header row. Every cell is
 * untrusted text from the network (kinds, codes, messages, worker ids), so it
 * is escaped for the terminal and cut to a width, and a line break in it
 * cannot start a forged row.
 */

import type { Io } from './command.js';
import { terminalSafe } from './terminal-text.js';

const MAX_CELL = 60;

function cell(value: string | number | null | undefined): string {
  const text = terminalSafe(value === null || value === undefined ? '-' : String(value));
  return text.length > MAX_CELL ? `${text.slice(0, MAX_CELL - 1)}…` : text;
}

/** Prints `rows` under `headers`, columns padded to their widest cell (the last column is not padded). */
export function printTable(io: Io, headers: readonly string[], rows: readonly (readonly (string | number | null | undefined)[])[]): void {
  const cells = [headers.map(cell), ...rows.map((row) => headers.map((_, index) => cell(row[index])))];
  const widths = headers.map((_, index) => Math.max(...cells.map((row) => (row[index] ?? '').length)));
  for (const row of cells)
    io.out(
      row
        .map((text, index) => (index === row.length - 1 ? text : text.padEnd(widths[index] ?? 0)))
        .join('  ')
        .trimEnd(),
    );
}

/** Two columns, name and value, for one record. */
export function printFacts(io: Io, facts: readonly (readonly [string, string | number | null | undefined])[]): void {
  const width = Math.max(...facts.map(([name]) => name.length));
  for (const [name, value] of facts) io.out(`${name.padEnd(width)}  ${cell(value)}`);
}
