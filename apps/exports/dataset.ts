/**
 * A representative dataset: many users with tens of tasks and a few with very
 * many. Sizes are options so tests build small ones. Each user's API key is
 * returned (keys are stored hashed only).
 */

import { randomBytes } from 'node:crypto';
import { hashKey, type AppDb } from './db.js';

export interface DatasetOptions {
  readonly users: number;
  /** Tasks of an ordinary user: uniformly between min and max. */
  readonly minTasks: number;
  readonly maxTasks: number;
  /** The first `heavyUsers` users have `heavyTasks` tasks each. */
  readonly heavyUsers: number;
  readonly heavyTasks: number;
  /** Deterministic sizes for a given seed. */
  readonly seed?: number;
}

export const DEFAULT_DATASET: DatasetOptions = { users: 1_000, minTasks: 10, maxTasks: 60, heavyUsers: 3, heavyTasks: 50_000, seed: 1 };

export interface SeededUser {
  readonly id: number;
  readonly key: string;
  readonly tasks: number;
}

/** A small linear congruential generator: the dataset's shape does not depend on Math.random. */
function lcg(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

export function newUserKey(): string {
  return `tk_${randomBytes(24).toString('base64url')}`;
}

export function generateDataset(db: AppDb, options: DatasetOptions): SeededUser[] {
  const random = lcg(options.seed ?? 1);
  const insertUser = db.prepare<[string, string]>('INSERT INTO users (name, key_hash) VALUES (?, ?)');
  const insertTask = db.prepare<[number, string, string, string | null, string, string]>(
    'INSERT INTO tasks (user_id, title, status, due_date, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const users: SeededUser[] = [];
  const base = Date.UTC(2026, 0, 1);
  for (let u = 0; u < options.users; u++) {
    const key = newUserKey();
    const count = u < options.heavyUsers ? options.heavyTasks : options.minTasks + Math.floor(random() * (options.maxTasks - options.minTasks + 1));
    // One transaction per user keeps each commit bounded while the whole run stays fast.
    const id = db.transaction(() => {
      const userId = Number(insertUser.run(`user ${u + 1}`, hashKey(key)).lastInsertRowid);
      for (let t = 0; t < count; t++) {
        const created = new Date(base + Math.floor(random() * 300 * 86_400_000)).toISOString();
        const due = random() < 0.3 ? null : created.slice(0, 10);
        // Some titles need CSV quoting, as real ones do.
        const title = t % 17 === 0 ? `Call "${u}", re: item ${t}` : `Task ${t} of user ${u + 1}`;
        insertTask.run(userId, title, random() < 0.4 ? 'done' : 'open', due, created, created);
      }
      return userId;
    })();
    users.push({ id, key, tasks: count });
  }
  return users;
}
