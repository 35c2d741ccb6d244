/**
 * No lease token, API key, scrape token, payload or result reaches the logs of
 * a real `leasehold serve` and a real `leasehold worker` (both at debug),
 * through full job cycles: successes with results, a retry, a permanent
 * failure requeued, an unknown job reconciled, a running job cancelled, lease
 * expiries applied by the reaper (dead and unknown), and 4xx and 5xx answers.
 * The worker talks to the coordinator through a recording proxy, so the test
 * knows every token the worker was given.
 *
 * Positive control: the same search finds every token and marker in the
 * proxy's recording, and the logs hold lines about every job (so the lines
 * searched are the right ones). The logs are also correlated: request lines
 * carry the request id (the client's X-Request-Id when it sent one), job lines
 * their id, kind, attempt, epoch and worker, transitions are at info with
 * their failure class.
 */

import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROOT, startWorker, type RunningProcess } from '../../bench/processes.js';
import { startCluster, type Cluster } from './cluster.js';

const HANDLERS = join(ROOT, 'dist', 'test', 'fixtures', 'log-handlers.js');
const METRICS_TOKEN = `mt-${randomBytes(24).toString('base64url')}`;
const FAKE_KEY = `lh_${randomBytes(24).toString('base64url')}`;
const REQUEST_ID = 'log-secrets-req-1';

type Line = Record<string, unknown>;

let cluster: Cluster;
let proxy: Server;
let proxyUrl: string;
/** Every response body the proxy passed to the worker. */
let recorded = '';
let worker: (RunningProcess & { readonly ready: Promise<string> }) | undefined;
const markers: string[] = [];
const tokens: string[] = [];
const jobIds: string[] = [];

