/**
 * GET /metrics: after a real cycle of jobs (created and replayed enqueues, a
 * 503, leases, a completion with a result, a retry, a permanent failure, an
 * unknown job reconciled, a requeue, a cancel), the exposition parses with a
 * third-party Prometheus parser and every family the issue lists is there
 * with samples. Who may scrape: no key 401, producer and worker 403, an admin
 * key (its own tenant only) and the scrape token 200. Labels never carry job
 * ids, keys or tokens.
 */

import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import { afterEach, describe, expect, it } from 'vitest';
import { backends, bearer, drainAfterAll, enqueue, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';

const SCRAPE_TOKEN = 'scrape-token-0123456789-abcdefghijklmnop';

/** The families issue 16 lists, by what they measure. */
export const REQUIRED_FAMILIES = [
  'leasehold_jobs', // jobs by tenant, kind and status
  'leasehold_jobs_available',
  'leasehold_jobs_running',
  'leasehold_oldest_available_age_seconds',
  'leasehold_jobs_enqueued_total',
  'leasehold_jobs_leased_total',
  'leasehold_jobs_completed_total',
  'leasehold_jobs_failed_total',
  'leasehold_jobs_retried_total',
  'leasehold_lease_expirations_total', // expired
  'leasehold_jobs_dead_total',
  'leasehold_jobs_unknown_total',
  'leasehold_jobs_cancelled_total',
  'leasehold_job_wait_seconds',
  'leasehold_job_run_seconds',
  'leasehold_result_bytes_total',
  'leasehold_payload_bytes_total',
  'leasehold_database_size_bytes',
  'leasehold_http_requests_total',
  'leasehold_http_request_duration_seconds',
  'leasehold_http_503_total',
  'leasehold_admission_queue_delay_seconds',
  'leasehold_lease_polls_parked',
  'leasehold_store_commit_batch_size',
  'leasehold_store_commit_duration_seconds',
  'leasehold_sli_acceptance_valid_total',
  'leasehold_sli_acceptance_good_total',
  'leasehold_sli_completion_total',
] as const;

function scrape(h: Harness, authorization?: string): Promise<{ statusCode: number; body: string; headers: Record<string, unknown> }> {
  return h.app.inject({ method: 'GET', url: '/metrics', headers: authorization === undefined ? {} : { authorization } });
}

function family(families: readonly ParsedFamily[], name: string): ParsedFamily {
  const found = families.find((f) => f.name === name);
  if (found === undefined) throw new Error(`family ${name} is missing`);
  return found;
}

function sampleValue(families: readonly ParsedFamily[], name: string, labels: Record<string, string>): number {
  const match = family(families, name).metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return match.reduce((sum, m) => sum + Number(m.value ?? m.count ?? 0), 0);
}

describe.each(backends)('GET /metrics ($label)', (backend) => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });
  drainAfterAll(backend);

  it('after a cycle of jobs, parses with a third-party parser and has every listed family with samples', async () => {
    h = await startCoordinator({ metricsToken: SCRAPE_TOKEN, backpressure: { maxPendingJobs: 4, statsCacheMs: 0 } }, { backend });
    const { app, keys } = h;
    const ids: string[] = [];
    for (const kind of ['email', 'email', 'report', 'effectful']) {
      const answer = await enqueue(app, keys.producer, { kind, payload: { n: ids.length } }, `cycle-${ids.length}`);
      expect(answer.statusCode).toBe(202);
      ids.push((answer.json() as { id: string }).id);
      // A replay, while under the limit (backpressure refuses replays too when over it).
      if (ids.length === 1)
        expect((await enqueue(app, keys.producer, { kind: 'email', payload: { n: 0 } }, 'cycle-0')).headers['idempotent-replayed']).toBe('true');
    }
    const refused = await enqueue(app, keys.producer, { kind: 'email', payload: { n: 9 } });
    expect(refused.statusCode).toBe(503); // over maxPendingJobs: backpressure's overloaded

    const leased = await lease(app, keys.worker, { max: 4, workerId: 'w-metrics' });
    expect(leased).toHaveLength(4);
    const byKind = (kind: string): typeof leased => leased.filter((j) => j.kind === kind);
    const [first, second] = byKind('email');
    const [report] = byKind('report');
    const [effectful] = byKind('effectful');
    if (first === undefined || second === undefined || report === undefined || effectful === undefined) throw new Error('missing leases');
    expect((await post(app, keys.worker, `/jobs/${first.id}/complete`, { token: first.token, result: { sent: true } })).statusCode).toBe(200);
    expect(
      (await post(app, keys.worker, `/jobs/${second.id}/fail`, { token: second.token, error: { code: 'smtp_timeout', message: 'slow' } })).json(),
    ).toMatchObject({ status: 'queued' });
    expect(
      (await post(app, keys.worker, `/jobs/${report.id}/fail`, { token: report.token, error: { code: 'bad_input', message: 'no' }, retryable: false })).json(),
    ).toMatchObject({ status: 'dead' });
    expect((await post(app, keys.worker, `/jobs/${effectful.id}/effect`, { token: effectful.token })).statusCode).toBe(200);
    expect(
      (await post(app, keys.worker, `/jobs/${effectful.id}/fail`, { token: effectful.token, error: { code: 'crashed', message: 'x' } })).json(),
    ).toMatchObject({ status: 'unknown' });
    expect((await post(app, keys.admin, `/jobs/${effectful.id}/reconcile`, { outcome: 'dead' })).statusCode).toBe(200);
    expect((await post(app, keys.admin, `/jobs/${report.id}/requeue`, {})).statusCode).toBe(200);
    expect((await post(app, keys.admin, `/jobs/${second.id}/cancel`)).statusCode).toBe(200);

    const answer = await scrape(h, `Bearer ${SCRAPE_TOKEN}`);
    expect(answer.statusCode).toBe(200);
    expect(String(answer.headers['content-type'])).toMatch(/^text\/plain; version=0\.0\.4/);
    const families = parsePrometheusTextFormat(answer.body);
    for (const name of REQUIRED_FAMILIES) {
      expect(family(families, name).metrics.length, `${name} has samples`).toBeGreaterThan(0);
    }
    expect(sampleValue(families, 'leasehold_jobs_enqueued_total', { tenant: 't1', outcome: 'created' })).toBe(4);
    expect(sampleValue(families, 'leasehold_jobs_enqueued_total', { tenant: 't1', kind: 'email', outcome: 'replayed' })).toBe(1);
    expect(sampleValue(families, 'leasehold_jobs_leased_total', { tenant: 't1' })).toBe(4);
    expect(sampleValue(families, 'leasehold_jobs_completed_total', { tenant: 't1', kind: 'email' })).toBe(1);
    expect(sampleValue(families, 'leasehold_jobs_retried_total', { tenant: 't1', kind: 'email' })).toBe(1);
    expect(sampleValue(families, 'leasehold_jobs_dead_total', { tenant: 't1', kind: 'report', error_code: 'bad_input' })).toBe(1);
    expect(sampleValue(families, 'leasehold_jobs_unknown_total', { tenant: 't1', kind: 'effectful' })).toBe(1);
    expect(sampleValue(families, 'leasehold_jobs_reconciled_total', { tenant: 't1', outcome: 'dead' })).toBe(1);
    expect(sampleValue(families, 'leasehold_jobs_requeued_total', { tenant: 't1' })).toBe(1);
    expect(sampleValue(families, 'leasehold_jobs_cancelled_total', { tenant: 't1' })).toBe(1);
    expect(sampleValue(families, 'leasehold_http_503_total', { reason: 'overloaded' })).toBe(1);
    expect(sampleValue(families, 'leasehold_sli_acceptance_valid_total', { tenant: 't1' })).toBe(6);
    expect(sampleValue(families, 'leasehold_sli_acceptance_good_total', { tenant: 't1' })).toBe(5);
    expect(sampleValue(families, 'leasehold_sli_completion_total', { tenant: 't1', outcome: 'good' })).toBe(1);
    expect(sampleValue(families, 'leasehold_sli_completion_total', { tenant: 't1', outcome: 'bad' })).toBe(2);
    expect(sampleValue(families, 'leasehold_jobs', { tenant: 't1', kind: '*', status: 'queued' })).toBe(1); // the requeued report
    expect(sampleValue(families, 'leasehold_jobs', { tenant: 't1', kind: '*', status: 'cancelled' })).toBe(1);
    expect(sampleValue(families, 'leasehold_http_requests_total', { route: '/jobs/:id/complete', method: 'POST', status: '200' })).toBe(1);
    expect(sampleValue(families, 'leasehold_database_size_bytes', {})).toBeGreaterThan(0);
    // Bounded labels: no job id, key or token anywhere in the exposition.
    for (const secret of [...ids, ...leased.map((j) => j.token), ...Object.values(keys)]) expect(answer.body).not.toContain(secret);
  });

  it('admits an admin key (its own tenant only) and the scrape token; 401 without a key or with a wrong token, 403 for producers and workers', async () => {
    h = await startCoordinator({ metricsToken: SCRAPE_TOKEN }, { backend });
    const { app, keys } = h;
    expect((await enqueue(app, keys.producer, { kind: 'k', payload: {} })).statusCode).toBe(202);
    expect((await enqueue(app, keys.otherProducer, { kind: 'k', payload: {} })).statusCode).toBe(202);
    expect((await scrape(h)).statusCode).toBe(401);
    expect((await scrape(h, `Bearer ${SCRAPE_TOKEN.slice(0, -1)}x`)).statusCode).toBe(401);
    expect((await scrape(h, `Bearer ${keys.producer}`)).statusCode).toBe(403);
    expect((await scrape(h, `Bearer ${keys.worker}`)).statusCode).toBe(403);
    const token = await scrape(h, `Bearer ${SCRAPE_TOKEN}`);
    expect(token.statusCode).toBe(200);
    expect(token.body).toContain('tenant="t1"');
    expect(token.body).toContain('tenant="t2"');
    const admin = await scrape(h, `Bearer ${keys.admin}`);
    expect(admin.statusCode).toBe(200);
    expect(admin.body).toContain('tenant="t1"');
    expect(admin.body).not.toContain('tenant="t2"');
    expect(parsePrometheusTextFormat(admin.body).length).toBeGreaterThan(20);
    // The token is a scrape token only: no other route admits it.
    expect((await app.inject({ method: 'GET', url: '/stats', headers: bearer(SCRAPE_TOKEN) })).statusCode).toBe(401);
  });

  it('without a configured token, only admin keys scrape', async () => {
    h = await startCoordinator({}, { backend });
    expect((await scrape(h, `Bearer ${SCRAPE_TOKEN}`)).statusCode).toBe(401);
    expect((await scrape(h, `Bearer ${h.keys.admin}`)).statusCode).toBe(200);
  });
});

