/**
 * Compiles tenant payload schemas off the event loop, in bounded time. Ajv's
 * compilation of a schema at the 64 KiB cap takes seconds, and on the main
 * thread every other tenant's request (even /healthz) would wait behind it.
 * One worker thread (started at the first compile, unref'd) generates Ajv's
 * standalone code, runs it once and posts back the source with V8's code
 * cache for it; the main thread evaluates the source from that cache. For a
 * 64 KiB schema the source is about 1 MB, and parsing and compiling it
 * without the cache blocked the main thread about 300 ms; from the cache,
 * about 13 ms (measured 2026-12-01, 2-core shared machine). A
 * compile that outlasts `timeoutMs` terminates the worker (the next compile
 * starts a new one) and is refused.
 *
 * The generated code gets its regular-expression engine (RE2, linear time) by
 * `require(RE2_MODULE)` and ajv-formats' formats and Ajv's runtime helpers by
 * their package paths; the main thread supplies that `require`.
 */

import { createRequire } from 'node:module';
import { Script } from 'node:vm';
import { Worker } from 'node:worker_threads';
import type { ValidateFunction } from 'ajv';
import { linearRegExp } from './validation.js';

/** The module name generated code requires to get the RE2 engine (never a real package). */
const RE2_MODULE = 'leasehold:re2';

/** Why a schema could not be compiled: Ajv's message, or the time bound. */
export class SchemaCompileError extends Error {
  constructor(
    message: string,
    readonly timedOut: boolean,
  ) {
    super(message);
  }
}

