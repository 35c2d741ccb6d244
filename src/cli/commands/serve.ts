/**
 * `leasehold serve`: checks the configuration (--config and the setting
 * flags, see serve-config.ts), opens the store named by --db, builds the
 * coordinator and listens. SIGINT/SIGTERM close the HTTP server first (parked long polls
 * answer 204, requests in flight finish) and the store after it, so no
 * acknowledged write is cut off.
 */

import { cliLogger } from '../logger.js';
import type { Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import type { Store } from '../../store/store.js';
import { integerOption, requireOption, stringOption, UsageError, type Command } from '../command.js';
import { isPostgresUrl } from '../../store/database-url.js';
import { describeDb, isNewSqliteFile, openStore } from '../open-store.js';
import { CONFIG_DETAILS, CONFIG_OPTIONS, serveConfig } from '../serve-config.js';
import { listenError } from '../error-text.js';

export const serveCommand: Command = {
  name: 'serve',
  summary: 'Run the coordinator over a SQLite file or a PostgreSQL database.',
  usage: 'serve --db FILE|postgres://… --port N [--host H] [--config FILE.json] [setting flags]',
  details: [
    '--db FILE|URL          SQLite file or postgres:// URL (default: $LEASEHOLD_DB)',
    '--port N               port to listen on (0: any free port; default $PORT or 8080)',
    '--host H               address to bind (default 127.0.0.1)',
    '--log-level LEVEL      pino level (default info)',
    "--sqlite-busy-timeout-ms N  how long a write waits for another process's write lock on the SQLite file before it answers 503 (default 5000); the wait does not hold other requests",
    ...CONFIG_DETAILS,
  ],
  options: {
    db: { type: 'string' },
    port: { type: 'string' },
    host: { type: 'string' },
    'log-level': { type: 'string' },
    'sqlite-busy-timeout-ms': { type: 'string' },
    ...CONFIG_OPTIONS,
  },
  forceExit: true,
  async run({ values, io }) {
    const db = requireOption(values, 'db', serveCommand, io.env['LEASEHOLD_DB']);
    const port = integerOption(values, 'port', serveCommand, { min: 0, max: 65_535 }) ?? defaultPort(io.env['PORT']);
    const host = stringOption(values, 'host') ?? '127.0.0.1';
    const sqliteBusyTimeoutMs = integerOption(values, 'sqlite-busy-timeout-ms', serveCommand, { min: 0, max: 600_000 });
    if (sqliteBusyTimeoutMs !== undefined && isPostgresUrl(db))
      throw new UsageError('--sqlite-busy-timeout-ms applies to a SQLite file, not to PostgreSQL', serveCommand);
    // Before the store is opened: a configuration mistake should not touch the database.
    const config = await serveConfig(values, serveCommand);
    // Loaded here, not at the top: `leasehold --help` should not pay for Fastify.
    const { buildCoordinator } = await import('../../coordinator/app.js');
    const logger = await cliLogger('leasehold', stringOption(values, 'log-level') ?? 'info');
    const created = isNewSqliteFile(db);
    const store = await openStore(db, { warm: true, ...(sqliteBusyTimeoutMs === undefined ? {} : { sqliteBusyTimeoutMs }) });
    if (created) logger.info({ db: describeDb(db) }, 'created a new SQLite database');
    let app: FastifyInstance;
    try {
      app = await buildCoordinator({ store, logger, config });
      await app.listen({ port, host }).catch((error: unknown) => Promise.reject(listenError(error, host, port)));
    } catch (error) {
      await store.close();
      throw error;
    }
    logger.info(
      { db: describeDb(db), backend: store.backend, config, ...(sqliteBusyTimeoutMs === undefined ? {} : { sqliteBusyTimeoutMs }) },
      `listening on ${listeningUrl(app, host)}`,
    );
    logger.flush(); // Whoever started the process waits for this line.
    await untilSignal(logger);
    await closeAll(app, store, logger);
    return 0;
  },
};

function defaultPort(env: string | undefined): number {
  return env !== undefined && /^\d+$/.test(env) && Number(env) <= 65_535 ? Number(env) : 8080;
}

/** The URL the server actually listens on (the real port when 0 was asked for). */
export function listeningUrl(app: FastifyInstance, host: string): string {
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${shownHost}:${port}`;
}

/** Resolves on the first SIGINT or SIGTERM; a second one exits at once. */
export function untilSignal(logger: Logger): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.once('SIGINT', () => process.exit(1));
      process.once('SIGTERM', () => process.exit(1));
      logger.info({ signal }, 'shutting down');
      resolve(signal);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

export async function closeAll(app: FastifyInstance, store: Store, logger: Logger): Promise<void> {
  await app.close();
  await store.close();
  logger.info('stopped');
}
