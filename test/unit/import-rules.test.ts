/**
 * The import rules of src/, as a test (also run by `npm run check`):
 * core imports nothing of ours; the store interface imports only core; a
 * backend (store/sqlite, store/postgres) imports core, the interface and its
 * own folder; only the composition roots (the CLI's src/cli/open-store.ts and
 * the library's src/queue/open-queue.ts) import a backend; the engine
 * imports core, protocol and the store interface, and never Fastify; the
 * coordinator (the HTTP front) and the library's queue call the engine, and
 * of the queue only its routes plugin (src/queue/http-front.ts) imports the
 * coordinator or Fastify; coordinator, engine, worker and client never import
 * a backend; no module imports itself back through a cycle. Imports are read
 * with the TypeScript scanner (static, type-only, re-exports and dynamic
 * `import()` alike).
 */

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = join(ROOT, 'src');

type Layer = 'core' | 'protocol' | 'store' | 'store/sqlite' | 'store/postgres' | 'engine' | 'coordinator' | 'client' | 'worker' | 'queue' | 'cli' | 'index';

const BACKENDS: readonly Layer[] = ['store/sqlite', 'store/postgres'];

/** The only modules that may name a concrete store: the CLI's and the library's composition roots. */
const COMPOSITION_ROOT = 'cli/open-store.ts';
const COMPOSITION_ROOTS: readonly string[] = [COMPOSITION_ROOT, 'queue/open-queue.ts'];

/** The library's routes plugin: the one module of src/queue that may import the coordinator (and Fastify). */
const HTTP_FRONT = 'queue/http-front.ts';

/** Packages that are the HTTP front's own: the engine never imports them, the queue only in HTTP_FRONT. */
const FASTIFY_PACKAGE = /^(fastify|@fastify\/|fastify-)/;

/** What each layer may import besides itself. */
const ALLOWED: Readonly<Record<Layer, readonly Layer[]>> = {
  core: [],
  protocol: ['core'],
  store: ['core'],
  'store/sqlite': ['core', 'store'],
  'store/postgres': ['core', 'store'],
  engine: ['core', 'protocol', 'store'],
  coordinator: ['core', 'protocol', 'store', 'engine'],
  client: ['core', 'protocol'],
  // The worker takes the Checkpoint type from the store interface; it never sees a backend.
  worker: ['core', 'protocol', 'client', 'store'],
  // Backends only through COMPOSITION_ROOTS, the coordinator only through HTTP_FRONT (both checked separately).
  queue: ['core', 'protocol', 'store', 'engine', 'coordinator', 'client', 'store/sqlite', 'store/postgres'],
  cli: ['core', 'protocol', 'store', 'engine', 'coordinator', 'client', 'worker', 'queue', 'store/sqlite', 'store/postgres'],
  index: ['client', 'worker', 'queue'],
};

/** A module path relative to src/, with forward slashes (`store/sqlite/queries.ts`). */
function layerOf(module: string): Layer {
  if (module === 'index.ts') return 'index';
  const [top, second] = module.split('/');
  if (top === 'store') {
    if (second === 'sqlite') return 'store/sqlite';
    if (second === 'postgres') return 'store/postgres';
    return 'store';
  }
  if (
    top === 'core' ||
    top === 'protocol' ||
    top === 'engine' ||
    top === 'coordinator' ||
    top === 'client' ||
    top === 'worker' ||
    top === 'queue' ||
    top === 'cli'
  )
    return top;
  throw new Error(`src/${module} is in no layer: add its folder to the import rules`);
}

/** Every broken rule in a graph of module → imported modules (both relative to src/). */
function violations(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const found: string[] = [];
  for (const [from, targets] of graph) {
    const fromLayer = layerOf(from);
    for (const to of targets) {
      const toLayer = layerOf(to);
      if (toLayer === fromLayer) continue;
      if (!ALLOWED[fromLayer].includes(toLayer)) {
        found.push(`src/${from} (${fromLayer}) imports src/${to} (${toLayer})`);
      } else if (BACKENDS.includes(toLayer) && !COMPOSITION_ROOTS.includes(from)) {
        found.push(`src/${from} imports the backend src/${to}; only ${COMPOSITION_ROOTS.map((root) => `src/${root}`).join(' and ')} may`);
      } else if (fromLayer === 'queue' && toLayer === 'coordinator' && from !== HTTP_FRONT) {
        found.push(`src/${from} imports the coordinator src/${to}; only src/${HTTP_FRONT} may`);
      }
    }
  }
  for (const cycle of cycles(graph)) found.push(`import cycle among ${cycle.map((m) => `src/${m}`).join(', ')}`);
  return found;
}

/** Every import of a Fastify package where it does not belong, in a map of module → package specifiers. */
function fastifyViolations(packages: ReadonlyMap<string, readonly string[]>): string[] {
  const found: string[] = [];
  for (const [from, specifiers] of packages) {
    const layer = layerOf(from);
    if (layer !== 'engine' && !(layer === 'queue' && from !== HTTP_FRONT)) continue;
    for (const specifier of specifiers) {
      if (FASTIFY_PACKAGE.test(specifier)) found.push(`src/${from} (${layer}) imports ${specifier}; only the coordinator and src/${HTTP_FRONT} may`);
    }
  }
  return found;
}

