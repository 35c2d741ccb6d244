/**
 * `leasehold worker`: runs the handlers of a module against a coordinator.
 * SIGINT or SIGTERM stops leasing at once, lets running handlers finish within
 * the grace period and exits 0 without resetting any lease; a second signal
 * exits at once (the leases still decide).
 */

import { LIMITS } from '../../protocol/limits.js';
import { cliLogger } from '../logger.js';
import { integerOption, requireOption, stringOption, type Command } from '../command.js';
import { loadHandlers } from '../load-handlers.js';

export const workerCommand: Command = {
  name: 'worker',
  summary: 'Run job handlers from a module: lease, run, renew, complete or fail.',
  usage: 'worker --url U --key K --handlers ./handlers.js [--concurrency N] [--lease-ms N] [--wait-ms N] [--grace-ms N] [--worker-id ID]',
  details: [
    '--url URL              coordinator URL (default: $LEASEHOLD_URL)',
    '--key KEY              worker API key (default: $LEASEHOLD_KEY)',
    '--handlers FILE        module whose default export (or export "handlers") maps kinds to handlers',
    '--concurrency N        handlers running at once (default 8)',
    '--lease-ms N           lease length, renewed every third (default 30000)',
    '--wait-ms N            long-poll wait per lease request (default 10000)',
    '--grace-ms N           on SIGINT/SIGTERM, time for running handlers to finish (default 10000)',
    '--worker-id ID         name in attempt history (default host-pid-random)',
    '--log-level LEVEL      pino level (default info)',
  ],
  options: {
    url: { type: 'string' },
    key: { type: 'string' },
    handlers: { type: 'string' },
    concurrency: { type: 'string' },
    'lease-ms': { type: 'string' },
    'wait-ms': { type: 'string' },
    'grace-ms': { type: 'string' },
    'worker-id': { type: 'string' },
    'log-level': { type: 'string' },
  },
  // Exit once stopped even if an abandoned handler still holds a timer: its lease decides, not this process.
  forceExit: true,
  async run({ values, io }) {
    const baseUrl = requireOption(values, 'url', workerCommand, io.env['LEASEHOLD_URL']);
    const apiKey = requireOption(values, 'key', workerCommand, io.env['LEASEHOLD_KEY']);
    const handlersFile = requireOption(values, 'handlers', workerCommand);
    const concurrency = integerOption(values, 'concurrency', workerCommand, { min: 1, max: LIMITS.maxLeaseBatch }) ?? 8;
    const leaseMs = integerOption(values, 'lease-ms', workerCommand, { min: LIMITS.minLeaseMs, max: LIMITS.maxLeaseMs });
    const waitMs = integerOption(values, 'wait-ms', workerCommand, { min: 0, max: LIMITS.maxWaitMs });
    const graceMs = integerOption(values, 'grace-ms', workerCommand, { min: 0, max: 24 * 3_600_000 });
    const workerId = stringOption(values, 'worker-id');
    const handlers = await loadHandlers(handlersFile, process.cwd());
    const [{ LeaseholdClient }, { Worker }] = await Promise.all([import('../../client/leasehold-client.js'), import('../../worker/worker.js')]);
    const logger = await cliLogger('leasehold-worker', stringOption(values, 'log-level') ?? 'info');
    const client = new LeaseholdClient({ baseUrl, apiKey, connections: Math.min(concurrency + 4, 64) });
    const worker = new Worker({
      client,
      handlers,
      concurrency,
      logger,
      secrets: [apiKey],
      ...(leaseMs === undefined ? {} : { leaseMs }),
      ...(waitMs === undefined ? {} : { waitMs }),
      ...(graceMs === undefined ? {} : { shutdownGraceMs: graceMs }),
      ...(workerId === undefined ? {} : { workerId }),
    });
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      signals += 1;
      if (signals > 1) {
        logger.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      logger.info({ signal }, 'stopping: no new leases, waiting for running handlers');
      logger.flush();
      void worker.stop();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    logger.info({ workerId: worker.workerId, kinds: Object.keys(handlers), concurrency }, 'worker started');
    logger.flush(); // Whoever started the process may wait for this line.
    try {
      await worker.run();
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await client.close();
    }
    return 0;
  },
};
