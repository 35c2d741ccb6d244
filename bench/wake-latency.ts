/**
 * Enqueue-to-lease latency of long polls with a kinds filter, on an idle
 * queue and beside the loads that must not slow it (docs/SCALING.md):
 *
 *   empty          one job of kind `wake` every 5 ms onto an empty queue
 *   backlog        the same beside --backlog queued jobs of another kind (same tenant)
 *   tenant-polls   the same beside another tenant's --polls parked long polls
 *
 * A real `leasehold serve` process on a fresh database; in this process,
 * --loops lease loops (POST /lease, kinds ['wake'], max 4, waitMs 1000, over
 * an undici pool) take the jobs and complete them. The figure is the time
 * from sending the enqueue to the lease's answer arriving, p50 and p99 of
 * --jobs jobs (after 400 untimed ones at the same pace), with each
 * scenario's p50 as a ratio to the empty queue's.
 *
 *   idle           an idle coordinator holding another tenant's --polls parked polls:
 *                  its CPU and the database server's over --seconds
 *
 *   npm run bench:wake -- [--db sqlite|postgres://…] [--runs 3] [--jobs 1000] [--only empty,backlog,tenant-polls,idle]
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { freshDatabase } from './fresh-db.js';
import { createKey, median, percentile, startCoordinator } from './processes.js';

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: 'sqlite' },
    runs: { type: 'string', default: '3' },
    jobs: { type: 'string', default: '1000' },
    loops: { type: 'string', default: '8' },
    backlog: { type: 'string', default: '20000' },
    polls: { type: 'string', default: '1000' },
    only: { type: 'string', default: 'empty,backlog,tenant-polls,idle' },
    seconds: { type: 'string', default: '20' },
  },
});
const RUNS = Number(args.runs);
const JOBS = Number(args.jobs);
const LOOPS = Number(args.loops);
const BACKLOG = Number(args.backlog);
const POLLS = Number(args.polls);
const SECONDS = Number(args.seconds);
/** Jobs sent before the timed ones, at the same pace. */
const WARM_UP = 400;
const SCENARIOS = ['empty', 'backlog', 'tenant-polls'] as const;
type Scenario = (typeof SCENARIOS)[number];
const selected = (args.only ?? '').split(',').filter((s): s is Scenario => (SCENARIOS as readonly string[]).includes(s));
const idleSelected = (args.only ?? '').split(',').includes('idle');

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Another process holding `polls` parked long polls of its tenant (kinds filters over ten kinds). */
const PARKED_POLLS_CHILD = `
const http = require('node:http');
const [port, key, polls] = process.argv.slice(1);
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(polls) });
let parked = 0;
const poll = (i) => {
  const body = JSON.stringify({ workerId: 'parked-' + i, kinds: ['k-' + (i % 10)], waitMs: 60000 });
  const req = http.request({ port, method: 'POST', path: '/lease', agent,
    headers: { authorization: 'Bearer ' + key, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
  req.on('response', (res) => { res.resume(); res.on('end', () => poll(i)); });
  req.on('error', () => undefined);
  req.end(body);
};
for (let i = 0; i < Number(polls); i++) poll(i);
process.send('started');
process.on('message', () => process.exit(0));
`;

interface Http {
  readonly pool: Pool;
  call(key: string, method: 'POST' | 'GET', path: string, body?: unknown, idempotencyKey?: string): Promise<{ status: number; json: unknown }>;
}

