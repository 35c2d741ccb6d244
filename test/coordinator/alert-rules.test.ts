/**
 * docs/alerts.yml (Prometheus alert rules, written in the JSON subset of YAML
 * so that it parses without a YAML library) and docs/grafana-dashboard.json
 * only query what GET /metrics exposes: every metric name in every
 * expression is a family of a real scrape (a histogram's _bucket, _sum and
 * _count series count as their family). The rules have the shape `promtool
 * check rules` accepts (alert, expr, for, labels, annotations), each
 * expression's brackets and quotes balance, each alert of the runbook is
 * there, and each runbook_url names a section of docs/RUNBOOK.md.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator, type Harness } from '../support/http-fixtures.js';

const ROOT = join(import.meta.dirname, '..', '..');
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

interface Rule {
  readonly alert?: unknown;
  readonly record?: unknown;
  readonly expr?: unknown;
  readonly for?: unknown;
  readonly labels?: Record<string, unknown>;
  readonly annotations?: Record<string, unknown>;
}

/** The alerts the runbook promises (issue 16), by the section that explains each. */
const RUNBOOK_SECTIONS: Record<string, string> = {
  'oldest-available-age-too-high': 'LeaseholdOldestAvailableAgeHigh',
  'completion-objective-burning': 'LeaseholdCompletionBudgetFastBurn',
  'dead-jobs-rising': 'LeaseholdDeadJobsRising',
  'unknown-jobs-waiting-for-reconciliation': 'LeaseholdUnknownJobsWaiting',
  'sustained-503s': 'LeaseholdSustained503s',
  'lease-expiries-rising': 'LeaseholdLeaseExpiriesRising',
  'database-growth-beyond-budget': 'LeaseholdDatabaseGrowthBeyondBudget',
};

const DURATION = /^\d+(ms|s|m|h|d|w|y)$/;
const HISTOGRAM_SUFFIX = /_(bucket|sum|count)$/;

let families: Map<string, string>;
let h: Harness;

beforeAll(async () => {
  h = await startCoordinator({ metricsToken: 'alert-rules-test-token-0123456789abcdef' });
  const scrape = await h.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer alert-rules-test-token-0123456789abcdef' } });
  families = new Map(parsePrometheusTextFormat(scrape.body).map((f) => [f.name, f.type]));
});
afterAll(async () => {
  await h.close();
});

/** The leasehold_* names an expression reads, each resolved to its family. */
function familiesOf(expr: string): string[] {
  return [...expr.matchAll(/\bleasehold_[a-z0-9_]+/g)].map(([name]) => {
    if (families.has(name)) return name;
    const base = name.replace(HISTOGRAM_SUFFIX, '');
    return families.get(base) === 'HISTOGRAM' ? base : name;
  });
}

/** Brackets nest and close, and double quotes pair (escaped ones aside). */
function balanced(expr: string): boolean {
  const open: string[] = [];
  const pairs: Record<string, string> = { ')': '(', ']': '[', '}': '{' };
  let quoted = false;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i] as string;
    if (c === '\\') i++;
    else if (c === '"') quoted = !quoted;
    else if (quoted) continue;
    else if (c === '(' || c === '[' || c === '{') open.push(c);
    else if (c in pairs && open.pop() !== pairs[c]) return false;
  }
  return open.length === 0 && !quoted;
}

describe('docs/alerts.yml', () => {
  const document = JSON.parse(read('docs/alerts.yml')) as { groups?: { name?: unknown; rules?: Rule[] }[] };
  const rules = (document.groups ?? []).flatMap((g) => g.rules ?? []);

  it('has the shape promtool check rules accepts, with balanced expressions and valid durations', () => {
    expect(document.groups?.length).toBeGreaterThan(0);
    for (const group of document.groups ?? []) expect(typeof group.name).toBe('string');
    const names = new Set<unknown>();
    for (const rule of rules) {
      expect(typeof rule.alert, JSON.stringify(rule)).toBe('string');
      expect(rule.record).toBeUndefined();
      expect(names.has(rule.alert)).toBe(false);
      names.add(rule.alert);
      expect(typeof rule.expr).toBe('string');
      expect(balanced(String(rule.expr)), String(rule.expr)).toBe(true);
      for (const [, range] of String(rule.expr).matchAll(/\[([^\]]+)\]/g)) {
        for (const part of String(range).split(':')) expect(part, String(rule.expr)).toMatch(DURATION);
      }
      expect(String(rule.for)).toMatch(DURATION);
      expect(['page', 'ticket']).toContain(rule.labels?.['severity']);
      expect(typeof rule.annotations?.['summary']).toBe('string');
      expect(typeof rule.annotations?.['description']).toBe('string');
    }
  });

  it('reads only families that GET /metrics exposes', () => {
    for (const rule of rules) {
      const used = familiesOf(String(rule.expr));
      expect(used.length, String(rule.alert)).toBeGreaterThan(0);
      for (const name of used) expect(families.has(name), `${String(rule.alert)} reads ${name}`).toBe(true);
    }
  });

  it('has every alert of the runbook, each pointing at its section of docs/RUNBOOK.md', () => {
    const runbook = read('docs/RUNBOOK.md');
    const anchors = new Set(
      [...runbook.matchAll(/^#{2,3} (.+)$/gm)].map(([, title]) =>
        String(title)
          .toLowerCase()
          .replace(/[^a-z0-9 -]/g, '')
          .trim()
          .replace(/ /g, '-'),
      ),
    );
    const alerts = new Set(rules.map((r) => r.alert));
    for (const [section, alert] of Object.entries(RUNBOOK_SECTIONS)) {
      expect(anchors, section).toContain(section);
      expect(alerts, alert).toContain(alert);
    }
    for (const rule of rules) {
      const url = String(rule.annotations?.['runbook_url']);
      expect(url).toMatch(/^docs\/RUNBOOK\.md#/);
      expect(anchors, url).toContain(url.split('#')[1]);
      expect(runbook, `the runbook names ${String(rule.alert)}`).toContain(String(rule.alert));
    }
  });
});

describe('docs/grafana-dashboard.json', () => {
  const dashboard = JSON.parse(read('docs/grafana-dashboard.json')) as { panels?: { title?: string; targets?: { expr?: string }[] }[] };

  it('queries only families that GET /metrics exposes, with balanced expressions', () => {
    const panels = dashboard.panels ?? [];
    expect(panels.length).toBeGreaterThan(10);
    for (const panel of panels) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) {
        const expr = String(target.expr);
        expect(balanced(expr), expr).toBe(true);
        for (const name of familiesOf(expr)) expect(families.has(name), `${String(panel.title)} reads ${name}`).toBe(true);
      }
    }
  });
});
