/**
 * `npm run overload`: open-loop overload of a real coordinator process.
 *
 * Each run starts `leasehold serve` on a fresh database and
 *   1. measures capacity: single POST /jobs, closed loop with --lanes in flight;
 *   2. measures the unloaded latency: open loop at --unloaded-share of capacity;
 *   3. offers open-loop load at each --levels multiple of capacity for
 *      --seconds, and reports per level the offered and admitted rates, the
 *      share of 503s, the admitted p50/p99 (from the scheduled send time) and
 *      its ratio to the unloaded p99, and the coordinator's peak RSS;
 *   4. checks that the database holds exactly the admitted jobs.
 * The table of each run is printed, then the median of every figure over the runs.
 * Columns: p50/p99 of the admitted (202) requests from their scheduled send
 * time; 'p99 from sent' the same from when the generator actually made the
 * request; '503 p99' the refusals' latency; RSS the coordinator's peak during
 * the level; CPU the share of one core each process got; 'lag p99' how late
 * the generator sent.
 *
 * The generator is this process, the coordinator a child process; on a
 * two-core machine they share the CPU, so the generator's own CPU share and
 * how late it sent (send lag) are printed beside the figures.
 *
 * Options: --db sqlite|postgres://… (default: a fresh SQLite file per run), --runs 3,
 * --seconds 5, --levels 1,2,5, --lanes 64, --connections 512, --unloaded-share 0.1, --payload-bytes 0,
 * --max-in-flight N|unlimited (passed to serve; default: serve's default).
 */

import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { LeaseholdClient } from '../src/client/index.js';
import { EnqueueGenerator, processPeakRssBytes, processRssBytes, type PhaseResult } from './open-loop.js';
import { createKey, median, startCoordinator } from './processes.js';
import { freshDatabase } from './fresh-db.js';

export interface OverloadOptions {
  /** 'sqlite' for a fresh file, or a postgres:// URL (a fresh schema is made in it). */
  readonly db: string;
  readonly seconds: number;
  readonly levels: readonly number[];
  readonly lanes: number;
  readonly connections: number;
  readonly unloadedShare: number;
  /** Padding bytes in each job's payload. */
  readonly payloadBytes: number;
  /** Passed to serve as --max-in-flight-requests; undefined keeps serve's default. */
  readonly maxInFlight: string | undefined;
}

export interface OverloadReport {
  readonly capacity: PhaseResult;
  readonly unloaded: PhaseResult;
  readonly levels: readonly (PhaseResult & { readonly multiple: number })[];
  /** Coordinator RSS after the capacity phase, before any overload. */
  readonly baselineRssBytes: number | null;
  /** The coordinator's peak RSS over its life (VmHWM). */
  readonly peakRssBytes: number | null;
  /** Jobs in the database minus 202 answers: 0 when nothing was lost or added. */
  readonly storedMinusAdmitted: number;
}

/** One run: a coordinator on a fresh database, capacity, unloaded latency, then each level. */
export async function runOverload(options: OverloadOptions): Promise<OverloadReport> {
  const { db, cleanup } = await freshDatabase(options.db, 'overload');
  const key = createKey(db, 'overload', 'producer', 'admin');
  const serveArgs = options.maxInFlight === undefined ? [] : ['--max-in-flight-requests', options.maxInFlight];
  const { url, process: coordinator } = await startCoordinator(db, serveArgs);
  const pid = coordinator.child.pid ?? null;
  const generator = new EnqueueGenerator({ url, key, connections: options.connections, payloadBytes: options.payloadBytes }, `overload-${Date.now()}`, pid);
  const admin = new LeaseholdClient({ baseUrl: url, apiKey: key, connections: 2 });
  try {
    const warmUp = await generator.closedLoop('warm-up', options.lanes, 1_000);
    const capacity = await generator.closedLoop('capacity', options.lanes, options.seconds * 1000);
    const baselineRssBytes = pid === null ? null : processRssBytes(pid);
    const unloadedRate = Math.max(1, capacity.admittedPerSecond * options.unloadedShare);
    const unloaded = await generator.openLoop('unloaded', unloadedRate, options.seconds * 1000, 7);
    const levels: (PhaseResult & { multiple: number })[] = [];
    for (const [i, multiple] of options.levels.entries()) {
      const result = await generator.openLoop(`${multiple}x`, capacity.admittedPerSecond * multiple, options.seconds * 1000, 11 + i);
      levels.push({ ...result, multiple });
    }
    const stats = await admin.stats();
    const stored = Object.values(stats.counts).reduce((sum, n) => sum + n, 0);
    const admitted = [warmUp, capacity, unloaded, ...levels].reduce((sum, phase) => sum + phase.admitted, 0);
    return {
      capacity,
      unloaded,
      levels,
      baselineRssBytes,
      peakRssBytes: pid === null ? null : processPeakRssBytes(pid),
      storedMinusAdmitted: stored - admitted,
    };
  } finally {
    await generator.close();
    await admin.close();
    await coordinator.stop('SIGKILL');
    await cleanup();
  }
}

