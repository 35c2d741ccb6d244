/**
 * The Prometheus text exposition (format 0.0.4) of GET /metrics: the
 * process-side families of metrics.ts and the queue gauges read from the
 * store (queue-gauges.ts), each with its HELP and TYPE.
 *
 * A scrape with the scrape token sees every tenant. A tenant's admin key sees
 * that tenant's series and the process-wide ones (HTTP, admission, commits,
 * the reaper, the database size), which carry no tenant label: tenants of one
 * coordinator do not trust each other, so no tenant reads another's names or
 * figures here.
 */

import type { Registry } from 'prom-client';
import type { QueueGauges } from './queue-gauges.js';

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

type Labels = Readonly<Record<string, string | number | undefined>>;

interface Sample {
  readonly name: string;
  readonly labels: Labels;
  readonly value: number;
}

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly samples: readonly Sample[];
}

/** What the in-process gauges read at scrape time (parked polls, admission). */
export interface ProcessGauges {
  readonly parkedLeasePolls: number;
  readonly parkedFinishWaits: number;
  readonly admissionInFlight: number;
  readonly admissionOverloaded: boolean;
}

export async function renderMetrics(registry: Registry, queue: QueueGauges, process: ProcessGauges, tenant: string | null): Promise<string> {
  const families: Family[] = [];
  for (const metric of await registry.getMetricsAsJSON()) {
    const type = metric.type as unknown as string;
    if (type !== 'counter' && type !== 'gauge' && type !== 'histogram') continue;
    const samples = (metric.values as readonly { value: number; labels: Labels; metricName?: string }[]).map((v) => ({
      name: v.metricName ?? metric.name,
      labels: v.labels,
      value: v.value,
    }));
    families.push({ name: metric.name, help: metric.help, type, samples });
  }
  families.push(...queueFamilies(queue), ...processFamilies(process));
  return families.map((family) => formatFamily(family, tenant)).join('');
}

function queueFamilies(queue: QueueGauges): Family[] {
  const per = (pick: (row: QueueGauges['tenants'][number]) => number): Sample[] =>
    queue.tenants.map((row) => ({ name: '', labels: { tenant: row.tenant }, value: pick(row) }));
  return [
    {
      name: 'leasehold_jobs',
      help: 'Jobs by tenant, kind (* = all kinds) and status, as the store counts them',
      type: 'gauge',
      samples: queue.tenants.flatMap((row) =>
        row.jobs.map((j) => ({ name: '', labels: { tenant: row.tenant, kind: j.kind, status: j.status }, value: j.count })),
      ),
    },
    { name: 'leasehold_jobs_available', help: 'Queued jobs (due or delayed)', type: 'gauge', samples: per((r) => r.available) },
    { name: 'leasehold_jobs_running', help: 'Jobs under a lease', type: 'gauge', samples: per((r) => r.running) },
    {
      name: 'leasehold_oldest_available_age_seconds',
      help: 'Age of the oldest queued job whose run-after time has passed; 0 when none',
      type: 'gauge',
      samples: per((r) => r.oldestAvailableAgeSeconds ?? 0),
    },
    {
      name: 'leasehold_storage_bytes',
      help: 'Payload, result, checkpoint and progress bytes stored for the tenant',
      type: 'gauge',
      samples: per((r) => r.storageBytes),
    },
    {
      name: 'leasehold_lease_expirations_total',
      help: 'Expired leases applied (the reaper and every lease transaction), whatever the job turned into',
      type: 'counter',
      samples: per((r) => r.leaseExpirations),
    },
    ...groupFamilies(queue),
    {
      name: 'leasehold_database_size_bytes',
      help: "Bytes the store holds (SQLite: the file's pages; PostgreSQL: its schema's tables with indexes and TOAST)",
      type: 'gauge',
      samples: [{ name: '', labels: {}, value: queue.databaseBytes }],
    },
  ];
}

/** Per group: the tenant's busiest groups one by one, the rest summed under kind and group `*` (queue-gauges.ts). */
function groupFamilies(queue: QueueGauges): Family[] {
  const samples = (pick: (g: { waiting: number; running: number }) => number): Sample[] =>
    queue.tenants.flatMap((row) => [
      ...row.groups.top.map((g) => ({ name: '', labels: { tenant: row.tenant, kind: g.kind, group: g.group }, value: pick(g) })),
      ...(row.groups.rest.groups > 0 ? [{ name: '', labels: { tenant: row.tenant, kind: '*', group: '*' }, value: pick(row.groups.rest) }] : []),
    ]);
  const which = 'by tenant, kind and group: the 20 groups of a tenant with the most jobs waiting or running, the rest summed as kind and group *';
  return [
    { name: 'leasehold_group_jobs_waiting', help: `Queued jobs of a group, ${which}`, type: 'gauge', samples: samples((g) => g.waiting) },
    { name: 'leasehold_group_jobs_running', help: `Running jobs of a group, ${which}`, type: 'gauge', samples: samples((g) => g.running) },
  ];
}

function processFamilies(p: ProcessGauges): Family[] {
  const one = (name: string, help: string, value: number): Family => ({ name, help, type: 'gauge', samples: [{ name: '', labels: {}, value }] });
  return [
    one('leasehold_lease_polls_parked', 'POST /lease requests parked in a long poll on this coordinator', p.parkedLeasePolls),
    one('leasehold_finish_waits_parked', 'GET /jobs/{id}?waitMs requests parked on this coordinator', p.parkedFinishWaits),
    one('leasehold_admission_in_flight', 'Counted requests (enqueue, batches, operator actions) in flight', p.admissionInFlight),
    one('leasehold_admission_overloaded', '1 while the admission delay rule refuses counted requests with 503', p.admissionOverloaded ? 1 : 0),
  ];
}

function formatFamily(family: Family, tenant: string | null): string {
  let text = `# HELP ${family.name} ${family.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n# TYPE ${family.name} ${family.type}\n`;
  for (const sample of family.samples) {
    const owner = sample.labels['tenant'];
    if (tenant !== null && owner !== undefined && owner !== tenant) continue;
    text += `${sample.name === '' ? family.name : sample.name}${formatLabels(sample.labels)} ${formatValue(sample.value)}\n`;
  }
  return text;
}

function formatLabels(labels: Labels): string {
  const parts: string[] = [];
  for (const [name, value] of Object.entries(labels)) {
    if (value === undefined) continue;
    parts.push(`${name}="${String(value).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  }
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}
