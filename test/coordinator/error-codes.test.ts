/**
 * docs/ERRORS.md documents every error code with its HTTP status, every job
 * failure code and every failure class, and the table in
 * docs/design/http-api.md §16 agrees with it. Adding a code to
 * src/core/errors.ts (or a class to src/core/failure-classes.ts) without
 * documenting it fails here.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, JOB_FAILURE_CODES } from '../../src/core/errors.js';
import { FAILURE_CLASS_NAMES } from '../../src/core/failure-classes.js';
import { JOB_STATUSES } from '../../src/core/states.js';

const doc = readFileSync(fileURLToPath(new URL('../../docs/ERRORS.md', import.meta.url)), 'utf8');
/** The design notes that hold the state diagram (§3.1) and the error-code table (§16). */
const design = ['states.md', 'http-api.md']
  .map((name) => readFileSync(fileURLToPath(new URL(`../../docs/design/${name}`, import.meta.url)), 'utf8'))
  .join('\n');

/** Table rows whose first cell is a code: `| \`code\` | status | …`. */
function rows(text = doc): Map<string, string[][]> {
  const found = new Map<string, string[][]>();
  for (const line of text.split('\n')) {
    const match = /^\|\s*`([a-z_]+)`\s*\|(.*)\|\s*$/.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined) {
      found.set(match[1], [...(found.get(match[1]) ?? []), match[2].split('|').map((cell) => cell.trim())]);
    }
  }
  return found;
}

describe('docs/ERRORS.md', () => {
  const table = rows();

  it.each(Object.entries(ERROR_CODES))('documents %s with HTTP %i', (code, status) => {
    const withStatus = (table.get(code) ?? []).find((cells) => /^\d{3}$/.test(cells[0] ?? ''));
    expect(withStatus, `${code} has no row with an HTTP status in docs/ERRORS.md`).toBeDefined();
    expect(withStatus?.[0]).toBe(String(status));
    expect(withStatus?.[1]?.length ?? 0).toBeGreaterThan(10);
  });

  it.each(Object.keys(JOB_FAILURE_CODES))('documents the job failure code %s', (code) => {
    expect(table.has(code), `${code} has no row in docs/ERRORS.md`).toBe(true);
  });

  it.each(FAILURE_CLASS_NAMES)('documents the failure class %s', (name) => {
    expect(table.has(name), `${name} has no row in docs/ERRORS.md`).toBe(true);
  });

  it('documents no code that does not exist', () => {
    const known = new Set<string>([...Object.keys(ERROR_CODES), ...Object.keys(JOB_FAILURE_CODES), ...FAILURE_CLASS_NAMES]);
    for (const code of table.keys()) expect(known.has(code), `${code} is documented but not defined`).toBe(true);
  });
});

describe('README.md', () => {
  it("lists every error code in its API section's status table", () => {
    const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
    for (const [code, status] of Object.entries(ERROR_CODES)) {
      const row = readme.split('\n').find((line) => line.startsWith(`| ${status} |`));
      expect(row, `README has no row for HTTP ${status}`).toBeDefined();
      expect(row, `README does not list ${code} under ${status}`).toContain(`\`${code}\``);
    }
  });
});

describe('docs/design/', () => {
  const table = rows(design);

  it('has every error code with the same HTTP status as docs/ERRORS.md', () => {
    for (const [code, status] of Object.entries(ERROR_CODES)) {
      const withStatus = (table.get(code) ?? []).find((cells) => /^\d{3}$/.test(cells[0] ?? ''));
      expect(withStatus?.[0], `${code} in docs/design/http-api.md`).toBe(String(status));
    }
  });

  it('draws every state of the job in its diagram', () => {
    const diagram = /```mermaid\n([\s\S]*?)```/.exec(design)?.[1] ?? '';
    for (const status of JOB_STATUSES) expect(diagram).toContain(status);
  });
});
