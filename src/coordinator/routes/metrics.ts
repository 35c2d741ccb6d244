/**
 * GET /metrics: the Prometheus text exposition (metrics-text.ts). It admits
 * an admin key (that tenant's series and the process-wide ones) or, when the
 * coordinator has one, the scrape token (`metricsToken`, every tenant; the
 * auth hook compares it in constant time and it is never logged). A scrape
 * reads counters and the queue gauges (queue-gauges.ts) and scans no jobs
 * beyond what TenantStats costs.
 */

import { Type } from '@sinclair/typebox';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';
import { METRICS_CONTENT_TYPE, renderMetrics } from '../metrics-text.js';
import { readQueueGauges } from '../queue-gauges.js';

export function registerMetricsRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.get(
    '/metrics',
    {
      config: { roles: ['admin'], scrapeToken: true },
      schema: {
        summary: 'Prometheus metrics (admin key: its tenant; the scrape token: every tenant)',
        tags: ['system'],
        response: { 200: Type.String({ description: `Prometheus text format (${METRICS_CONTENT_TYPE})` }), ...errorResponses() },
      },
    },
    async (request, reply) => {
      const tenant = request.principal === null ? null : request.principal.tenant;
      if (tenant !== null) ctx.metrics.tenant(tenant);
      const tenants = tenant === null ? ctx.metrics.tenants.values() : ctx.metrics.tenants.has(tenant) ? [tenant] : [];
      const queue = await readQueueGauges(ctx.store, tenants);
      const text = await renderMetrics(
        ctx.metrics.registry,
        queue,
        {
          parkedLeasePolls: ctx.waiters.size,
          parkedFinishWaits: ctx.finishWaiters.size,
          admissionInFlight: app.admission.countedInFlight,
          admissionOverloaded: app.admission.overloaded,
        },
        tenant,
      );
      return reply.type(METRICS_CONTENT_TYPE).send(text);
    },
  );
}