// The worker's program (CommonJS, evaluated): a fresh Ajv per schema, so nothing a schema adds outlives its compile.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const req = require('node:module').createRequire(workerData.base);
const { Ajv } = req('ajv');
const standalone = req('ajv/dist/standalone').default;
const addFormats = req('ajv-formats').default;
const { RE2JS } = req('re2js');
const vm = require('node:vm');
// Loaded: the time bound of a compile starts only now, so a worker's start-up never counts against a schema.
parentPort.postMessage({ ready: true });
const engine = Object.assign((pattern) => {
  const compiled = RE2JS.compile(pattern);
  return { test: (input) => compiled.test(input), toString: () => 're2:' + pattern };
}, { code: 'require(' + JSON.stringify(workerData.re2Module) + ').linearRegExp' });
parentPort.on('message', ({ id, schema }) => {
  try {
    const ajv = new Ajv({
      coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false, strict: false,
      addUsedSchema: false, code: { source: true, esm: false, regExp: engine },
    });
    addFormats(ajv);
    const source = workerData.prefix + standalone(ajv, ajv.compile(schema)) + workerData.suffix;
    // Run once so V8 compiles the validate function; the code cache then holds it compiled.
    const script = new vm.Script(source, { filename: workerData.filename });
    const module = { exports: {} };
    script.runInThisContext()((name) => (name === workerData.re2Module ? { linearRegExp: engine } : req(name)), module, module.exports);
    try {
      const result = module.exports({});
      // An $async schema's validator answers a promise: a rejection must not end the worker.
      if (result !== null && typeof result === 'object' && typeof result.then === 'function') result.then(undefined, () => {});
    } catch {}
    const cache = script.createCachedData();
    parentPort.postMessage({ id, source, cache }, [cache.buffer]);
  } catch (error) {
    parentPort.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
  }
});
`;

interface Pending {
  readonly id: number;
  readonly schema: object | boolean;
  readonly resolve: (validate: ValidateFunction) => void;
  readonly reject: (error: SchemaCompileError) => void;
}

type WorkerAnswer =
  | { readonly ready: true }
  | { readonly id: number; readonly source: string; readonly cache: Uint8Array }
  | { readonly id: number; readonly error: string };

const runtimeRequire = createRequire(import.meta.url);

function requireForGeneratedCode(name: string): unknown {
  if (name === RE2_MODULE) return { linearRegExp };
  // Only what Ajv's standalone output names: its runtime helpers and ajv-formats' formats.
  if (name.startsWith('ajv/dist/runtime/') || name === 'ajv-formats/dist/formats') return runtimeRequire(name);
  throw new Error(`generated schema code required ${name}`);
}

/** Ajv's CommonJS output, wrapped so that evaluating it gives a function of (require, module, exports). */
const WRAPPER = { prefix: '(function (require, module, exports) {', suffix: '\n})', filename: 'leasehold-kind-schema.js' };

type ModuleFunction = (require: (name: string) => unknown, module: { exports: unknown }, exports: unknown) => void;

/** Turns the worker's wrapped standalone source into its validate function, compiled from V8's code cache. */
export function evaluateStandalone(source: string, cache: Uint8Array | undefined): ValidateFunction {
  const cachedData = cache === undefined ? undefined : Buffer.from(cache.buffer, cache.byteOffset, cache.byteLength);
  const script = new Script(source, { filename: WRAPPER.filename, ...(cachedData === undefined ? {} : { cachedData }) });
  const module = { exports: {} as unknown };
  (script.runInThisContext() as ModuleFunction)(requireForGeneratedCode, module, module.exports);
  return module.exports as ValidateFunction;
}

export class SchemaCompiler {
  private worker: Worker | null = null;
  /** Whether the worker has loaded Ajv and can take a schema. */
  private ready = false;
  private readonly queue: Pending[] = [];
  private running: { readonly job: Pending; readonly timer: NodeJS.Timeout } | null = null;
  private nextId = 1;
  private closed = false;

  constructor(readonly timeoutMs: number) {}

  /** Compiles one schema; rejects with SchemaCompileError (Ajv's message, or the time bound). */
  compile(schema: object | boolean): Promise<ValidateFunction> {
    return new Promise<ValidateFunction>((resolve, reject) => {
      if (this.closed) {
        reject(new SchemaCompileError('the schema compiler is closed', false));
        return;
      }
      this.queue.push({ id: this.nextId++, schema, resolve, reject });
      this.pump();
    });
  }

  /** Stops the worker; compiles still queued are refused. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new SchemaCompileError('the schema compiler is closed', false));
    if (this.running !== null) {
      clearTimeout(this.running.timer);
      this.running.job.reject(new SchemaCompileError('the schema compiler is closed', false));
      this.running = null;
    }
    const worker = this.worker;
    this.worker = null;
    if (worker !== null) await worker.terminate();
  }

  private pump(): void {
    if (this.running !== null || this.closed || this.queue.length === 0) return;
    const worker = this.ensureWorker();
    if (!this.ready) return;
    const job = this.queue.shift();
    if (job === undefined) return;
    const timer = setTimeout(() => this.timeOut(), this.timeoutMs);
    timer.unref();
    this.running = { job, timer };
    worker.postMessage({ id: job.id, schema: job.schema });
  }

  private ensureWorker(): Worker {
    if (this.worker !== null) return this.worker;
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { base: import.meta.url, re2Module: RE2_MODULE, ...WRAPPER } });
    worker.unref();
    this.ready = false;
    worker.on('message', (answer: WorkerAnswer) => {
      if (this.worker !== worker) return;
      if ('ready' in answer) {
        this.ready = true;
        this.pump();
      } else this.answer(answer);
    });
    worker.on('error', (error: Error) => this.fail(worker, error.message));
    worker.on('exit', () => this.fail(worker, 'the schema compiler stopped'));
    this.worker = worker;
    return worker;
  }

  private answer(answer: Exclude<WorkerAnswer, { readonly ready: true }>): void {
    const running = this.running;
    if (running === null || running.job.id !== answer.id) return;
    clearTimeout(running.timer);
    this.running = null;
    if ('error' in answer) running.job.reject(new SchemaCompileError(answer.error, false));
    else {
      try {
        running.job.resolve(evaluateStandalone(answer.source, answer.cache));
      } catch (error) {
        running.job.reject(new SchemaCompileError(error instanceof Error ? error.message : 'generated code failed', false));
      }
    }
    this.pump();
  }

  private timeOut(): void {
    const running = this.running;
    if (running === null) return;
    this.running = null;
    const worker = this.worker;
    this.worker = null;
    void worker?.terminate();
    running.job.reject(new SchemaCompileError(`too complex to compile within ${this.timeoutMs} ms`, true));
    this.pump();
  }

  /** The worker died on its own (out of memory, a crash): refuse the compile it held and start afresh. */
  private fail(worker: Worker, reason: string): void {
    if (this.worker !== worker) return;
    this.worker = null;
    const running = this.running;
    if (running !== null) {
      clearTimeout(running.timer);
      this.running = null;
      running.job.reject(new SchemaCompileError(reason, false));
    }
    this.pump();
  }
}
