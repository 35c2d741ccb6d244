/**
 * CSV text for tasks (RFC 4180: a field with a comma, quote or line break is
 * quoted, quotes doubled). Both export paths write the same bytes for the
 * same rows, so the synchronous and asynchronous outputs can be compared.
 */

import { EXPORT_COLUMNS, type Task } from './db.js';

export const CSV_HEADER = `${EXPORT_COLUMNS.join(',')}\r\n`;

function field(value: string | number | null): string {
  if (value === null) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export function csvRow(task: Task): string {
  return `${EXPORT_COLUMNS.map((column) => field(task[column])).join(',')}\r\n`;
}