/** Strongly connected components with more than one module, or a module that imports itself (Tarjan). */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const result: string[][] = [];
  let next = 0;
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next += 1;
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node) ?? 0, low.get(target) ?? 0));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node) ?? 0, index.get(target) ?? 0));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop();
      if (member === undefined) break;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || (graph.get(node) ?? []).includes(node)) result.push(component.reverse());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return result;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** Each module's specifiers as written (relative to src/), read with the TypeScript scanner. */
function specifiersByModule(): Map<string, string[]> {
  const all = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const module = relative(SRC, file).split('\\').join('/');
    all.set(
      module,
      ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles.map((f) => f.fileName),
    );
  }
  return all;
}

/** The packages each module imports (node: builtins left out). */
function packageImports(): Map<string, string[]> {
  const packages = new Map<string, string[]>();
  for (const [module, specifiers] of specifiersByModule()) {
    packages.set(
      module,
      specifiers.filter((specifier) => !specifier.startsWith('.') && !specifier.startsWith('node:')),
    );
  }
  return packages;
}

/** The import graph of src/: relative specifiers resolved to modules; packages and node: builtins left out. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const [module, imports] of specifiersByModule()) {
    const file = join(SRC, module);
    const targets = imports
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => {
        const target = resolve(dirname(file), specifier.replace(/\.js$/, '.ts'));
        const rel = relative(SRC, target).split('\\').join('/');
        if (rel.startsWith('..')) throw new Error(`src/${module} imports ${specifier}, outside src/`);
        if (!statSync(target, { throwIfNoEntry: false })?.isFile()) throw new Error(`src/${module} imports ${specifier}, which is no file`);
        return rel;
      });
    graph.set(module, [...new Set(targets)]);
  }
  return graph;
}

describe('import rules of src/', () => {
  const graph = importGraph();

  it('reads every module of src/, including the composition root and its dynamic imports', () => {
    expect(graph.size).toBeGreaterThan(50);
    expect(graph.get(COMPOSITION_ROOT)).toEqual(expect.arrayContaining(['store/sqlite/sqlite-store.ts', 'store/postgres/postgres-store.ts']));
  });

  it('holds for every import', () => {
    expect(violations(graph)).toEqual([]);
  });

  it('keeps Fastify out of the engine and out of the library but for its routes plugin', () => {
    expect(fastifyViolations(packageImports())).toEqual([]);
    expect(
      fastifyViolations(
        new Map([
          ['engine/services.ts', ['fastify', 'pino']],
          ['queue/queue.ts', ['@fastify/type-provider-typebox']],
          ['queue/http-front.ts', ['fastify']],
          ['coordinator/app.ts', ['fastify']],
        ]),
      ),
    ).toEqual([
      'src/engine/services.ts (engine) imports fastify; only the coordinator and src/queue/http-front.ts may',
      'src/queue/queue.ts (queue) imports @fastify/type-provider-typebox; only the coordinator and src/queue/http-front.ts may',
    ]);
  });

  it('reports each kind of violation (the checker itself can fail)', () => {
    const planted = new Map<string, readonly string[]>([
      ['core/states.ts', ['store/store.ts']],
      ['store/store.ts', ['core/states.ts', 'protocol/schemas.ts']],
      ['store/sqlite/queries.ts', ['store/postgres/queries.ts']],
      ['coordinator/app.ts', ['store/sqlite/sqlite-store.ts']],
      ['cli/main.ts', ['store/postgres/postgres-store.ts']],
      ['worker/worker.ts', ['coordinator/app.ts']],
      ['engine/services.ts', ['coordinator/auth.ts']],
      ['queue/queue.ts', ['coordinator/app.ts']],
      ['queue/http-front.ts', ['coordinator/app.ts']],
      ['client/types.ts', ['worker/worker.ts']],
      ['cli/open-store.ts', ['store/sqlite/sqlite-store.ts']],
      ['protocol/schemas.ts', ['protocol/limits.ts']],
      ['protocol/limits.ts', ['protocol/schemas.ts']],
    ]);
    expect(violations(planted)).toEqual([
      'src/core/states.ts (core) imports src/store/store.ts (store)',
      'src/store/store.ts (store) imports src/protocol/schemas.ts (protocol)',
      'src/store/sqlite/queries.ts (store/sqlite) imports src/store/postgres/queries.ts (store/postgres)',
      'src/coordinator/app.ts (coordinator) imports src/store/sqlite/sqlite-store.ts (store/sqlite)',
      'src/cli/main.ts imports the backend src/store/postgres/postgres-store.ts; only src/cli/open-store.ts and src/queue/open-queue.ts may',
      'src/worker/worker.ts (worker) imports src/coordinator/app.ts (coordinator)',
      'src/engine/services.ts (engine) imports src/coordinator/auth.ts (coordinator)',
      'src/queue/queue.ts imports the coordinator src/coordinator/app.ts; only src/queue/http-front.ts may',
      'src/client/types.ts (client) imports src/worker/worker.ts (worker)',
      'import cycle among src/protocol/schemas.ts, src/protocol/limits.ts',
      'import cycle among src/core/states.ts, src/store/store.ts',
    ]);
  });

  it('places every module in a layer', () => {
    expect(() => layerOf('apps/demo.ts')).toThrow(/in no layer/);
  });
});