/** A generated request id: the process's random prefix and a counter. */
const GENERATED_ID = /^[A-Za-z0-9_-]{12}-[0-9a-z]+$/;

describe('X-Request-Id', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('echoes a valid request id, replaces an invalid or overlong one, and generates one when absent, also on 401 and 404', async () => {
    h = await startCoordinator();
    const ask = (headers: Record<string, string>, url = '/stats') => h!.app.inject({ method: 'GET', url, headers: { ...bearer(h!.keys.admin), ...headers } });
    expect((await ask({ 'x-request-id': 'req-42.a:b@c' })).headers['x-request-id']).toBe('req-42.a:b@c');
    for (const bad of ['has space', 'x'.repeat(129), 'quote"', 'new\u2028line']) {
      const answered = (await ask({ 'x-request-id': bad })).headers['x-request-id'];
      expect(answered).toMatch(GENERATED_ID);
    }
    const generated = [(await ask({})).headers['x-request-id'], (await ask({})).headers['x-request-id']];
    expect(generated[0]).toMatch(GENERATED_ID);
    expect(generated[0]).not.toBe(generated[1]);
    expect((await h.app.inject({ method: 'GET', url: '/stats', headers: { 'x-request-id': 'no-key' } })).headers['x-request-id']).toBe('no-key');
    expect((await ask({ 'x-request-id': 'unrouted' }, '/nowhere')).headers['x-request-id']).toBe('unrouted');
  });
});
