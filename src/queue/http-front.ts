/**
 * The HTTP API as a Fastify plugin over a library Queue, for an application
 * that serves it from its own instance:
 *
 *   app.register(leaseholdRoutes, { queue, prefix: '/queue' })
 *
 * The routes, validation, authentication (API keys in the store, e.g. from
 * `queue.createApiKey`), admission and error answers are the coordinator's,
 * installed in the plugin's encapsulated context, so the application's own
 * routes, 404s and hooks stay its own. The services (kind registry, waiters,
 * reaper) are the Queue's: a job enqueued through either wakes a worker
 * polling through the other. Server-level settings (timeouts, body limit) are
 * the application's instance's; parked long polls answer when the Queue
 * closes, so close the Queue before the instance.
 */

import type { FastifyPluginAsync } from 'fastify';
import type { CoordinatorApp } from '../coordinator/route-context.js';
import type { Queue, KindPayloads } from './queue.js';

export interface LeaseholdRoutesOptions {
  readonly queue: Queue<KindPayloads>;
}

export const leaseholdRoutes: FastifyPluginAsync<LeaseholdRoutesOptions> = async (instance, options) => {
  const { queue } = options;
  // Loaded when the plugin is registered: the package's entry re-exports this plugin, and a Queue alone loads no Fastify.
  const { installApi } = await import('../coordinator/app.js');
  await installApi(instance as unknown as CoordinatorApp, { store: queue.store, config: queue.config, ctx: queue.services.ctx, standalone: false });
};