/** Forwards every request to the coordinator and keeps a copy of each answer. */
function startProxy(target: string): Promise<Server> {
  const server = createServer((req, res) => {
    const upstream = httpRequest(`${target}${req.url ?? '/'}`, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.on('data', (chunk: Buffer) => {
        recorded += chunk.toString('utf8');
        res.write(chunk);
      });
      answer.on('end', () => res.end());
    });
    upstream.on('error', () => res.destroy());
    // A client gone (the worker stopped) ends its upstream request too, so no long poll of it lingers at the coordinator.
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function call(
  method: string,
  path: string,
  key: string | null,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Line }> {
  const answer = await fetch(`${cluster.url}${path}`, {
    method,
    headers: { ...(key === null ? {} : { authorization: `Bearer ${key}` }), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await answer.text();
  return { status: answer.status, json: text === '' ? {} : (JSON.parse(text) as Line) };
}

async function enqueue(kind: string, extra: Record<string, unknown> = {}): Promise<{ status: number; id: string }> {
  const marker = `payload-marker-${randomBytes(12).toString('hex')}`;
  markers.push(marker, `result-${marker}`);
  const answer = await call('POST', '/jobs', cluster.keys.producer, { kind, payload: { marker }, ...extra }, { 'idempotency-key': `idem-${marker}` });
  const id = String(answer.json['id'] ?? '');
  if (answer.status === 202) jobIds.push(id);
  return { status: answer.status, id };
}

/** Waits (long polls on GET /jobs/{id}) until the job has `status`. */
async function until(id: string, status: string): Promise<void> {
  for (let i = 0; i < 40; i++) {
    const job = await call('GET', `/jobs/${id}?waitMs=500`, cluster.keys.producer);
    if (job.json['status'] === status) return;
  }
  throw new Error(`job ${id} did not reach ${status}`);
}

function linesOf(process: RunningProcess): string[] {
  return process
    .output()
    .split('\n')
    .filter((line) => line.trim() !== '');
}

function parsed(lines: readonly string[]): Line[] {
  return lines.map((line) => JSON.parse(line) as Line);
}

/** The secrets found in `text`: what the test would report. */
function secretsIn(text: string, secrets: readonly string[]): string[] {
  return secrets.filter((secret) => text.includes(secret));
}

beforeAll(async () => {
  cluster = await startCluster([
    '--log-level',
    'debug',
    '--reaper-interval-ms',
    '100',
    '--metrics-token',
    METRICS_TOKEN,
    '--backoff-base-ms',
    '10',
    '--backoff-max-ms',
    '50',
    '--max-pending-jobs',
    '12',
    '--backpressure-stats-cache-ms',
    '0',
  ]);
  proxy = await startProxy(cluster.url);
  const address = proxy.address();
  proxyUrl = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
}, 60_000);

afterAll(async () => {
  await worker?.stop('SIGKILL');
  await new Promise((resolve) => proxy?.close(resolve));
  await cluster?.stop();
});

it('no token, key, payload or result appears in either process, through full cycles with failures, expiries and 4xx/5xx answers', async () => {
  worker = startWorker({
    url: proxyUrl,
    key: cluster.keys.worker,
    handlers: HANDLERS,
    concurrency: 4,
    workerId: 'log-worker',
    extraArgs: ['--lease-ms', '1000', '--wait-ms', '200', '--log-level', 'debug'],
  });
  await worker.ready;

  // The worker's cycles.
  const ok = await Promise.all([enqueue('ok'), enqueue('ok')]);
  const flaky = await enqueue('flaky');
  const permanent = await enqueue('permanent');
  const effectful = await enqueue('effectful');
  const block = await enqueue('block');
  for (const job of ok) await until(job.id, 'succeeded');
  await until(flaky.id, 'succeeded');
  await until(permanent.id, 'dead');
  await until(effectful.id, 'unknown');
  await until(block.id, 'running');
  expect((await call('POST', `/jobs/${block.id}/cancel`, cluster.keys.admin)).status).toBe(200);
  await until(block.id, 'cancelled');
  expect((await call('POST', `/jobs/${effectful.id}/reconcile`, cluster.keys.admin, { outcome: 'succeeded' })).status).toBe(200);
  expect((await call('POST', `/jobs/${permanent.id}/requeue`, cluster.keys.admin, {}, { 'x-request-id': REQUEST_ID })).status).toBe(200);
  await until(permanent.id, 'dead');
  await worker.stop('SIGTERM');
  proxy.closeAllConnections();

  // Expiries the reaper applies (nobody leases now: a lease would apply them inside its own transaction, unlogged): dead on the last attempt, unknown after an effect.
  const expiring = await enqueue('expire', { maxAttempts: 1 });
  const effectExpiring = await enqueue('expire-effect', { maxAttempts: 1 });
  const leased = await call('POST', '/lease', cluster.keys.worker, { workerId: 'test-leaser', kinds: ['expire', 'expire-effect'], leaseMs: 100, max: 2 });
  const leases = (leased.json['jobs'] as { id: string; token: string }[] | undefined) ?? [];
  expect(leases).toHaveLength(2);
  tokens.push(...leases.map((j) => j.token));
  const withEffect = leases.find((j) => j.id === effectExpiring.id);
  expect((await call('POST', `/jobs/${effectExpiring.id}/effect`, cluster.keys.worker, { token: withEffect?.token })).status).toBe(200);
  await until(expiring.id, 'dead');
  await until(effectExpiring.id, 'unknown');
  // 4xx: a stale token, no key, a wrong key, a wrong role, a missing job, a bad body.
  expect((await call('POST', `/jobs/${expiring.id}/complete`, cluster.keys.worker, { token: leases[0]?.token })).status).toBe(409);
  expect((await call('GET', '/stats', null)).status).toBe(401);
  expect((await call('GET', '/stats', FAKE_KEY)).status).toBe(401);
  expect((await call('GET', '/metrics', cluster.keys.producer)).status).toBe(403);
  expect((await call('GET', `/jobs/${'0'.repeat(26)}`, cluster.keys.producer)).status).toBe(404);
  expect((await call('POST', '/jobs', cluster.keys.producer, { kind: 123 }, { 'idempotency-key': 'bad-body' })).status).toBe(400);
  // 5xx: enqueue past --max-pending-jobs.
  let refused = 0;
  for (let i = 0; i < 20 && refused === 0; i++) if ((await enqueue('expire')).status === 503) refused++;
  expect(refused).toBe(1);
  const metrics = await fetch(`${cluster.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(metrics.status).toBe(200);
  expect(await metrics.text()).toContain('leasehold_http_503_total{reason="overloaded"} 1');

  await cluster.coordinator.stop('SIGTERM');
  const coordinatorLines = linesOf(cluster.coordinator);
  const workerLines = linesOf(worker);
  const secrets = [...Object.values(cluster.keys), FAKE_KEY, METRICS_TOKEN, ...tokens, ...markers];
  const workerTokens = [...recorded.matchAll(/"token":"([A-Za-z0-9_-]{20,})"/g)].map((m) => m[1] as string);
  expect(workerTokens.length).toBeGreaterThanOrEqual(6);
  secrets.push(...workerTokens);

  // Positive control: the search finds what is there, and the logs talk about every job.
  expect(secretsIn(recorded, workerTokens)).toEqual(workerTokens);
  expect(secretsIn(recorded, markers.filter((m) => !m.startsWith('result-')).slice(0, 6)).length).toBe(6);
  expect(secretsIn(`{"msg":"x","token":"${workerTokens[0]}"}`, secrets)).toEqual([workerTokens[0]]);
  const everything = [...coordinatorLines, ...workerLines].join('\n');
  for (const id of jobIds.slice(0, 8)) expect(everything, `lines about ${id}`).toContain(id);

  // The assertion: no secret anywhere in either process's output.
  expect(secretsIn(coordinatorLines.join('\n'), secrets)).toEqual([]);
  expect(secretsIn(workerLines.join('\n'), secrets)).toEqual([]);

  // Correlation: every line is JSON; request lines carry the request id; job lines name the job.
  const coordinator = parsed(coordinatorLines);
  const workerEntries = parsed(workerLines);
  const answered = coordinator.filter((l) => l['msg'] === 'request answered');
  expect(answered.length).toBeGreaterThan(20);
  for (const line of answered) expect(typeof line['reqId']).toBe('string');
  expect(answered.some((l) => l['reqId'] === REQUEST_ID && l['route'] === '/jobs/:id/requeue')).toBe(true);
  const transitions = coordinator.filter((l) => typeof l['msg'] === 'string' && /^job |^reaper applied/.test(l['msg']));
  const messages = new Set(transitions.map((l) => l['msg']));
  for (const msg of [
    'job leased',
    'job completed',
    'job retried',
    'job dead',
    'job unknown',
    'job cancelled',
    'job cancel requested',
    'job requeued',
    'job reconciled',
    'reaper applied expiries and deadlines',
  ]) {
    expect(messages, msg).toContain(msg);
  }
  for (const line of transitions) {
    expect(line['level']).toBe(30);
    if (line['msg'] !== 'reaper applied expiries and deadlines') expect(typeof line['jobId']).toBe('string');
    if (line['msg'] === 'job leased')
      expect(line).toMatchObject({ kind: expect.any(String), attempt: expect.any(Number), epoch: expect.any(Number), workerId: expect.any(String) });
    if (/^job (retried|dead|unknown|cancelled)$/.test(String(line['msg']))) expect(typeof line['failureClass']).toBe('string');
  }
  expect(transitions.find((l) => l['msg'] === 'job dead' && l['jobId'] === permanent.id)).toMatchObject({
    kind: 'permanent',
    workerId: 'log-worker',
    failureClass: 'permanent',
    errorCode: 'bad_input',
  });
  const workerJobLines = workerEntries.filter((l) => l['jobId'] !== undefined);
  expect(workerJobLines.length).toBeGreaterThan(3);
  for (const line of workerJobLines)
    expect(line).toMatchObject({ kind: expect.any(String), attempt: expect.any(Number), epoch: expect.any(Number), workerId: 'log-worker' });
}, 120_000);
