// The runners of the executor benchmark: who runs a device's share of the tasks. The main thread alone (--workers 0),
// worker threads sharing its pool (--workers N), or, with --processes, an executor process of its own for the device,
// which runs one of the first two inside it (executor-process.ts).
import { fork, type ChildProcess } from 'node:child_process';
import { Worker } from 'node:worker_threads';

import type { StreamPool } from 'cuda-stream-pool';
import { BatchThread, type BatchSetup } from './batch.js';
import type { FromWorker, ToWorker } from './executor-worker.js';
import type { Mode } from './modes.js';
import type { BatchResult } from './task.js';

/** The `index`-th of `parts` near-equal shares of `total` (the first `total % parts` shares get one more). */
export function share(total: number, parts: number, index: number): number {
  return Math.floor(total / parts) + (index < total % parts ? 1 : 0);
}

/** Runs a mode's tasks on some threads: the main thread alone, or a group of workers. */
export interface Runner {
  /** Runs `count` tasks numbered from `first` (split among the threads); resolves with each thread's batch. */
  run(mode: Mode, first: number, count: number, timed: boolean, onTasksDone: (tasks: number) => void): Promise<BatchResult[]>;
  /** Frees every thread's state. `failed`: a run failed, and workers may still have tasks in flight, so they are
   * terminated (a terminated worker gives its leases back) instead of asked to finish. */
  dispose(failed: boolean): Promise<void>;
}

/** The main thread runs every task itself (--workers 0). */
export class LocalRunner implements Runner {
  private constructor(private readonly thread: BatchThread) {}

  static async create(setup: BatchSetup, pool: StreamPool | undefined): Promise<LocalRunner> {
    return new LocalRunner(await BatchThread.create(setup, pool));
  }

  async run(mode: Mode, first: number, count: number, timed: boolean, onTasksDone: (tasks: number) => void): Promise<BatchResult[]> {
    return [await this.thread.run(mode, first, count, timed, timed ? onTasksDone : undefined)];
  }

  async dispose(): Promise<void> {
    // The main thread's batch has no task in flight once run() settled, failed or not.
    this.thread.dispose();
  }
}

/** An error that a worker thread or an executor process reported, rebuilt on the main thread: its name and message,
 * `where` it happened (`worker 2`), and its stack there. */
export class ThreadFailure extends Error {
  constructor(
    name: string,
    message: string,
    /** The thread or process that failed, as `worker 2` or `the executor process of device 1`. */
    readonly where: string,
    stack: string | undefined,
  ) {
    super(message);
    this.name = name;
    this.stack = `${name}: ${message}\n    (in ${where})${stack ? `\n${stack.split('\n').slice(1).join('\n')}` : ''}`;
  }
}

/** `within`: where inside the reporting process it happened, when that process had it from a worker of its own. */
function workerError(message: Extract<FromWorker, { kind: 'failed' }> & { within?: string }, where: string): Error {
  return new ThreadFailure(message.name, message.message, message.within ? `${message.within} of ${where}` : where, message.stack);
}

/** One request at a time to a worker thread or a child process, answered by what it sends back: ticks along the way,
 * then an answer, or a failure or its death, which also refuses every later request. */
class Conversation<A> {
  #pending: { resolve: (answer: A | undefined) => void; reject: (error: Error) => void } | undefined;
  #onTick: ((tasks: number) => void) | undefined;
  #dead: Error | undefined;

  /** True once the other side failed or died. */
  get dead(): boolean {
    return this.#dead !== undefined;
  }

  /** The other side finished `tasks` more tasks of the request. */
  tick(tasks: number): void {
    this.#onTick?.(tasks);
  }

  /** The request's answer, or (with `error`) the failure or death that ends it and every later one. */
  settle(error: Error | undefined, answer?: A): void {
    const pending = this.#pending;
    this.#pending = undefined;
    if (error) this.#dead ??= error;
    if (!pending) return;
    if (error) pending.reject(error);
    else pending.resolve(answer);
  }

  /** Sends the request with `send` and resolves with its answer; rejects with the failure or death. */
  ask(send: () => void, onTick?: (tasks: number) => void): Promise<A | undefined> {
    if (this.#dead) return Promise.reject(this.#dead);
    this.#onTick = onTick;
    const answer = new Promise<A | undefined>((resolve, reject) => {
      this.#pending = { resolve, reject };
    });
    send();
    return answer;
  }
}

/** One worker thread and the request it is answering. */
class WorkerLink {
  readonly worker: Worker;
  readonly #conversation = new Conversation<BatchResult>();
  readonly exited: Promise<number>;

  constructor(
    readonly index: number,
    setup: BatchSetup,
  ) {
    this.worker = new Worker(new URL('./executor-worker.js', import.meta.url), { workerData: setup });
    this.exited = new Promise((resolve) => this.worker.once('exit', resolve));
    const conversation = this.#conversation;
    this.worker.on('message', (message: FromWorker) => {
      if (message.kind === 'tick') conversation.tick(message.tasks);
      else if (message.kind === 'failed') conversation.settle(workerError(message, `worker ${index}`));
      else conversation.settle(undefined, message.kind === 'done' ? message.result : undefined);
    });
    this.worker.on('error', (error) => conversation.settle(error));
    this.worker.on('exit', (code) => conversation.settle(new Error(`cuda-stream-pool bench: worker ${index} exited with code ${code} before answering.`)));
  }

  /** Resolves when the worker sent its next answer ('ready' or 'done'); rejects when it failed or died. */
  next(message: ToWorker | undefined, onTick?: (tasks: number) => void): Promise<BatchResult | undefined> {
    return this.#conversation.ask(() => {
      if (message) this.worker.postMessage(message);
    }, onTick);
  }
}

