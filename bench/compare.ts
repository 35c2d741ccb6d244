/**
 * `npm run bench:peers`: the library mode and its peers in one sitting, and
 * the ratios of issue 15's targets (bench/peer-ratios.ts).
 *
 * Installs the peers into bench/peers/node_modules with `npm install
 * --no-save` when they are missing (they are not dependencies of the
 * project), then for each round runs, one after the other on this machine:
 *
 *   leasehold, SQLite, 2 worker processes   npm run bench -- --mode embedded --workers 2
 *   leasehold, SQLite, 1 worker process     … --workers 1 --only end-to-end
 *   BullMQ on Redis, appendfsync always     node bench/peers/bullmq.mjs
 *   leasehold, PostgreSQL                   … --db <url> --only end-to-end
 *   graphile-worker                         node bench/peers/graphile-worker.mjs --db <url>
 *
 * and prints each target's ratio per round and the median over rounds. Every
 * script's own output goes through as it runs. Options: --runs 3 (runs per
 * script, whose median it reports), --jobs 20000, --rounds 1,
 * --db postgres://postgres@127.0.0.1:5432/test (or DATABASE_URL), --no-postgres.
 */

import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { figuresOf, verdicts, type Sitting } from './peer-ratios.js';
import { ROOT } from './processes.js';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    jobs: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '1' },
    db: { type: 'string', default: process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test' },
    'no-postgres': { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(args.rounds);
for (const name of ['runs', 'jobs', 'rounds'] as const) {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < 1) {
    process.stderr.write(`bench:peers: --${name} must be a positive integer\n`);
    process.exit(2);
  }
}

const PEERS = join(ROOT, 'bench', 'peers');
const PEER_PACKAGES = ['bullmq@5', 'graphile-worker@0.16', 'pg@8'];

function installPeers(): void {
  const missing = ['bullmq', 'graphile-worker', 'pg'].filter((name) => !existsSync(join(PEERS, 'node_modules', name, 'package.json')));
  if (missing.length === 0) return;
  console.log(`installing the peers into bench/peers (missing: ${missing.join(', ')}): npm install --no-save ${PEER_PACKAGES.join(' ')}`);
  const installed = spawnSync('npm', ['install', '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--prefix', PEERS, ...PEER_PACKAGES], {
    stdio: 'inherit',
  });
  if (installed.status !== 0) throw new Error('npm install of the peers failed');
}

/** Runs a script with its output passed through (graphile-worker's per-job log lines dropped), and returns its figures. */
async function figures(label: string, command: readonly string[]): Promise<Record<string, number> | undefined> {
  console.log(`\n== ${label}: ${command.join(' ')}`);
  const child = spawn(process.execPath, command, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  let partial = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    output += chunk;
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (!line.includes('Completed task')) console.log(line);
  });
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  if (code !== 0) {
    console.log(`${label}: exited with ${String(code)}; its figures are left out`);
    return undefined;
  }
  return figuresOf(output);
}

const common = ['--runs', String(args.runs), '--jobs', String(args.jobs)];
const embedded = (extra: readonly string[]): string[] => [join(ROOT, 'dist', 'bench', 'run.js'), '--mode', 'embedded', ...common, ...extra];

async function sitting(): Promise<Sitting> {
  const withPostgres = args['no-postgres'] !== true;
  const found: { -readonly [K in keyof Sitting]: Sitting[K] } = {};
  const put = <K extends keyof Sitting>(key: K, value: Sitting[K] | undefined): void => {
    if (value !== undefined) found[key] = value;
  };
  put('sqlite', await figures('leasehold library, SQLite, 2 worker processes', embedded(['--workers', '2', '--only', 'enqueue-single,end-to-end,latency'])));
  put('sqliteOneProcess', await figures('leasehold library, SQLite, 1 worker process', embedded(['--workers', '1', '--only', 'end-to-end'])));
  put('bullmq', await figures('BullMQ, Redis appendfsync always', [join(PEERS, 'bullmq.mjs'), ...common]));
  if (withPostgres) {
    put('postgres', await figures('leasehold library, PostgreSQL', embedded(['--db', String(args.db), '--only', 'end-to-end'])));
    put('graphile', await figures('graphile-worker', [join(PEERS, 'graphile-worker.mjs'), '--db', String(args.db), ...common]));
  }
  return found;
}

installPeers();
console.log(
  `bench:peers: ${cpus().length} cores, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}; ${ROUNDS} round(s), ${String(args.runs)} runs of ${String(args.jobs)} jobs per script`,
);
const sittings: Sitting[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  console.log(`\n### round ${round} of ${ROUNDS}`);
  sittings.push(await sitting());
}

console.log(`\nratios (leasehold / peer; each round's medians, then the median over rounds):`);
for (const verdict of verdicts(sittings)) {
  const { target, ratios, ratio, met } = verdict;
  const bound = `${target.better === 'higher' ? '≥' : '≤'} ${target.bound}×`;
  const shown = ratio === undefined ? 'not measured' : `${ratio.toFixed(2)}×  (${ratios.map((r) => `${r.toFixed(2)}×`).join(', ')})`;
  const mark = met === undefined ? '' : met ? 'met' : 'missed';
  console.log(`  ${target.name.padEnd(48)} ${shown.padEnd(36)} target ${bound.padEnd(6)} ${mark}`);
}
