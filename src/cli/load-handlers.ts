/**
 * Loads the handlers module of `leasehold worker --handlers FILE`: an ES
 * module (or CommonJS file) whose default export, or named export `handlers`,
 * maps job kinds to handler functions. Checked here so that a typo fails at
 * start-up with a clear message, not at the first job.
 */

import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { access } from 'node:fs/promises';
import type { Handler, HandlerMap } from '../worker/handler.js';
import { CliError } from './command.js';
import { moduleErrorLocation } from './error-text.js';

export async function loadHandlers(file: string, cwd: string): Promise<HandlerMap> {
  const path = resolve(cwd, file);
  try {
    await access(path);
  } catch {
    throw new CliError('handlers_not_found', `handlers module ${path} does not exist: check --handlers (a relative path starts from ${cwd})`);
  }
  let module: Record<string, unknown>;
  const href = pathToFileURL(path).href;
  try {
    module = (await import(href)) as Record<string, unknown>;
  } catch (error) {
    const reason = error instanceof Error ? `${error.name}: ${error.message.split('\n', 1)[0] ?? ''}` : String(error);
    const location = await moduleErrorLocation(path, href, error);
    throw new CliError(
      'handlers_unloadable',
      location === undefined
        ? `cannot load ${path}: ${reason}; fix the module (node ${path} shows the same error)`
        : `cannot load ${location}: ${reason}; fix it there`,
    );
  }
  const candidate = module['handlers'] ?? module['default'];
  if (typeof candidate !== 'object' || candidate === null || Array.isArray(candidate)) {
    throw new CliError('invalid_handlers', `${path} must export an object of handlers (default export or named export "handlers")`);
  }
  const handlers: Record<string, Handler<never>> = {};
  for (const [kind, handler] of Object.entries(candidate as Record<string, unknown>)) {
    if (typeof handler !== 'function') throw new CliError('invalid_handlers', `handler for kind "${kind}" in ${path} is not a function`);
    handlers[kind] = handler as Handler<never>;
  }
  if (Object.keys(handlers).length === 0) throw new CliError('invalid_handlers', `${path} exports no handlers`);
  return handlers;
}
