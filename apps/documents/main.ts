/**
 * `npm run documents`: the review service in one process (the HTTP surface
 * and a worker over one SQLite file), configured from the environment (see
 * README.md). `DOCUMENTS_ROLE=api` or `worker` runs one half, so more worker
 * processes can share the file. SIGINT or SIGTERM stops it: the worker lets
 * running reviews finish within its grace period, leases do the rest.
 */

import { DeterministicPlanner, HttpPlanner, type Planner } from './planner.js';
import { openDocumentService } from './service.js';
import type { NoteDelivery } from './workflow.js';

interface MainConfig {
  readonly path: string;
  readonly host: string;
  readonly port: number;
  readonly role: 'all' | 'api' | 'worker';
  readonly apiKeys: ReadonlyMap<string, string>;
  readonly plannerUrl: string | undefined;
  readonly inboxUrl: string | undefined;
}

/** Every problem at once, so one start shows all that is wrong. */
function readConfig(env: NodeJS.ProcessEnv): MainConfig {
  const problems: string[] = [];
  const port = Number(env['PORT'] ?? '3300');
  if (!Number.isInteger(port) || port < 0 || port > 65_535) problems.push('PORT must be an integer from 0 to 65535');
  const role = env['DOCUMENTS_ROLE'] ?? 'all';
  if (role !== 'all' && role !== 'api' && role !== 'worker') problems.push('DOCUMENTS_ROLE must be all, api or worker');
  const apiKeys = new Map<string, string>();
  for (const entry of (env['DOCUMENTS_API_KEYS'] ?? '').split(',').filter((part) => part.trim() !== '')) {
    const [tenant, key] = entry.split('=', 2).map((part) => part.trim());
    if (tenant === undefined || key === undefined || !/^[A-Za-z0-9_-]{1,64}$/.test(tenant) || key.length < 16) {
      problems.push('DOCUMENTS_API_KEYS entries are tenant=key, the key at least 16 characters');
    } else apiKeys.set(key, tenant);
  }
  if (role !== 'worker' && apiKeys.size === 0) problems.push('DOCUMENTS_API_KEYS must name at least one tenant=key');
  const url = (name: string): string | undefined => {
    const value = env[name];
    if (value === undefined || value === '') return undefined;
    if (!/^https?:\/\//.test(value)) problems.push(`${name} must be an http(s) URL`);
    return value;
  };
  const plannerUrl = url('DOCUMENTS_PLANNER_URL');
  const inboxUrl = url('DOCUMENTS_REVIEW_INBOX_URL');
  if (problems.length > 0) throw new Error(`invalid configuration:\n- ${problems.join('\n- ')}`);
  return {
    path: env['DOCUMENTS_DB'] ?? './documents.db',
    host: env['HOST'] ?? '127.0.0.1',
    port,
    role: role as MainConfig['role'],
    apiKeys,
    plannerUrl,
    inboxUrl,
  };
}

/** POSTs the note to the reviewer's inbox with the lease's fence, so the inbox can refuse a stale writer. */
function inboxDelivery(url: string): NoteDelivery {
  return async (delivery, signal) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'leasehold-fence': String(delivery.fence) },
      body: JSON.stringify(delivery),
      signal,
    });
    await response.body?.cancel();
    if (!response.ok) throw new Error(`the review inbox answered ${response.status}`);
  };
}

async function main(): Promise<void> {
  const config = readConfig(process.env);
  const planner: Planner = config.plannerUrl === undefined ? new DeterministicPlanner() : new HttpPlanner({ url: config.plannerUrl });
  const service = await openDocumentService({
    path: config.path,
    planner,
    apiKeys: config.apiKeys,
    worker: config.role !== 'api',
    ...(config.inboxUrl === undefined ? {} : { deliverNote: inboxDelivery(config.inboxUrl) }),
  });
  if (config.role !== 'worker') {
    const address = await service.app.listen({ host: config.host, port: config.port });
    console.log(`documents: listening on ${address} (database ${config.path})`);
  } else {
    console.log(`documents: worker on ${config.path}`);
  }
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void service.close().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
