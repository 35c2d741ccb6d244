/** Shared pieces of the document-review tests: a service on a fresh SQLite file, scripted planners, submissions. */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeterministicPlanner, type Planner, type PlannerView } from '../../../apps/documents/planner.js';
import { openDocumentService, type DocumentService, type DocumentServiceOptions } from '../../../apps/documents/service.js';

export const KEYS = { acme: 'acme-key-0123456789', globex: 'globex-key-0123456789' } as const;

export const INVOICE = [
  'Supplier: ACME Components Ltd',
  'VAT number: GB123456789',
  'IBAN: GB82 WEST 1234 5698 7654 32',
  'Address: 1 Mill Lane, Leeds',
  'Total: GBP 1250.00',
].join('\n');

/** Proposes the scripted answers first (a function sees the view), then what the deterministic planner would; per document. */
export class ScriptedPlanner implements Planner {
  readonly views: PlannerView[] = [];
  private readonly turns = new Map<string, number>();
  private readonly fallback = new DeterministicPlanner();

  constructor(
    private readonly script: readonly (unknown | ((view: PlannerView) => unknown))[],
    /** The documents the script is for; the others get the deterministic plan. */
    private readonly applies: (view: PlannerView) => boolean = () => true,
  ) {}

  async propose(view: PlannerView): Promise<unknown> {
    if (!this.applies(view)) return this.fallback.propose(view);
    this.views.push(view);
    const turn = this.turns.get(view.documentId) ?? 0;
    this.turns.set(view.documentId, turn + 1);
    if (turn >= this.script.length) return this.fallback.propose(view);
    const next = this.script[turn];
    return typeof next === 'function' ? (next as (view: PlannerView) => unknown)(view) : next;
  }
}

export interface Harness {
  readonly dir: string;
  readonly path: string;
  readonly service: DocumentService;
  submit(tenant: keyof typeof KEYS, text?: string, headers?: Record<string, string>): Promise<{ documentId: string; jobId: string; location: string }>;
  read(tenant: keyof typeof KEYS, documentId: string): Promise<{ status: number; body: DocumentView }>;
  close(): Promise<void>;
}

export interface DocumentView {
  readonly documentId: string;
  readonly job: { readonly id: string; readonly status: string; readonly attempts: number; readonly errorCode: string | null };
  readonly steps: readonly {
    readonly index: number;
    readonly tool: string;
    readonly attempt: number;
    readonly checkpointed: boolean;
    readonly output: unknown;
  }[];
  readonly rejections: readonly { readonly tool: string | null; readonly reason: string; readonly detail: string }[];
  readonly reviewNote: string | null;
}

export async function startHarness(options: Partial<DocumentServiceOptions> & { readonly planner?: Planner } = {}): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'documents-'));
  const path = join(dir, 'documents.db');
  const service = await openDocumentService({
    path,
    planner: options.planner ?? new DeterministicPlanner(),
    apiKeys: new Map([
      [KEYS.acme, 'acme'],
      [KEYS.globex, 'globex'],
    ]),
    leaseMs: 2_000,
    reaperIntervalMs: 100,
    ...options,
  });
  return {
    dir,
    path,
    service,
    async submit(tenant, text = INVOICE, headers = {}) {
      const response = await service.app.inject({
        method: 'POST',
        url: '/documents',
        headers: { authorization: `Bearer ${KEYS[tenant]}`, ...headers },
        payload: { title: 'Invoice 42', text },
      });
      if (response.statusCode !== 202) throw new Error(`submit answered ${response.statusCode}: ${response.body}`);
      const body = response.json<{ documentId: string; jobId: string }>();
      return { ...body, location: String(response.headers['location']) };
    },
    async read(tenant, documentId) {
      const response = await service.app.inject({ method: 'GET', url: `/documents/${documentId}`, headers: { authorization: `Bearer ${KEYS[tenant]}` } });
      return { status: response.statusCode, body: response.json<DocumentView>() };
    },
    async close() {
      await service.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
