/**
 * The fault-injection mechanism itself: which settings arm which points, that
 * a process dies by SIGKILL exactly at the n-th pass of an armed point, and
 * that a mistyped point stops the process from starting instead of leaving
 * the test it was meant for to pass without a crash.
 */

import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../bench/processes.js';
import { CRASH_AT_VARIABLE, CRASH_POINTS, crashPoint, parseCrashSetting } from '../../src/core/fault-points.js';

const MODULE = pathToFileURL(join(ROOT, 'dist', 'src', 'core', 'fault-points.js')).href;

/** Runs a child that passes `lease.after-commit` three times, printing after each pass. */
function passThreeTimes(setting: string): ReturnType<typeof spawnSync> {
  const script = `import { crashPoint } from ${JSON.stringify(MODULE)};
for (let i = 1; i <= 3; i++) { crashPoint('lease.after-commit'); console.log('passed ' + i); }`;
  return spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, [CRASH_AT_VARIABLE]: setting },
    encoding: 'utf8',
  });
}

describe('fault-injection points', () => {
  it('parses point names with optional hit counts, and refuses unknown names and bad counts', () => {
    expect(parseCrashSetting(undefined).size).toBe(0);
    expect(parseCrashSetting(' ').size).toBe(0);
    expect([...parseCrashSetting('enqueue.after-commit:3, worker.after-claim')]).toEqual([
      ['enqueue.after-commit', 3],
      ['worker.after-claim', 1],
    ]);
    expect(() => parseCrashSetting('enqueue.after-comit')).toThrow(/unknown crash point "enqueue.after-comit"/);
    expect(() => parseCrashSetting('lease.after-commit:0')).toThrow(/positive hit count/);
    expect(() => parseCrashSetting('lease.after-commit:x')).toThrow(/positive hit count/);
  });

  it('is a no-op in a process started without the setting', () => {
    expect(process.env[CRASH_AT_VARIABLE] ?? '').toBe('');
    for (const point of CRASH_POINTS) expect(crashPoint(point)).toBeUndefined();
  });

  it('kills the process by SIGKILL at the n-th pass of an armed point, not before', () => {
    const second = passThreeTimes('lease.after-commit:2');
    expect(second.signal).toBe('SIGKILL');
    expect(second.stdout).toBe('passed 1\n');
    const other = passThreeTimes('enqueue.after-commit');
    expect(other.status).toBe(0);
    expect(other.stdout).toBe('passed 1\npassed 2\npassed 3\n');
  });

  it('stops a process whose setting names an unknown point before it does anything', () => {
    const typo = passThreeTimes('lease.after-comit');
    expect(typo.status).not.toBe(0);
    expect(typo.stdout).toBe('');
    expect(typo.stderr).toContain('unknown crash point "lease.after-comit"');
  });
});
