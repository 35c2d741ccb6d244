/**
 * The processes of the chaos soak: one coordinator that always comes back on
 * the same database and port (so workers and the producer need no new
 * address), and worker processes that are replaced when killed. Everything a
 * process printed is kept after it dies, so the soak can count what the
 * workers retried and what the coordinator logged as internal errors.
 */

import { startProcess, startWorker, type RunningProcess } from './processes.js';

export interface SoakClusterOptions {
  readonly db: string;
  readonly port: number;
  readonly workerKey: string;
  readonly handlers: string;
  readonly workers: number;
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly ledgerFile: string;
  /** Extra `serve` flags (reaper interval, backoff). */
  readonly serveArgs: readonly string[];
}

export interface ProcessLog {
  readonly role: 'coordinator' | 'worker';
  readonly pid: number | undefined;
  readonly output: string;
  readonly killedBySoak: boolean;
}

export class SoakCluster {
  readonly url: string;
  private coordinator: RunningProcess | undefined;
  private readonly workers: (RunningProcess | undefined)[];
  private readonly killed = new Set<RunningProcess>();
  private readonly finished: ProcessLog[] = [];
  private generation = 0;
  private closing = false;
  /** Processes that exited without being killed by the soak (each one is replaced). */
  unexpectedExits = 0;

  constructor(private readonly options: SoakClusterOptions) {
    this.url = `http://127.0.0.1:${options.port}`;
    this.workers = Array.from({ length: options.workers }, () => undefined);
  }

  get workerCount(): number {
    return this.workers.length;
  }

  async start(): Promise<void> {
    await this.startCoordinator();
    await Promise.all(this.workers.map((_, index) => this.startWorker(index)));
  }

  /** SIGKILLs the coordinator, waits `downMs`, and starts it again on the same port; resolves once it listens. */
  async killCoordinator(downMs: number): Promise<void> {
    const victim = this.coordinator;
    if (victim !== undefined) await this.kill(victim);
    if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
    await this.startCoordinator();
  }

  /** SIGKILLs worker `index` and starts a replacement; resolves once the replacement is up. */
  async killWorker(index: number): Promise<void> {
    const victim = this.workers[index];
    if (victim !== undefined) await this.kill(victim);
    await this.startWorker(index);
  }

  /** Kills everything (the soak has already drained the queue) and returns every process's log. */
  async stop(): Promise<ProcessLog[]> {
    this.closing = true;
    const alive = [this.coordinator, ...this.workers].filter((p): p is RunningProcess => p !== undefined);
    await Promise.all(alive.map((p) => this.kill(p)));
    return this.finished;
  }

  /** Stops the workers only, so that no handler writes to the ledger while it is read. */
  async stopWorkers(): Promise<void> {
    this.closing = true;
    await Promise.all(this.workers.filter((p): p is RunningProcess => p !== undefined).map((p) => this.kill(p)));
  }

  private async kill(victim: RunningProcess): Promise<void> {
    this.killed.add(victim);
    await victim.stop('SIGKILL');
  }

  private async startCoordinator(): Promise<void> {
    const { db, port, serveArgs } = this.options;
    // The old process's socket is closed by the kernel when it dies; a bind can still race a slow exit, so try a few times.
    for (let attempt = 1; ; attempt++) {
      const started = startProcess(['serve', '--db', db, '--port', String(port), '--host', '127.0.0.1', ...serveArgs], {
        readyPattern: /listening on (http:\/\/[^\s"]+)/,
      });
      this.track(started.process, 'coordinator', () => this.startCoordinator());
      try {
        await started.ready;
        this.coordinator = started.process;
        return;
      } catch (error) {
        if (attempt >= 5 || !/EADDRINUSE/.test(started.process.output())) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  }

  private async startWorker(index: number): Promise<void> {
    const { workerKey, handlers, concurrency, leaseMs, ledgerFile } = this.options;
    this.generation += 1;
    const worker = startWorker({
      url: this.url,
      key: workerKey,
      handlers,
      concurrency,
      workerId: `soak-w${index}-g${this.generation}`,
      // grace 0: a SIGTERM at the end aborts at once; --wait-ms 2000 keeps long polls short across coordinator restarts.
      extraArgs: ['--lease-ms', String(leaseMs), '--wait-ms', '2000', '--grace-ms', '0'],
      env: { SOAK_LEDGER: ledgerFile },
    });
    this.workers[index] = worker;
    this.track(worker, 'worker', () => this.startWorker(index));
    await worker.ready;
  }

  /** Keeps the process's log once it exits, and replaces a process that died on its own. */
  private track(process: RunningProcess, role: ProcessLog['role'], replace: () => Promise<void>): void {
    void process.exited.then(() => {
      const killedBySoak = this.killed.has(process);
      this.finished.push({ role, pid: process.child.pid, output: process.output(), killedBySoak });
      const current = role === 'coordinator' ? this.coordinator === process : this.workers.includes(process);
      if (!killedBySoak && current && !this.closing) {
        this.unexpectedExits += 1;
        replace().catch(() => undefined);
      }
    });
  }
}
