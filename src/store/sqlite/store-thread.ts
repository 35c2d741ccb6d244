/**
 * The body of the SQLite store's own thread (see threaded-store.ts). It owns
 * the one connection of this process and runs a plain SqliteStore: calls
 * that arrive in one message join one group commit, and their answers go back
 * in one message once the commit is on disk, so the fsync holds this thread
 * and never the HTTP event loop.
 */

import { parentPort, workerData } from 'node:worker_threads';
import { SqliteStore, type SqliteStoreOptions } from './sqlite-store.js';
import { serializeError, type StoreCall, type StoreReply, type ToStoreThread } from './thread-protocol.js';

if (parentPort === null) throw new Error('store-thread.ts runs only as a worker thread');
const port = parentPort;

function openStore(): SqliteStore | null {
  try {
    const opened = SqliteStore.open(workerData as SqliteStoreOptions);
    port.postMessage({ type: 'opened' });
    return opened;
  } catch (error) {
    // Closing the port lets the thread end; the opener rejects with this error.
    port.postMessage({ type: 'open-failed', error: serializeError(error) });
    port.close();
    return null;
  }
}

const opened = openStore();
if (opened !== null) serve(opened);

function serve(store: SqliteStore): void {
  let replies: StoreReply[] = [];
  let replyScheduled = false;
  let stopWatching: (() => void) | null = null;
  let availableSent = false;

  function sendReplies(): void {
    replyScheduled = false;
    const batch = replies;
    replies = [];
    port.postMessage({ type: 'replies', replies: batch });
  }

  function reply(answer: StoreReply): void {
    replies.push(answer);
    if (!replyScheduled) {
      replyScheduled = true;
      setImmediate(sendReplies);
    }
  }

  function invoke(call: StoreCall): void {
    const method = (store as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>)[call.method];
    if (typeof method !== 'function') {
      reply({ id: call.id, ok: false, error: serializeError(new Error(`no store method ${call.method}`)) });
      return;
    }
    let pending: Promise<unknown>;
    try {
      pending = method.apply(store, [...call.args]);
    } catch (error) {
      reply({ id: call.id, ok: false, error: serializeError(error) });
      return;
    }
    pending.then(
      (value) => reply({ id: call.id, ok: true, value }),
      (error: unknown) => reply({ id: call.id, ok: false, error: serializeError(error) }),
    );
  }

  port.on('message', (message: ToStoreThread) => {
    switch (message.type) {
      case 'calls':
        for (const call of message.calls) invoke(call);
        break;
      case 'watch':
        if (message.on && stopWatching === null) {
          stopWatching = store.watchAvailable(() => {
            // One wake-up per turn is enough: listeners re-check the store themselves.
            if (availableSent) return;
            availableSent = true;
            port.postMessage({ type: 'available' });
            setImmediate(() => {
              availableSent = false;
            });
          });
        } else if (!message.on && stopWatching !== null) {
          stopWatching();
          stopWatching = null;
        }
        break;
      case 'close':
        stopWatching?.();
        void store.close().then(
          () => {
            if (replies.length > 0) sendReplies();
            port.postMessage({ type: 'closed' });
            port.close();
          },
          (error: unknown) => {
            port.postMessage({ type: 'closed', error: serializeError(error) });
            port.close();
          },
        );
        break;
    }
  });
}
