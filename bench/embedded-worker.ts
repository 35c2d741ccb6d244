/**
 * One worker process of `npm run bench -- --mode embedded`: a library Queue
 * on the bench's database and a Worker running no-op handlers, until SIGTERM.
 * Prints `ready` once leasing.
 *
 *   node dist/bench/embedded-worker.js <db> <concurrency> <worker id>
 */

import { openQueue, Worker } from '../src/index.js';
import { hostClockMs } from './host-clock.js';

const [db, concurrencyText, workerId] = process.argv.slice(2);
if (db === undefined || concurrencyText === undefined || workerId === undefined) {
  process.stderr.write('usage: embedded-worker <db> <concurrency> <worker id>\n');
  process.exit(2);
}
const queue = await openQueue({ db, tenant: 'bench' });
const worker = new Worker({
  queue,
  concurrency: Number(concurrencyText),
  workerId,
  waitMs: 5_000,
  handlers: { noop: () => null, warm: () => null, stamp: () => ({ handlerStartedAt: hostClockMs() }) },
});
const running = worker.run();
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void (async () => {
    await worker.stop({ graceMs: 1_000 });
    await running;
    await queue.close();
    process.exit(0);
  })();
});
