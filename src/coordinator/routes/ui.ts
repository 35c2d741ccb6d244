/**
 * GET /ui: the operator dashboard, static files shipped in the package's
 * `ui/` folder and read once when the app is built. Only the files named in
 * UI_ASSETS are served (no path from the request reaches the file system).
 * The pages are public — they hold no data; the dashboard's script asks for
 * an admin key and sends it to the API as `Authorization: Bearer`, from
 * sessionStorage, never in a URL. Every answer carries a strict
 * Content-Security-Policy: scripts and styles from this origin only, nothing
 * inline, no frames, and requests only back to the coordinator.
 */

import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { LeaseholdError } from '../../core/errors.js';
import { ErrorBody } from '../../protocol/common.js';
import { PUBLIC_ERRORS, type CoordinatorApp } from '../route-context.js';

export const UI_CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** Every file of the dashboard; GET /ui/assets/{file} answers 404 for any other name. */
export const UI_ASSETS = [
  'app.js',
  'api.js',
  'dom.js',
  'charts.js',
  'overview.js',
  'job-list.js',
  'job-page.js',
  'bulk.js',
  'style.css',
  'favicon.svg',
] as const;

/** The `ui/` folder: beside src/ in the repository, beside dist/ in the package. */
function uiDirectory(): string {
  for (const relative of ['../../../ui/', '../../../../ui/']) {
    const dir = fileURLToPath(new URL(relative, import.meta.url));
    if (existsSync(`${dir}index.html`)) return dir;
  }
  throw new Error('the dashboard files (ui/) are missing from the installation');
}

interface Asset {
  readonly body: Buffer;
  readonly type: string;
}

function loadAssets(): { index: Asset; files: ReadonlyMap<string, Asset> } {
  const dir = uiDirectory();
  const read = (name: string): Asset => ({ body: readFileSync(`${dir}${name}`), type: TYPES[name.slice(name.lastIndexOf('.'))] ?? 'application/octet-stream' });
  return { index: read('index.html'), files: new Map(UI_ASSETS.map((name) => [name, read(name)])) };
}

function send(reply: FastifyReply, asset: Asset): FastifyReply {
  return reply
    .header('content-type', asset.type)
    .header('content-security-policy', UI_CONTENT_SECURITY_POLICY)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
    .header('cache-control', 'no-cache')
    .send(asset.body);
}

const HtmlResponse = { description: 'A dashboard file', content: { 'text/html': { schema: Type.String() } } };

export function registerUiRoutes(app: CoordinatorApp): void {
  const assets = loadAssets();
  app.get(
    '/ui',
    {
      config: { public: true },
      schema: {
        summary: 'The operator dashboard (sign in with an admin key)',
        tags: ['system'],
        security: [],
        response: { 200: HtmlResponse, ...PUBLIC_ERRORS },
      },
    },
    async (_request, reply) => send(reply, assets.index),
  );
  app.get(
    '/ui/assets/:file',
    {
      config: { public: true },
      schema: {
        summary: "The dashboard's scripts and styles",
        tags: ['system'],
        security: [],
        params: Type.Object({ file: Type.String({ minLength: 1, maxLength: 64 }) }),
        response: { 200: { description: 'A dashboard file', content: { '*/*': { schema: Type.String() } } }, 404: ErrorBody, ...PUBLIC_ERRORS },
      },
    },
    async (request, reply) => {
      const asset = assets.files.get(request.params.file);
      if (asset === undefined) throw new LeaseholdError('not_found', 'no such dashboard file');
      return send(reply, asset);
    },
  );
}
