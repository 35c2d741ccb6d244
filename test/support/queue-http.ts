/**
 * The HTTP API over a library Queue, for tests that compare a direct call
 * with the same call over HTTP: a Fastify instance with leaseholdRoutes (the
 * application's way to serve it), a key of the given role made with
 * queue.createApiKey, and a LeaseholdClient whose exchanges go through
 * Fastify's inject (no socket). `requests` counts the exchanges.
 */

import Fastify from 'fastify';
import { LeaseholdClient } from '../../src/client/leasehold-client.js';
import type { Exchange, RawResponse } from '../../src/client/transport.js';
import type { Role } from '../../src/core/states.js';
import { leaseholdRoutes } from '../../src/queue/http-front.js';
import type { KindPayloads, Queue } from '../../src/queue/queue.js';

export interface QueueHttp {
  readonly client: LeaseholdClient;
  requests(): number;
  close(): Promise<void>;
}

export async function httpOverQueue<K extends KindPayloads>(queue: Queue<K>, role: Role = 'admin'): Promise<QueueHttp> {
  const app = Fastify();
  await app.register(leaseholdRoutes, { queue: queue as unknown as Queue<KindPayloads> });
  await app.ready();
  const { key } = await queue.createApiKey(role);
  let count = 0;
  const dispatch = async (request: Exchange): Promise<RawResponse> => {
    count += 1;
    const response = await app.inject({
      method: request.method,
      url: request.path,
      headers: request.headers,
      ...(request.body === undefined ? {} : { payload: request.body }),
    });
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(response.headers)) {
      if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? String(value[0]) : String(value);
    }
    return { status: response.statusCode, headers, body: response.rawPayload };
  };
  return {
    client: new LeaseholdClient({ baseUrl: 'http://in-process', apiKey: key, dispatch }),
    requests: () => count,
    close: () => app.close(),
  };
}
