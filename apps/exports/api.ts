/**
 * The task application's HTTP API: bearer-key users, task CRUD, the
 * synchronous CSV export, and (when a Queue is given) the asynchronous export
 * routes. A factory without listen(), so tests and the measurement script
 * start it on a port of their choosing.
 */

import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { TASK_STATUSES, userByKey, type AppDb, type Task, type TaskStatus, type User } from './db.js';
import { registerExportRoutes } from './exports-routes.js';
import { sendError } from './http-errors.js';
import type { ExportQueue, ExportSettings } from './export-job.js';
import { streamExport, type SyncExportEnd } from './sync-export.js';

export interface ApiOptions {
  readonly db: AppDb;
  /** The file's path: each synchronous export opens its own read connection to it. */
  readonly path: string;
  /** Present: POST/GET /exports are served over this Queue. */
  readonly queue?: ExportQueue;
  readonly exportSettings?: ExportSettings;
  /** Called when a synchronous export ends, finished or abandoned by its client (measurement and tests). */
  readonly onSyncExportEnd?: (end: SyncExportEnd) => void;
  /** A 500's cause, for the operator's log. */
  readonly onServerError?: (error: { readonly name?: string; readonly message: string }, route: string) => void;
  /** Server-side request timeout; the synchronous export is bounded by it too. */
  readonly requestTimeoutMs?: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    user: User;
  }
}

const TASK_COLUMNS = 'id, title, status, due_date, created_at, updated_at';

function taskFields(
  body: unknown,
  partial: boolean,
): { ok: true; title?: string; status?: TaskStatus; dueDate?: string | null } | { ok: false; message: string } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, message: 'the body must be a JSON object' };
  const { title, status, dueDate, ...rest } = body as Record<string, unknown>;
  const extra = Object.keys(rest)[0];
  if (extra !== undefined) return { ok: false, message: `unknown field "${extra}"` };
  if (title !== undefined && (typeof title !== 'string' || title.length === 0 || title.length > 500))
    return { ok: false, message: 'title must be 1 to 500 characters' };
  if (!partial && title === undefined) return { ok: false, message: 'title is required' };
  if (status !== undefined && !(TASK_STATUSES as readonly unknown[]).includes(status)) return { ok: false, message: 'status must be open or done' };
  if (dueDate !== undefined && dueDate !== null && (typeof dueDate !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(dueDate)))
    return { ok: false, message: 'dueDate must be YYYY-MM-DD or null' };
  return {
    ok: true,
    ...(title === undefined ? {} : { title }),
    ...(status === undefined ? {} : { status: status as TaskStatus }),
    ...(dueDate === undefined ? {} : { dueDate: dueDate as string | null }),
  };
}

function taskId(request: FastifyRequest): number | undefined {
  const raw = (request.params as { id?: string }).id ?? '';
  return /^[1-9]\d{0,15}$/.test(raw) ? Number(raw) : undefined;
}