const MB = 1024 * 1024;
const fixed = (value: number | null, digits = 1): string => (value === null ? '—' : value.toFixed(digits));

/** The per-level table of one report (or of the medians). */
export function formatReport(report: OverloadReport): string {
  const unloadedP99 = report.unloaded.admittedP99Ms;
  const rows = [report.unloaded, ...report.levels].map((phase) => {
    const refusedShare = phase.sent === 0 ? 0 : phase.refused / phase.sent;
    const ratio = phase.admittedP99Ms === null || unloadedP99 === null ? null : phase.admittedP99Ms / unloadedP99;
    const other =
      Object.entries(phase.otherStatuses)
        .map(([status, n]) => `${status}:${n}`)
        .join(' ') || '0';
    return [
      phase.label,
      fixed(phase.offeredPerSecond, 0),
      fixed(phase.admittedPerSecond, 0),
      `${(refusedShare * 100).toFixed(1)}%`,
      fixed(phase.admittedP50Ms),
      fixed(phase.admittedP99Ms),
      fixed(ratio, 2),
      fixed(phase.admittedSinceSentP99Ms),
      fixed(phase.refusedP99Ms),
      other,
      fixed(phase.coordinatorPeakRssBytes === null ? null : phase.coordinatorPeakRssBytes / MB, 0),
      `${fixed(phase.coordinatorCpuShare === null ? null : phase.coordinatorCpuShare * 100, 0)}%`,
      `${(phase.generatorCpuShare * 100).toFixed(0)}%`,
      fixed(phase.sendLagP99Ms),
    ];
  });
  const header = [
    'level',
    'offered/s',
    'admitted/s',
    '503',
    'p50 ms',
    'p99 ms',
    'p99/unloaded',
    'p99 from sent',
    '503 p99 ms',
    'other',
    'RSS MB',
    'coord CPU',
    'gen CPU',
    'lag p99',
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padStart(widths[i] as number)).join('  ');
  return [
    `capacity (closed loop): ${report.capacity.admittedPerSecond.toFixed(0)} jobs/s, p99 ${fixed(report.capacity.admittedP99Ms)} ms, 503s ${report.capacity.refused}`,
    line(header),
    ...rows.map(line),
    `coordinator RSS: ${fixed(report.baselineRssBytes === null ? null : report.baselineRssBytes / MB, 0)} MB after capacity, peak ${fixed(report.peakRssBytes === null ? null : report.peakRssBytes / MB, 0)} MB; database jobs - 202s = ${report.storedMinusAdmitted}`,
  ].join('\n');
}

