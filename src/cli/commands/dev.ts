/**
 * `leasehold dev` (what `npm start` runs): a coordinator on an embedded
 * SQLite file under ./.leasehold, development keys kept beside it (dev-keys.ts), an in-process worker
 * with two demo handlers and a couple of demo jobs, so a fresh checkout shows
 * the whole loop in one command. Not for production: the keys are printed.
 */

import { cliLogger } from '../logger.js';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import type { HandlerMap, JobContext } from '../../worker/handler.js';
import { sleep } from '../../worker/retry.js';
import { integerOption, stringOption, type Command } from '../command.js';
import { devKeysPath, loadOrCreateDevKeys } from '../dev-keys.js';
import { closeAll, listeningUrl, untilSignal } from './serve.js';

const TENANT = 'dev';

export const devCommand: Command = {
  name: 'dev',
  summary: 'Start a development coordinator with an in-process demo worker on ./.leasehold/dev.db.',
  usage: 'dev [--port N] [--db FILE]',
  details: [
    '--port N               port to try first (default 8080; any free port if taken)',
    '--db FILE              SQLite file (default ./.leasehold/dev.db)',
    '--log-level LEVEL      pino level (default warn)',
  ],
  options: { port: { type: 'string' }, db: { type: 'string' }, 'log-level': { type: 'string' } },
  forceExit: true,
  async run({ values, io }) {
    const preferredPort = integerOption(values, 'port', devCommand, { min: 0, max: 65_535 }) ?? 8080;
    const dbPath = resolve(stringOption(values, 'db') ?? '.leasehold/dev.db');
    mkdirSync(resolve(dbPath, '..'), { recursive: true });
    const [{ buildCoordinator }, { openSqliteStore }, { LeaseholdClient }, { Worker }] = await Promise.all([
      import('../../coordinator/app.js'),
      import('../open-store.js'),
      import('../../client/leasehold-client.js'),
      import('../../worker/worker.js'),
    ]);
    const logger = await cliLogger('leasehold-dev', stringOption(values, 'log-level') ?? 'warn');
    const host = '127.0.0.1';

    const created = !existsSync(dbPath);
    const store = await openSqliteStore(dbPath);
    const { keys, reused } = await loadOrCreateDevKeys(store, dbPath, TENANT);
    const admin = { key: keys.admin };
    const workerKey = { key: keys.worker };
    const app = await buildCoordinator({ store, logger });
    const port = (await isPortFree(preferredPort, host)) ? preferredPort : 0;
    await app.listen({ port, host });
    const url = listeningUrl(app, host);

    const adminClient = new LeaseholdClient({ baseUrl: url, apiKey: admin.key, connections: 2 });
    await adminClient.putKind('echo', { maxAttempts: 3 });
    await adminClient.putKind('sleep', { maxAttempts: 3 });
    const workerClient = new LeaseholdClient({ baseUrl: url, apiKey: workerKey.key, connections: 8 });
    const worker = new Worker({ client: workerClient, handlers: DEMO_HANDLERS, concurrency: 4, logger, workerId: 'dev-worker', secrets: [workerKey.key] });
    const running = worker.run();
    const first = await adminClient.enqueue({ kind: 'echo', payload: { hello: 'world' } });
    await adminClient.enqueue({ kind: 'sleep', payload: { ms: 2_000 } });

    io.out(`leasehold dev coordinator listening on ${url}${port !== preferredPort ? ` (port ${preferredPort} was taken)` : ''}`);
    io.out(`database      ${dbPath}${created ? ' (created)' : ''}`);
    io.out(`admin key     ${admin.key}   (development only; ${reused ? 'kept' : 'saved'} in ${devKeysPath(dbPath)})`);
    io.out(`worker key    ${workerKey.key}`);
    io.out('demo worker   running kinds echo, sleep (2 demo jobs enqueued)');
    io.out('');
    io.out('try:');
    io.out(
      `  curl -s -X POST ${url}/jobs -H 'Authorization: Bearer ${admin.key}' -H 'Idempotency-Key: demo-${randomUUID().slice(0, 8)}' ` +
        `-H 'Content-Type: application/json' -d '{"kind":"echo","payload":{"hello":"again"}}'`,
    );
    io.out(`  curl -s ${url}/jobs/${first.job.id} -H 'Authorization: Bearer ${admin.key}'`);
    io.out(`  LEASEHOLD_URL=${url} LEASEHOLD_KEY=${admin.key} npx leasehold stats`);
    io.out('Ctrl+C stops.');

    await untilSignal(logger);
    await worker.stop({ graceMs: 5_000 });
    await running.catch(() => undefined);
    await Promise.all([workerClient.close(), adminClient.close()]);
    await closeAll(app, store, logger);
    return 0;
  },
};

const DEMO_HANDLERS: HandlerMap = {
  echo: (ctx: JobContext<unknown>) => ({ echo: ctx.payload, attempt: ctx.attempt }),
  sleep: async (ctx: JobContext<{ ms?: number }>) => {
    const total = Math.min(Math.max(Number(ctx.payload?.ms ?? 1_000), 0), 60_000);
    for (let done = 0; done < total; done += 250) {
      ctx.progress({ done, total });
      await sleep(Math.min(250, total - done), ctx.signal);
    }
    return { sleptMs: total };
  },
};

function isPortFree(port: number, host: string): Promise<boolean> {
  if (port === 0) return Promise.resolve(true);
  return new Promise((resolveFree) => {
    const probe = createServer();
    probe.once('error', () => resolveFree(false));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolveFree(true)));
  });
}
