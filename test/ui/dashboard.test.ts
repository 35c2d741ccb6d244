/**
 * The dashboard in a real headless Chromium (playwright-core driving
 * Debian's /usr/bin/chromium) against a real coordinator on a random port
 * over SQLite: sign in with an admin key, watch a count change live after an
 * enqueue, filter the job list, open a job and requeue it from the keyboard,
 * run a bulk requeue by filter after its confirmation, requeue a selection,
 * see a hostile payload and error message rendered as text, follow a job's
 * parents and children, pause and resume a registered kind from the
 * overview, and see the busiest groups. The key
 * never appears in a URL, the page raises no Content-Security-Policy
 * violation, and a phone-wide screen does not scroll sideways. Screenshots go
 * to reports/ui/ (git-ignored).
 */

import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { DEAD_JOB_WORKER, deadJobs, unknownJobs } from '../support/dead-jobs.js';
import { itNeeds } from '../support/requirements.js';
import { startLiveCoordinator, type LiveCoordinator } from '../client/live-coordinator.js';

const CHROMIUM = '/usr/bin/chromium';

/** What the page functions below read of the browser's globals (the test project has no DOM types). */
interface Dom {
  readonly document: {
    querySelector(selector: string): { readonly textContent: string | null } | null;
    querySelectorAll(selector: string): { readonly length: number };
    readonly activeElement: { getAttribute(name: string): string | null } | null;
    readonly documentElement: { readonly scrollWidth: number };
  };
  readonly sessionStorage: { getItem(key: string): string | null };
  readonly localStorage: { readonly length: number };
  readonly __pwned?: number;
}
const SHOTS = resolve(import.meta.dirname, '../../reports/ui');
const HOSTILE = '<img src=x onerror="window.__pwned=1">';
const it = itNeeds('chromium', existsSync(CHROMIUM) ? null : `${CHROMIUM} is not installed (apt-get install chromium)`);