function http(url: string): Http {
  const pool = new Pool(url, { connections: 64, pipelining: 1 });
  return {
    pool,
    async call(key, method, path, body, idempotencyKey) {
      const response = await pool.request({
        method,
        path,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.body.text();
      return { status: response.statusCode, json: text === '' ? null : (JSON.parse(text) as unknown) };
    },
  };
}

interface Leased {
  readonly id: string;
  readonly token: string;
}

async function measure(scenario: Scenario): Promise<{ p50: number; p99: number }> {
  const fresh = await freshDatabase(args.db ?? 'sqlite', 'wake');
  const adminKey = createKey(fresh.db, 'wake', 'admin', 'admin');
  const workerKey = createKey(fresh.db, 'wake', 'worker', 'worker');
  const otherWorkerKey = createKey(fresh.db, 'wake-other', 'worker', 'worker');
  const coordinator = await startCoordinator(fresh.db);
  const client = http(coordinator.url);
  let parked: ChildProcess | null = null;
  try {
    if (scenario === 'backlog') {
      for (let from = 0; from < BACKLOG; from += 500) {
        const jobs = Array.from({ length: Math.min(500, BACKLOG - from) }, (_, i) => ({
          kind: 'other',
          payload: { i: from + i },
          idempotencyKey: `other-${from + i}`,
        }));
        const answer = await client.call(adminKey, 'POST', '/jobs/batch', { jobs });
        if (answer.status !== 202 && answer.status !== 200) throw new Error(`batch enqueue answered ${answer.status}`);
      }
    }
    if (scenario === 'tenant-polls') {
      const port = new URL(coordinator.url).port;
      parked = spawn(process.execPath, ['-e', PARKED_POLLS_CHILD, port, otherWorkerKey, String(POLLS)], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
      await new Promise((resolve) => parked?.once('message', resolve));
      // Let every poll reach the coordinator and park.
      await sleep(2000);
    }
    const sentAt = new Map<string, number>();
    const leasedAt = new Map<string, number>();
    let done = false;
    let leasedCount = 0;
    const allLeased = new Promise<void>((resolve) => {
      const loop = async (n: number): Promise<void> => {
        while (!done) {
          const answer = await client.call(workerKey, 'POST', '/lease', { workerId: `w-${n}`, kinds: ['wake'], max: 4, waitMs: 1000, leaseMs: 30000 });
          const receivedAt = performance.now();
          const jobs = (answer.json as { jobs?: Leased[] } | null)?.jobs ?? [];
          for (const job of jobs) {
            leasedAt.set(job.id, receivedAt);
            leasedCount++;
            client.call(workerKey, 'POST', `/jobs/${job.id}/complete`, { token: job.token, result: null }).catch(() => undefined);
          }
          if (leasedCount >= JOBS + WARM_UP) resolve();
        }
      };
      // The coordinator stops once every job was leased: the loops' polls still in flight then fail, unheard.
      for (let n = 0; n < LOOPS; n++) loop(n).catch(() => undefined);
    });
    // Untimed jobs first, at the same pace: the loops parked, the coordinator's code compiled, the statistics
    // of the new tables taken (the reaper's tick analyzes a table that changed) before anything is timed.
    for (let i = 0; i < WARM_UP; i++) {
      await client.call(adminKey, 'POST', '/jobs', { kind: 'wake', payload: { i } }, `warm-up-${i}`);
      await sleep(5);
    }
    await sleep(200);
    const pending: Promise<void>[] = [];
    for (let i = 0; i < JOBS; i++) {
      const at = performance.now();
      pending.push(
        client.call(adminKey, 'POST', '/jobs', { kind: 'wake', payload: { i } }, `wake-${i}`).then((answer) => {
          const id = (answer.json as { id: string }).id;
          sentAt.set(id, at);
        }),
      );
      await sleep(5);
    }
    await Promise.all(pending);
    await allLeased;
    done = true;
    // A lease's answer can arrive before the enqueue's own (the wake-up comes first): pair them by id at the end.
    const latencies = [...sentAt].map(([id, at]) => (leasedAt.get(id) ?? Number.NaN) - at);
    if (latencies.some(Number.isNaN)) throw new Error('a job was enqueued but never leased');
    return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
  } finally {
    parked?.send('stop');
    parked?.kill('SIGKILL');
    await coordinator.process.stop();
    await client.pool.close();
    await fresh.cleanup();
  }
}

/** utime + stime of a process in clock ticks (USER_HZ, 100 on Linux); 0 once it is gone. */
function processTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** The database server's processes (every postgres process of the machine; none for SQLite). */
function serverPids(): number[] {
  if (args.db === 'sqlite') return [];
  const found = spawnSync('pgrep', ['-x', 'postgres'], { encoding: 'utf8' });
  return found.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map(Number);
}

/**
 * An idle coordinator holding another process's --polls parked long polls (kinds filters over ten
 * kinds, waitMs 60 s): the CPU of the coordinator process and of the database server over --seconds,
 * as a percentage of one core.
 */
async function idleCpu(): Promise<{ coordinator: number; server: number }> {
  const fresh = await freshDatabase(args.db ?? 'sqlite', 'wake-idle');
  const workerKey = createKey(fresh.db, 'wake', 'worker', 'worker');
  const coordinator = await startCoordinator(fresh.db);
  const pid = coordinator.process.child.pid ?? 0;
  const port = new URL(coordinator.url).port;
  const parked = spawn(process.execPath, ['-e', PARKED_POLLS_CHILD, port, workerKey, String(POLLS)], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  try {
    await new Promise((resolve) => parked.once('message', resolve));
    // Parking settles (each poll's empty lease and next-due read, keep-alive sockets, the burst's GC).
    await sleep(3000);
    const servers = serverPids();
    const serverTicks = (): number => servers.reduce((sum, p) => sum + processTicks(p), 0);
    const before = { coordinator: processTicks(pid), server: serverTicks(), at: performance.now() };
    await sleep(SECONDS * 1000);
    const wallTicks = ((performance.now() - before.at) / 1000) * 100;
    return {
      coordinator: ((processTicks(pid) - before.coordinator) / wallTicks) * 100,
      server: ((serverTicks() - before.server) / wallTicks) * 100,
    };
  } finally {
    parked.kill('SIGKILL');
    await coordinator.process.stop();
    await fresh.cleanup();
  }
}

async function main(): Promise<void> {
  const p50s = new Map<Scenario, number[]>();
  const p99s = new Map<Scenario, number[]>();
  process.stdout.write(
    `wake latency: db=${args.db === 'sqlite' ? 'sqlite' : 'postgres'}, ${LOOPS} loops (max 4, waitMs 1000, kinds filter), ${JOBS} jobs 5 ms apart, runs=${RUNS}\n`,
  );
  for (let run = 1; run <= RUNS; run++) {
    for (const scenario of selected) {
      const figure = await measure(scenario);
      (p50s.get(scenario) ?? p50s.set(scenario, []).get(scenario))?.push(figure.p50);
      (p99s.get(scenario) ?? p99s.set(scenario, []).get(scenario))?.push(figure.p99);
      process.stdout.write(`  run ${run} ${scenario.padEnd(13)} p50 ${figure.p50.toFixed(2)} ms  p99 ${figure.p99.toFixed(2)} ms\n`);
    }
  }
  const idle: { coordinator: number; server: number }[] = [];
  if (idleSelected) {
    for (let run = 1; run <= RUNS; run++) {
      const figure = await idleCpu();
      idle.push(figure);
      process.stdout.write(
        `  run ${run} idle with ${POLLS} parked polls: coordinator ${figure.coordinator.toFixed(2)}% of a core, server ${figure.server.toFixed(2)}%\n`,
      );
    }
  }
  const empty = p50s.get('empty');
  process.stdout.write(`medians of ${RUNS}:\n`);
  for (const scenario of selected) {
    const p50 = median(p50s.get(scenario) ?? []);
    const ratio = empty === undefined ? '' : `  ratio to empty ${(p50 / median(empty)).toFixed(2)}`;
    process.stdout.write(`  ${scenario.padEnd(13)} p50 ${p50.toFixed(2)} ms  p99 ${median(p99s.get(scenario) ?? []).toFixed(2)} ms${ratio}\n`);
  }
  if (idle.length > 0) {
    const total = median(idle.map((figure) => figure.coordinator + figure.server));
    process.stdout.write(`  idle          ${total.toFixed(2)}% of a core, coordinator and server (${POLLS} parked polls, ${SECONDS} s)\n`);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`wake-latency failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
