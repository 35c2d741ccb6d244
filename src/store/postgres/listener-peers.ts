/**
 * Whether anyone else listens on a channel, so that a store whose own
 * listener is the only one can skip its NOTIFY statements: it wakes its own
 * waiters at the commit, and the notification would only come back to be
 * dropped (two statements a job, a third of the server's CPU per job in the
 * HTTP latency bench).
 *
 * The listeners find each other three ways:
 *   census  each listener's connection carries the schema's application name
 *           (listenerName), so a count of pg_stat_activity finds the others;
 *           it runs when LISTEN takes effect, then every CENSUS_MS, so a
 *           store learns when it is alone again and finds a listener whose
 *           hello it did not hear; a census that fails or outlasts the query
 *           timeout (a connection that hangs without an error) drops the
 *           connection, which then reconnects;
 *   hello   a listener whose LISTEN took effect says so on the channel; every
 *           other listener then counts it and sends NOTIFY again;
 *   ack     each listener that heard a hello answers it, after it has started
 *           notifying again; the new listener then tells its waiters to look
 *           (a job committed by that store before the hello reached it was
 *           announced to nobody). A listener whose own hello is not out yet
 *           does not answer: until then it notifies every commit.
 * A census whose answer is older than a hello is ignored, and while its
 * connection is down a listener hears no hello, so it counts as not alone.
 * A store without a listener of its own on a channel always notifies.
 */

/** How often a listener counts the others again (one small query on its own connection). */
export const CENSUS_MS = 2_000;

/**
 * The application name of every store's listening connection on `schema`: the census counts these. A name
 * cut at PostgreSQL's 63 bytes may match another schema's listeners too, which only costs NOTIFYs.
 */
export function listenerName(schema: string): string {
  return `lh-listen:${schema}`.slice(0, 63);
}

const OTHER_LISTENERS = `SELECT count(*)::int FROM pg_stat_activity
   WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`;

/** The census of a listening connection: other sessions of the database whose application name is its own. */
export const LISTENER_CENSUS = `SELECT (${OTHER_LISTENERS}) AS others`;

/**
 * What a listener runs once its LISTEN took effect: the census and the hello in one statement, so the
 * others hear the hello (at its commit) after the count, and a connection whose last statement is this
 * one, LISTENER_CENSUS or LISTENER_ACK (which run only after it) is up. $2 is the channel, $3 the hello.
 */
export const LISTENER_HELLO_AND_CENSUS = `SELECT pg_notify($2, $3), (${OTHER_LISTENERS}) AS others`;

/** A listener's answer to another's hello ($1 the channel, $2 the answer), sent only once its own hello is out. */
export const LISTENER_ACK = 'SELECT pg_notify($1, $2)';

/** The control messages on a channel: a new listener's hello, and an answer to one. */
export type Control = { readonly hello: string } | { readonly ack: string; readonly from: string };

export function encodeHello(origin: string): string {
  return JSON.stringify({ lh: 'hello', o: origin });
}

export function encodeAck(helloFrom: string, origin: string): string {
  return JSON.stringify({ lh: 'ack', to: helloFrom, o: origin });
}

/** A control message, or null for anything else (the channel's own payloads). */
export function parseControl(payload: string | undefined): Control | null {
  if (payload === undefined || !payload.startsWith('{"lh":')) return null;
  try {
    const value = JSON.parse(payload) as { lh?: unknown; o?: unknown; to?: unknown };
    if (typeof value.o !== 'string') return null;
    if (value.lh === 'hello') return { hello: value.o };
    if (value.lh === 'ack' && typeof value.to === 'string') return { ack: value.to, from: value.o };
  } catch {
    // Not a control message.
  }
  return null;
}

/** What a listener knows of the others on its channel. */
export class ListenerPeers {
  private others = true;
  private hellosHeard = 0;

  /** False only when a census found no other listener and no hello has come since. */
  othersMayListen(): boolean {
    return this.others;
  }

  /** A census begins: the token its answer must bring back. */
  censusStarted(): number {
    return this.hellosHeard;
  }

  /** A census answered: `others` listeners besides this one. Ignored when a hello came while it ran. */
  counted(token: number, others: number): void {
    if (token === this.hellosHeard) this.others = others > 0;
  }

  heardHello(): void {
    this.hellosHeard += 1;
    this.others = true;
  }

  /** The connection dropped: hellos go unheard until LISTEN takes effect again. */
  deaf(): void {
    this.hellosHeard += 1;
    this.others = true;
  }
}