/** A report whose every figure is the median over `reports` (ids dropped). */
export function medianReport(reports: readonly OverloadReport[]): OverloadReport {
  const mid = (pick: (r: OverloadReport) => number | null): number | null => {
    const values = reports.map(pick).filter((v): v is number => v !== null);
    return values.length === 0 ? null : median(values);
  };
  const phase = (pick: (r: OverloadReport) => PhaseResult): PhaseResult => {
    const first = pick(reports[0] as OverloadReport);
    const otherStatuses: Record<string, number> = {};
    for (const status of new Set(reports.flatMap((r) => Object.keys(pick(r).otherStatuses)))) {
      otherStatuses[status] = mid((r) => pick(r).otherStatuses[status] ?? 0) ?? 0;
    }
    return {
      label: first.label,
      offeredPerSecond: mid((r) => pick(r).offeredPerSecond),
      durationMs: mid((r) => pick(r).durationMs) ?? 0,
      sent: mid((r) => pick(r).sent) ?? 0,
      admitted: mid((r) => pick(r).admitted) ?? 0,
      admittedPerSecond: mid((r) => pick(r).admittedPerSecond) ?? 0,
      refused: mid((r) => pick(r).refused) ?? 0,
      malformedRefusals: mid((r) => pick(r).malformedRefusals) ?? 0,
      otherStatuses,
      admittedP50Ms: mid((r) => pick(r).admittedP50Ms),
      admittedP99Ms: mid((r) => pick(r).admittedP99Ms),
      admittedMaxMs: mid((r) => pick(r).admittedMaxMs),
      admittedSinceSentP99Ms: mid((r) => pick(r).admittedSinceSentP99Ms),
      refusedP99Ms: mid((r) => pick(r).refusedP99Ms),
      sendLagP99Ms: mid((r) => pick(r).sendLagP99Ms),
      generatorCpuShare: mid((r) => pick(r).generatorCpuShare) ?? 0,
      coordinatorCpuShare: mid((r) => pick(r).coordinatorCpuShare),
      coordinatorPeakRssBytes: mid((r) => pick(r).coordinatorPeakRssBytes),
      admittedIds: [],
    };
  };
  const first = reports[0] as OverloadReport;
  return {
    capacity: phase((r) => r.capacity),
    unloaded: phase((r) => r.unloaded),
    levels: first.levels.map((level, i) => ({ ...phase((r) => r.levels[i] as PhaseResult), multiple: level.multiple })),
    baselineRssBytes: mid((r) => r.baselineRssBytes),
    peakRssBytes: mid((r) => r.peakRssBytes),
    storedMinusAdmitted: mid((r) => r.storedMinusAdmitted) ?? 0,
  };
}

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: {
      db: { type: 'string', default: 'sqlite' },
      runs: { type: 'string', default: '3' },
      seconds: { type: 'string', default: '5' },
      levels: { type: 'string', default: '1,2,5' },
      lanes: { type: 'string', default: '64' },
      connections: { type: 'string', default: '512' },
      'unloaded-share': { type: 'string', default: '0.1' },
      'payload-bytes': { type: 'string', default: '0' },
      'max-in-flight': { type: 'string' },
    },
  });
  const runs = Number(args.runs);
  const options: OverloadOptions = {
    db: args.db,
    seconds: Number(args.seconds),
    levels: args.levels.split(',').map(Number),
    lanes: Number(args.lanes),
    connections: Number(args.connections),
    unloadedShare: Number(args['unloaded-share']),
    payloadBytes: Number(args['payload-bytes']),
    maxInFlight: args['max-in-flight'],
  };
  const positive = [runs, options.seconds, options.lanes, options.connections, options.unloadedShare, ...options.levels];
  if (positive.some((v) => !Number.isFinite(v) || v <= 0) || !Number.isInteger(runs) || !(options.payloadBytes >= 0)) {
    process.stderr.write(
      'overload: --runs, --seconds, --levels, --lanes, --connections and --unloaded-share must be positive numbers, --payload-bytes a size\n',
    );
    process.exit(2);
  }
  console.log(
    `overload: ${cpus().length} cores, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(
        ' ',
      )}; db ${options.db === 'sqlite' ? 'sqlite' : 'postgres'}, ${options.seconds} s per level, ${runs} runs, ${options.lanes} lanes for capacity, ${options.connections} connections, payload padding ${options.payloadBytes} B, serve --max-in-flight-requests ${options.maxInFlight ?? 'default'}`,
  );
  const reports: OverloadReport[] = [];
  for (let run = 1; run <= runs; run++) {
    const report = await runOverload(options);
    reports.push(report);
    console.log(`\nrun ${run}\n${formatReport(report)}`);
  }
  if (runs > 1) console.log(`\nmedian of ${runs} runs\n${formatReport(medianReport(reports))}`);
  console.log(
    `load average after: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href) await main();
