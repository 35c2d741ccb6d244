/**
 * The export worker as a real process (`main.js worker`) over the test's
 * SQLite file: SIGKILLed in the middle of a CSV, and frozen (SIGSTOP) past its
 * lease while a second worker finishes the job. In both, exactly one result is
 * stored, its checksum verifies, and it is the successful attempt's bytes.
 * The handler's test hook (--pause-after-rows) holds an attempt after it has
 * read part of the tasks, so "in the middle" is an event, not a timing guess.
 */

import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type AppProcess } from '../../../apps/exports/processes.js';
import { deploy, resultRows, type Deployment } from './fixture.js';

let deployment: Deployment | undefined;
const processes: AppProcess[] = [];
afterEach(async () => {
  for (const running of processes.splice(0)) {
    running.child.kill('SIGCONT');
    await running.stop('SIGKILL');
  }
  await deployment?.close();
  deployment = undefined;
});

const LEASE_MS = '2000';

function worker(d: Deployment, extra: readonly string[] = []): AppProcess {
  const started = startApp(['worker', '--db', d.path, '--lease-ms', LEASE_MS, '--reaper-interval-ms', '100', ...extra]);
  processes.push(started);
  return started;
}

async function exportOf(d: Deployment): Promise<string> {
  const answer = await d.call(d.users[0]!, 'POST', '/exports', { body: {}, headers: { 'idempotency-key': 'crash' } });
  expect(answer.status).toBe(202);
  return (answer.json() as { id: string }).id;
}

async function verifiedResult(d: Deployment, id: string): Promise<Buffer> {
  const result = await d.call(d.users[0]!, 'GET', `/exports/${id}/result`);
  expect(result.status).toBe(200);
  expect(result.headers['x-checksum-sha256']).toBe(createHash('sha256').update(result.body).digest('hex'));
  return result.body;
}

describe('the export worker process', () => {
  it('SIGKILLed in the middle of a CSV: the lease expires, another worker makes exactly one result, and it verifies', async () => {
    const d = (deployment = await deploy());
    const id = await exportOf(d);
    const first = worker(d, ['--pause-after-rows', '1000']);
    await first.next((line) => line['event'] === 'export_paused' && line['jobId'] === id);
    expect(resultRows(d.db, id)).toBe(0);
    expect(await first.stop('SIGKILL')).toBe('SIGKILL');

    worker(d);
    const job = await d.queue.waitFor(id, { timeoutMs: 45_000 });
    expect(job.status).toBe('succeeded');
    expect(job.attempts).toBe(2);
    expect(resultRows(d.db, id)).toBe(1);
    const body = await verifiedResult(d, id);
    expect(body.equals((await d.call(d.users[0]!, 'GET', '/tasks/export.csv')).body)).toBe(true);
    const attempts = await d.queue.attempts(id);
    expect(attempts.map((attempt) => attempt.outcome)).toEqual([expect.not.stringMatching(/^succeeded$/), 'succeeded']);
  });

  it("discards a stale worker's late completion: the result is the bytes of the attempt that held the lease", async () => {
    const d = (deployment = await deploy());
    const id = await exportOf(d);
    const stale = worker(d, ['--pause-after-rows', '1000']);
    await stale.next((line) => line['event'] === 'export_paused' && line['jobId'] === id);
    // Frozen: no renewals, so its lease runs out while it still holds the first rows it read.
    stale.child.kill('SIGSTOP');
    const firstTask = (d.db.prepare('SELECT MIN(id) AS id FROM tasks WHERE user_id = ?').get(d.users[0]!.id) as { id: number }).id;
    const renamed = await d.call(d.users[0]!, 'PATCH', `/tasks/${firstTask}`, { body: { title: 'renamed after the first attempt read it' } });
    expect(renamed.status).toBe(200);

    const fresh = worker(d);
    const job = await d.queue.waitFor(id, { timeoutMs: 45_000 });
    expect(job.status).toBe('succeeded');
    await fresh.stop();

    // The stale attempt resumes; its worker finds the lease gone at its next renewal and aborts the attempt.
    stale.child.kill('SIGCONT');
    stale.send('resume');
    await stale.next((line) => line['jobId'] === id && line['message'] === 'job aborted; leaving it to its lease');
    expect(await stale.stop('SIGTERM')).toBe(0);
    // Its worker learned the lease was lost and dropped the attempt's bytes instead of completing.
    expect(stale.lines.some((line) => line['jobId'] === id && line['message'] === 'job aborted; leaving it to its lease')).toBe(true);

    expect(resultRows(d.db, id)).toBe(1);
    const body = await verifiedResult(d, id);
    expect(body.toString()).toContain('renamed after the first attempt read it');
    const attempts = await d.queue.attempts(id);
    expect(attempts).toHaveLength(2);
    expect(attempts[1]?.outcome).toBe('succeeded');
    expect(await d.queue.get(id)).toMatchObject({ status: 'succeeded', attempts: 2 });
  });
});
