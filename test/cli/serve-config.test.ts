/**
 * `leasehold serve` configuration: --config file and flags merged (flags
 * win), every problem from both listed in one usage error, and every flag
 * documented in `serve --help` and in the README's Configuration table.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError, commandHelp } from '../../src/cli/command.js';
import { serveCommand } from '../../src/cli/commands/serve.js';
import { CONFIG_FLAGS, serveConfig } from '../../src/cli/serve-config.js';

const files: Record<string, string> = {
  'good.json': JSON.stringify({ defaultLeaseMs: 5_000, backpressure: { maxPendingJobs: 10, maxStorageBytes: 1_000_000 }, requireRegisteredKinds: true }),
  'bad.json': JSON.stringify({ defaultLeaseMs: 'long', colour: 'red', backpressure: { maxPendingJobs: 0 } }),
  'broken.json': '{"defaultLeaseMs": ',
  'array.json': '[1, 2]',
};

function read(path: string): string {
  const text = files[path];
  if (text === undefined) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
  return text;
}

async function problems(values: Record<string, string | boolean>): Promise<string[]> {
  const error = await serveConfig(values, serveCommand, read).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UsageError);
  return (error as UsageError).message
    .split('\n')
    .slice(1)
    .map((line) => line.replace(/^\s+- /, ''));
}

describe('serve configuration', () => {
  it('has the defaults without a file or flags', async () => {
    const config = await serveConfig({}, serveCommand, read);
    expect(config.backpressure).toMatchObject({ maxPendingJobs: null, maxOldestAvailableAgeMs: null, maxStorageBytes: null });
    expect(config.defaultLeaseMs).toBe(30_000);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reads the file and lets flags override it, including back to unlimited', async () => {
    const config = await serveConfig(
      {
        config: 'good.json',
        'max-pending-jobs': '3',
        'max-storage-bytes': 'unlimited',
        'max-oldest-available-age-ms': '60000',
        'default-max-attempts': '7',
        'backoff-base-ms': '50',
        'backoff-max-ms': '500',
        'reaper-interval-ms': '0',
      },
      serveCommand,
      read,
    );
    expect(config).toMatchObject({
      defaultLeaseMs: 5_000,
      defaultMaxAttempts: 7,
      requireRegisteredKinds: true,
      reaperIntervalMs: 0,
      defaultBackoff: { baseMs: 50, maxMs: 500 },
      backpressure: { maxPendingJobs: 3, maxOldestAvailableAgeMs: 60_000, maxStorageBytes: null, statsCacheMs: 1_000 },
    });
    expect((await serveConfig({ 'require-registered-kinds': true }, serveCommand, read)).requireRegisteredKinds).toBe(true);
  });

  it('lists every problem of the file and the flags in one error, naming the flag', async () => {
    const listed = await problems({
      config: 'bad.json',
      'max-pending-jobs': 'lots',
      'default-max-attempts': '0',
      'backoff-max-ms': '1',
      'backoff-base-ms': '10',
    });
    expect(listed).toEqual(
      expect.arrayContaining([
        '--max-pending-jobs must be an integer or "unlimited"',
        expect.stringMatching(/^defaultLeaseMs must be an integer/),
        'unknown option "colour"',
        expect.stringMatching(/^backpressure\.maxPendingJobs must be an integer.*/),
        expect.stringMatching(/^defaultMaxAttempts must be .*\(--default-max-attempts\)$/),
        'defaultBackoff.maxMs must be >= defaultBackoff.baseMs (--backoff-max-ms)',
      ]),
    );
    // The flag replaced the file's bad maxPendingJobs only when it parsed; here it did not, so the file's 0 is reported too.
    expect(listed).toHaveLength(6);
    expect(await problems({ config: 'missing.json' })).toEqual(['--config missing.json: cannot be read (ENOENT)']);
    expect((await problems({ config: 'broken.json' }))[0]).toMatch(/^--config broken\.json: not valid JSON/);
    expect(await problems({ config: 'array.json', 'kind-cache-ms': '-5' })).toEqual([
      '--config array.json: the file must hold a JSON object',
      'kindCacheMs must be an integer between 0 and 3600000 (--kind-cache-ms)',
    ]);
  });

  it('documents every flag in serve --help and in the README', () => {
    const help = commandHelp(serveCommand);
    const readme = readFileSync(resolve(import.meta.dirname, '../../README.md'), 'utf8');
    for (const spec of CONFIG_FLAGS) {
      expect(help).toContain(`--${spec.flag}`);
      expect(readme, `README lacks --${spec.flag}`).toContain(`--${spec.flag}`);
    }
    expect(help).toContain('--config FILE');
    expect(readme).toContain('--config');
  });
});