describe('the dashboard in Chromium', () => {
  let live: LiveCoordinator;
  let browser: Browser | undefined;
  let page: Page;
  let hostileId: string;
  let unknownId: string;
  let childId: string;
  let resultId: string;
  const seenUrls: string[] = [];
  const cspViolations: string[] = [];
  const pageErrors: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) return;
    mkdirSync(SHOTS, { recursive: true });
    live = await startLiveCoordinator();
    const producer = live.client('producer');
    const worker = live.client('worker');
    for (let i = 0; i < 3; i += 1) await producer.enqueue({ kind: 'report', payload: { n: i } });
    await deadJobs(producer, worker, 'mail', 4, 'smtp_down', 'the SMTP relay refused the connection', { to: 'ada@example.org' });
    await deadJobs(producer, worker, 'thumbnail', 2, 'bad_image', 'not a PNG');
    [hostileId = ''] = await deadJobs(producer, worker, 'hostile', 1, 'xss_probe', `${HOSTILE} in the message`, {
      html: HOSTILE,
      note: 'a payload that must render as text',
    });
    [unknownId = ''] = await unknownJobs(producer, worker, 'charge', 1);
    // Waits on the unknown job (its reconcile, below, releases it): counted neither queued nor dead.
    childId = (await producer.enqueue({ kind: 'chained', payload: { after: 'charge' }, dependsOn: [unknownId], concurrencyKey: 'customer-1' })).job.id;
    resultId = (await producer.enqueue({ kind: 'render', payload: { page: 1 } })).job.id;
    const [rendering] = await worker.lease({ workerId: DEAD_JOB_WORKER, kinds: ['render'] });
    await worker.complete(resultId, { token: rendering?.token ?? '', result: { pages: 1, url: 'https://example.org/r/1' } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('request', (request) => seenUrls.push(request.url()));
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });

  afterAll(async () => {
    await browser?.close();
    await live?.close();
  });

  it('signs in with the admin key held in sessionStorage and never puts it in a URL', async () => {
    const response = await page.goto(`${live.url}/ui`);
    expect(response?.status()).toBe(200);
    const csp = response?.headers()['content-security-policy'] ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    await page.getByLabel('Admin key').fill(live.keys.producer);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('That key is not an admin key.').waitFor();
    await page.getByLabel('Admin key').fill(live.keys.admin);
    await page.keyboard.press('Enter');
    await page.getByTestId('count-queued').waitFor();
    expect(await page.evaluate(() => (globalThis as unknown as Dom).sessionStorage.getItem('leasehold.adminKey'))).toBe(live.keys.admin);
    expect(await page.evaluate(() => (globalThis as unknown as Dom).localStorage.length)).toBe(0);
  });

  it('updates the overview live: a count changes after an enqueue without a reload', async () => {
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelector('[data-testid="count-dead"]')?.textContent === '7');
    const queued = Number(await page.getByTestId('count-queued').textContent());
    expect(queued).toBe(3);
    let navigations = 0;
    page.on('framenavigated', () => (navigations += 1));
    // A tile with the keyboard focus keeps it while the figures refresh.
    await page.locator('a.tile[href="#/jobs?status=dead"]').focus();
    await live.client('producer').enqueue({ kind: 'report', payload: { n: 'live' } });
    await page.waitForFunction(
      (expected) => (globalThis as unknown as Dom).document.querySelector('[data-testid="count-queued"]')?.textContent === String(expected),
      queued + 1,
      { timeout: 20_000 },
    );
    expect(navigations).toBe(0);
    expect(await page.evaluate(() => (globalThis as unknown as Dom).document.activeElement?.getAttribute('href'))).toBe('#/jobs?status=dead');
    // The objectives' ratios come from the SLI counters of GET /metrics: every enqueue was accepted.
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelector('[data-testid="acceptance-ratio"]')?.textContent === '100.00 %');
    expect(await page.getByTestId('completion-ratio').textContent()).toMatch(/^\d+\.\d\d %$/);
    // The charts are inline SVG drawn by the page's own code.
    expect(await page.locator('svg.chart polyline').count()).toBeGreaterThan(0);
    await page
      .getByRole('cell', { name: 'mail' })
      .or(page.getByRole('rowheader', { name: 'mail' }))
      .first()
      .waitFor();
    await page.screenshot({ path: `${SHOTS}/overview.png`, fullPage: true });
  });

  it('filters the job list by status and kind', async () => {
    await page.getByRole('link', { name: 'Jobs', exact: true }).click();
    await page.getByLabel('Status').selectOption('dead');
    await page.getByLabel('Kind').fill('mail');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelectorAll('[data-testid="job-table"] tbody tr').length === 4);
    expect(page.url()).toContain('status=dead');
    expect(await page.locator('[data-testid="job-table"] tbody').textContent()).toContain('smtp_down');
    await page.screenshot({ path: `${SHOTS}/jobs-filtered.png`, fullPage: true });
  });

  it('opens a job and requeues it from the keyboard after the confirmation', async () => {
    await page.locator('[data-testid="job-table"] tbody tr a').first().click();
    await page.getByTestId('requeue').waitFor();
    expect(await page.getByTestId('last-error').textContent()).toContain('failure class');
    expect(await page.getByTestId('payload').textContent()).toContain('"to": "ada@example.org"');
    expect(await page.getByTestId('attempts').textContent()).toContain(DEAD_JOB_WORKER);
    await page.screenshot({ path: `${SHOTS}/job-dead.png`, fullPage: true });
    const id = decodeURIComponent(new URL(page.url()).hash.replace('#/jobs/', ''));
    // Tab to the Requeue button, Enter opens the confirmation, Enter confirms (it has the focus).
    for (let i = 0; i < 40; i += 1) {
      if (await page.evaluate(() => (globalThis as unknown as Dom).document.activeElement?.getAttribute('data-testid') === 'requeue')) break;
      await page.keyboard.press('Tab');
    }
    expect(await page.evaluate(() => (globalThis as unknown as Dom).document.activeElement?.getAttribute('data-testid'))).toBe('requeue');
    await page.keyboard.press('Enter');
    await page.getByTestId('confirm-message').waitFor();
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelector('[data-testid="job-status"]')?.textContent === 'queued');
    expect((await live.client('admin').getJob(id)).status).toBe('queued');
  });

  it('requeues every job a filter matches after a confirmation that says how many', async () => {
    await page.goto(`${live.url}/ui#/jobs?status=dead&errorCode=smtp_down`);
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelectorAll('[data-testid="job-table"] tbody tr').length === 3);
    await page.getByLabel('Action', { exact: true }).selectOption('requeue');
    await page.getByTestId('apply-matching').click();
    expect(await page.getByTestId('confirm-message').textContent()).toBe('This will requeue 3 jobs.');
    await page.screenshot({ path: `${SHOTS}/bulk-confirm.png` });
    await page.getByTestId('confirm').click();
    await page.getByText('Matched 3, changed 3.').waitFor();
    await page.getByText('No jobs match.').waitFor();
    await page.screenshot({ path: `${SHOTS}/bulk-done.png`, fullPage: true });
    const dead = await live.client('admin').listJobs({ status: 'dead', limit: 100 });
    expect(dead.jobs.map((job) => job.kind).sort()).toEqual(['hostile', 'thumbnail', 'thumbnail']);
  });

  it('requeues a selection of jobs picked with the checkboxes', async () => {
    await page.goto(`${live.url}/ui#/jobs?status=dead&kind=thumbnail`);
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelectorAll('[data-testid="job-table"] tbody tr').length === 2);
    await page.getByLabel('Select all on this page').check();
    await page.getByLabel('Action', { exact: true }).selectOption('requeue');
    await page.getByTestId('apply-selected').click();
    expect(await page.getByTestId('confirm-message').textContent()).toBe('This will requeue 2 of the 2 selected jobs.');
    await page.getByTestId('confirm').click();
    await page.getByText('Matched 2, changed 2.').waitFor();
    await page.getByText('No jobs match.').waitFor();
    expect((await live.client('admin').listJobs({ status: 'queued', kind: 'thumbnail' })).jobs).toHaveLength(2);
  });

  it('shows a job\u2019s parents and children as links, and its concurrency key', async () => {
    await page.goto(`${live.url}/ui#/jobs/${childId}`);
    await page.getByTestId('parents').waitFor();
    expect(await page.getByTestId('job-status').textContent()).toBe('waiting');
    expect(await page.getByTestId('concurrency-key').textContent()).toBe('customer-1');
    await page.getByTestId('cancel').waitFor();
    await page.getByTestId('parents').getByRole('link', { name: unknownId }).click();
    await page.getByTestId('children').waitFor();
    expect(await page.getByTestId('job-status').textContent()).toBe('unknown');
    expect(await page.getByTestId('children').textContent()).toContain(childId);
    await page.screenshot({ path: `${SHOTS}/job-dependencies.png`, fullPage: true });
  });

  it('reconciles an unknown job from its page', async () => {
    await page.goto(`${live.url}/ui#/jobs/${unknownId}`);
    await page.getByTestId('reconcile-requeue').waitFor();
    expect(await page.getByTestId('job-status').textContent()).toBe('unknown');
    await page.getByTestId('reconcile-succeeded').click();
    expect(await page.getByTestId('confirm-message').textContent()).toBe(`This will reconcile as succeeded job ${unknownId}.`);
    await page.getByTestId('confirm').click();
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelector('[data-testid="job-status"]')?.textContent === 'succeeded');
    expect((await live.client('admin').getJob(unknownId)).status).toBe('succeeded');
  });

  it('shows a result with its SHA-256 and downloads it', async () => {
    await page.goto(`${live.url}/ui#/jobs/${resultId}`);
    await page.getByTestId('checksum').waitFor();
    const stored = await live.client('admin').getResult(resultId);
    expect(await page.getByTestId('checksum').textContent()).toBe(stored.checksum);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download result' }).click()]);
    const path = await download.path();
    expect(readFileSync(path)).toEqual(stored.body);
    await page.screenshot({ path: `${SHOTS}/job-result.png`, fullPage: true });
  });

  it('renders a hostile payload and error message as text', async () => {
    await page.goto(`${live.url}/ui#/jobs?status=dead&kind=hostile`);
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelectorAll('[data-testid="job-table"] tbody tr').length === 1);
    expect(await page.locator('[data-testid="job-table"] tbody').textContent()).toContain(HOSTILE);
    await page.goto(`${live.url}/ui#/jobs/${hostileId}`);
    await page.getByTestId('payload').waitFor();
    expect(await page.getByTestId('payload').textContent()).toContain(JSON.stringify(HOSTILE).slice(1, -1));
    expect(await page.getByTestId('last-error').textContent()).toContain(HOSTILE);
    expect(await page.locator('main img').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as unknown as Dom).__pwned)).toBeUndefined();
    await page.screenshot({ path: `${SHOTS}/hostile.png`, fullPage: true });
  });

  it('pages through a long list with the API cursors, and cuts a large payload with a button for the rest', async () => {
    const big = 'x'.repeat(30_000);
    await live.client('producer').enqueueBatch(Array.from({ length: 60 }, (_, i) => ({ idempotencyKey: `page-${i}`, kind: 'paged', payload: { i, big } })));
    await page.goto(`${live.url}/ui#/jobs?kind=paged`);
    const rows = (): Promise<number> => page.locator('[data-testid="job-table"] tbody tr').count();
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelectorAll('[data-testid="job-table"] tbody tr').length === 50);
    await page.getByRole('button', { name: 'Older →' }).click();
    await page.getByText('page 2').waitFor();
    await page.waitForFunction(() => (globalThis as unknown as Dom).document.querySelectorAll('[data-testid="job-table"] tbody tr').length === 10);
    expect(await page.getByRole('button', { name: 'Older →' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: '← Newer' }).click();
    await page.getByText('page 1').waitFor();
    expect(await rows()).toBe(50);

    await page.locator('[data-testid="job-table"] tbody tr a').first().click();
    await page.getByTestId('payload').waitFor();
    expect((await page.getByTestId('payload').textContent())?.length).toBe(10_000);
    await page.getByRole('button', { name: /^Show all \d+ characters$/ }).click();
    expect((await page.getByTestId('payload').textContent())?.length).toBeGreaterThan(30_000);
  });

  it('fits a phone-wide screen without sideways scrolling', async () => {
    await page.setViewportSize({ width: 375, height: 740 });
    await page.goto(`${live.url}/ui#/`);
    await page.getByTestId('count-queued').waitFor();
    expect(await page.evaluate(() => (globalThis as unknown as Dom).document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await page.screenshot({ path: `${SHOTS}/phone-overview.png`, fullPage: true });
    await page.goto(`${live.url}/ui#/jobs`);
    await page.locator('[data-testid="job-table"]').waitFor();
    expect(await page.evaluate(() => (globalThis as unknown as Dom).document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await page.screenshot({ path: `${SHOTS}/phone-jobs.png`, fullPage: true });
  });

  it('pauses and resumes a registered kind from the overview', async () => {
    // Registered last: a registry makes the tenant's kinds an allowlist, which the tests above do not expect.
    await live.client('admin').putKind('report', { maxConcurrent: 3 });
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${live.url}/ui#/`);
    const pause = page.getByRole('button', { name: 'Pause report' });
    await pause.waitFor();
    expect(await page.getByTestId('kind-registry').textContent()).toContain('at most 3 at once');
    await pause.click();
    await page.getByRole('button', { name: 'Resume report' }).waitFor();
    expect((await live.client('admin').getKind('report')).paused).toBe(true);
    expect(await page.getByTestId('kind-registry').textContent()).toContain('paused');
    await page.screenshot({ path: `${SHOTS}/kinds-paused.png`, fullPage: true });
    await page.getByRole('button', { name: 'Resume report' }).click();
    await page.getByRole('button', { name: 'Pause report' }).waitFor();
    expect((await live.client('admin').getKind('report')).paused).toBe(false);
  });

  it('shows the busiest groups with their waiting and running jobs, and a kind’s group limits', async () => {
    await live.client('admin').putKind('report', { maxConcurrent: 3, groups: { maxConcurrent: 2 } });
    await live.client('producer').enqueue({ kind: 'report', payload: {}, group: 'customer-7' });
    // The page is on the overview already, where a hash-only goto reloads nothing: reload, so the groups are read now
    // rather than at the overview's next metrics poll (15 s).
    await page.goto(`${live.url}/ui#/`);
    await page.reload();
    const groups = page.getByTestId('groups');
    await groups.waitFor();
    expect(await groups.textContent()).toContain('customer-7');
    expect(await page.getByTestId('kind-registry').textContent()).toContain('at most 2 at once per group');
  });

  it('sent the key in no URL and raised no CSP violation or script error', () => {
    expect(seenUrls.length).toBeGreaterThan(10);
    for (const url of seenUrls) expect(url).not.toContain(live.keys.admin);
    expect(cspViolations).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
