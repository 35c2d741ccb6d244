/**
 * A Queue's stats on SQLite are read by a worker thread; a process started
 * with `node --input-type=module -e …` must not pass that flag to the thread,
 * whose script is CommonJS (it answered store_unavailable to every stats()).
 */

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, expect, it } from 'vitest';

const INDEX = pathToFileURL(resolve(import.meta.dirname, '../../dist/src/index.js')).href;
let dir = '';
afterEach(() => rmSync(dir, { recursive: true, force: true }));

it('answers stats() in a process started with --input-type=module', () => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-esm-stats-'));
  const script = `import { openQueue } from ${JSON.stringify(INDEX)};
const queue = await openQueue({ db: ${JSON.stringify(join(dir, 'q.db'))} });
await queue.enqueue({ kind: 'k', payload: {}, idempotencyKey: 'one' });
process.stdout.write(JSON.stringify((await queue.stats()).counts));
await queue.close();`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
  expect(run.stderr).toBe('');
  expect(JSON.parse(run.stdout)).toMatchObject({ queued: 1, running: 0 });
});