export async function buildApi(options: ApiOptions): Promise<FastifyInstance> {
  const { db } = options;
  const app = Fastify({ logger: false, requestTimeout: options.requestTimeoutMs ?? 30_000 });
  app.decorateRequest('user', undefined as unknown as User);

  app.addHook('onRequest', async (request, reply) => {
    const header = request.headers.authorization;
    const key = header?.startsWith('Bearer ') === true ? header.slice(7) : undefined;
    const user = key === undefined ? undefined : userByKey(db, key);
    if (user === undefined) return sendError(reply, 401, 'unauthorized', 'a valid Authorization: Bearer <key> header is required');
    request.user = user;
  });
  app.setErrorHandler((error: { statusCode?: number; message: string; name?: string }, request, reply) => {
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) return sendError(reply, status, 'invalid_request', error.message);
    // The operator's log gets the error's name and message (never a header: keys travel in them).
    options.onServerError?.(error, `${request.method} ${request.routeOptions.url ?? request.url}`);
    return sendError(reply, 500, 'internal_error', 'the server failed; try again');
  });

  const listTasks = db.prepare<[number, number, number], Task>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE user_id = ? AND id > ? ORDER BY id LIMIT ?`);
  const getTask = db.prepare<[number, number], Task>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = ? AND user_id = ?`);
  const insertTask = db.prepare<[number, string, string, string | null, string, string]>(
    'INSERT INTO tasks (user_id, title, status, due_date, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const deleteTask = db.prepare<[number, number]>('DELETE FROM tasks WHERE id = ? AND user_id = ?');

  app.get('/tasks', async (request, reply) => {
    const query = request.query as { after?: string; limit?: string };
    const after = query.after === undefined ? 0 : Number(query.after);
    const limit = query.limit === undefined ? 50 : Number(query.limit);
    if (!Number.isSafeInteger(after) || after < 0 || !Number.isSafeInteger(limit) || limit < 1 || limit > 500) {
      return sendError(reply, 400, 'invalid_request', 'after must be a non-negative integer and limit 1 to 500');
    }
    const tasks = listTasks.all(request.user.id, after, limit);
    return { tasks, next: tasks.length === limit ? (tasks[tasks.length - 1]?.id ?? null) : null };
  });

  app.post('/tasks', async (request, reply) => {
    const fields = taskFields(request.body, false);
    if (!fields.ok) return sendError(reply, 400, 'invalid_task', fields.message);
    const now = new Date().toISOString();
    const id = Number(insertTask.run(request.user.id, fields.title ?? '', fields.status ?? 'open', fields.dueDate ?? null, now, now).lastInsertRowid);
    return reply.code(201).header('location', `/tasks/${id}`).send(getTask.get(id, request.user.id));
  });

  app.get('/tasks/export.csv', async (request, reply) => {
    const status = (request.query as { status?: string }).status ?? 'all';
    if (status !== 'all' && status !== 'open' && status !== 'done') return sendError(reply, 400, 'invalid_parameters', 'status must be one of all, open, done');
    const stream = streamExport(options.path, request.user.id, status, (end) => options.onSyncExportEnd?.(end));
    // A disconnect destroys the response; destroying the stream stops the read.
    reply.raw.once('close', () => stream.destroy());
    return reply.header('content-type', 'text/csv; charset=utf-8').header('content-disposition', 'attachment; filename="tasks.csv"').send(stream);
  });

  app.get('/tasks/:id', async (request, reply) => {
    const id = taskId(request);
    const task = id === undefined ? undefined : getTask.get(id, request.user.id);
    return task === undefined ? sendError(reply, 404, 'not_found', 'no such task') : task;
  });

  app.patch('/tasks/:id', async (request, reply) => {
    const id = taskId(request);
    const fields = taskFields(request.body, true);
    if (!fields.ok) return sendError(reply, 400, 'invalid_task', fields.message);
    const sets: string[] = [];
    const values: (string | null)[] = [];
    if (fields.title !== undefined) sets.push('title = ?'), values.push(fields.title);
    if (fields.status !== undefined) sets.push('status = ?'), values.push(fields.status);
    if (fields.dueDate !== undefined) sets.push('due_date = ?'), values.push(fields.dueDate);
    sets.push('updated_at = ?');
    values.push(new Date().toISOString());
    const changed =
      id === undefined ? 0 : db.prepare(`UPDATE tasks SET ${sets.join(', ')} WHERE id = ? AND user_id = ?`).run(...values, id, request.user.id).changes;
    return changed === 0 ? sendError(reply, 404, 'not_found', 'no such task') : getTask.get(id as number, request.user.id);
  });

  app.delete('/tasks/:id', async (request, reply) => {
    const id = taskId(request);
    const changed = id === undefined ? 0 : deleteTask.run(id, request.user.id).changes;
    return changed === 0 ? sendError(reply, 404, 'not_found', 'no such task') : reply.code(204).send();
  });

  if (options.queue !== undefined) registerExportRoutes(app, db, options.queue, options.exportSettings);
  return app;
}