/** Worker threads sharing the main thread's pool (--workers N): tasks and slots are split among them. */
export class WorkerRunner implements Runner {
  private constructor(
    private readonly links: WorkerLink[],
    private readonly workers: number,
  ) {}

  static async create(setup: BatchSetup, workers: number, concurrency: number): Promise<WorkerRunner> {
    const links: WorkerLink[] = [];
    for (let w = 0; w < workers; w++) {
      links.push(new WorkerLink(setup.thread + w + 1, { ...setup, slots: share(concurrency, workers, w), thread: setup.thread + w + 1 }));
    }
    const runner = new WorkerRunner(links, workers);
    try {
      await Promise.all(links.map((link) => link.next(undefined)));
    } catch (error) {
      await runner.dispose(true);
      throw error;
    }
    return runner;
  }

  async run(mode: Mode, start: number, count: number, timed: boolean, onTasksDone: (tasks: number) => void): Promise<BatchResult[]> {
    let first = start;
    const answers = this.links.map((link, w) => {
      const mine = share(count, this.workers, w);
      const message: ToWorker = { kind: 'run', mode, first, count: mine, timed };
      first += mine;
      return link.next(message, onTasksDone);
    });
    const results = await Promise.all(answers);
    return results.filter((r): r is BatchResult => r !== undefined);
  }

  async dispose(failed: boolean): Promise<void> {
    await Promise.all(
      this.links.map(async (link) => {
        if (failed) {
          await link.worker.terminate();
          return;
        }
        link.worker.postMessage({ kind: 'exit' } satisfies ToWorker);
        // A worker that does not exit within 10 s of being asked is terminated.
        const timer = setTimeout(() => void link.worker.terminate(), 10_000);
        await link.exited;
        clearTimeout(timer);
      }),
    );
  }
}

/** What an executor process needs to run a device's share: the thread setup of its main thread, and how to build
 * its pool and runner there. */
export interface ProcessSetup {
  setup: BatchSetup;
  /** Worker threads inside the process (--workers), sharing its pool. */
  workers: number;
  /** Tasks in flight in the process, split among its workers. */
  concurrency: number;
  /** The pool's streams; 0: the modes run need no pool. */
  poolSize: number;
}

/** Parent → executor process. */
export type ToProcess = { kind: 'setup'; setup: ProcessSetup } | { kind: 'run'; mode: Mode; first: number; count: number; timed: boolean } | { kind: 'exit' };

/** Executor process → parent. */
export type FromProcess =
  | { kind: 'ready' }
  | { kind: 'tick'; tasks: number }
  | { kind: 'done'; results: BatchResult[] }
  | { kind: 'failed'; name: string; message: string; stack: string | undefined; within: string | undefined };

/** One executor process per device (--processes): a child process with its own CUDA context, pool and threads runs
 * the device's share, and answers with the same batches an in-process runner gives. Messages use structured clone
 * (`serialization: 'advanced'`), so typed arrays cross as they are. */
export class ProcessRunner implements Runner {
  readonly #child: ChildProcess;
  readonly #exited: Promise<number | null>;
  readonly #conversation = new Conversation<BatchResult[]>();

  private constructor(readonly device: number) {
    this.#child = fork(new URL('./executor-process.js', import.meta.url), [], { serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.#exited = new Promise((resolve) => this.#child.once('exit', (code) => resolve(code)));
    const conversation = this.#conversation;
    this.#child.on('message', (message: FromProcess) => {
      if (message.kind === 'tick') conversation.tick(message.tasks);
      else if (message.kind === 'failed') conversation.settle(workerError(message, `the executor process of device ${device}`));
      else conversation.settle(undefined, message.kind === 'done' ? message.results : undefined);
    });
    this.#child.on('error', (error) => conversation.settle(error));
    this.#child.on('exit', (code, signal) =>
      conversation.settle(new Error(`cuda-stream-pool bench: the executor process of device ${device} exited (${signal ?? `code ${code}`}) before answering.`)),
    );
  }

  /** Starts the process and waits until it has its pool, threads and inputs ready. */
  static async create(setup: ProcessSetup): Promise<ProcessRunner> {
    const runner = new ProcessRunner(setup.setup.device);
    try {
      await runner.#next({ kind: 'setup', setup });
    } catch (error) {
      await runner.dispose(true);
      throw error;
    }
    return runner;
  }

  #next(message: ToProcess, onTick?: (tasks: number) => void): Promise<BatchResult[] | undefined> {
    return this.#conversation.ask(() => this.#child.send(message), onTick);
  }

  async run(mode: Mode, first: number, count: number, timed: boolean, onTasksDone: (tasks: number) => void): Promise<BatchResult[]> {
    return (await this.#next({ kind: 'run', mode, first, count, timed }, onTasksDone)) ?? [];
  }

  async dispose(failed: boolean): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    if (failed || this.#conversation.dead) this.#child.kill('SIGKILL');
    else {
      this.#child.send({ kind: 'exit' } satisfies ToProcess);
      // A process that does not exit within 10 s of being asked is killed.
      const timer = setTimeout(() => this.#child.kill('SIGKILL'), 10_000);
      await this.#exited;
      clearTimeout(timer);
      return;
    }
    await this.#exited;
  }
}

/** Builds the runner of one device's share in this process: the main thread alone or `workers` worker threads, over
 * `pool` (shared with the workers). */
export async function createRunner(setup: BatchSetup, pool: StreamPool | undefined, workers: number, concurrency: number): Promise<Runner> {
  if (workers === 0) return LocalRunner.create(setup, pool);
  return WorkerRunner.create(pool ? { ...setup, sharedPool: pool.share() } : setup, workers, concurrency);
}
