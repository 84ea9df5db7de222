// The main thread's worker threads: each attaches the shared pool and steps through random operations of its own;
// the main thread posts it shared buffers, terminates workers at random mid-work and starts replacements, and stops
// them all before its teardown. What a worker reports, and any way it ends that nobody asked for, fails the run.
import { Worker } from 'node:worker_threads';

import type { SharedDeviceBuffer, SharedStreamPool } from 'cuda-stream-pool';

import { describeError } from './check.js';
import type { Context } from './context.js';
import { Heartbeat } from './heartbeat.js';
import type { LeaseLedger } from './ledger.js';
import type { Operation } from './operation.js';

/** What a soak worker gets (test/soak/worker.ts). */
export interface WorkerSetup {
  seed: number;
  thread: number;
  slot: number;
  heartbeat: SharedArrayBuffer;
  sharedPool: SharedStreamPool;
  sharedLedger: SharedArrayBuffer;
  defaultLedger: SharedArrayBuffer;
  defaultSize: number;
  stepTimeoutMs: number;
  history: number;
  ptx: string;
}

/** Messages from a worker. */
export type WorkerReport =
  | { type: 'done'; steps: number; tally: Record<string, number>; invalidCalls: number; roundTrips: number }
  | { type: 'failure'; step: number; message: string; lines: string[] };

/** Messages to a worker. */
export type WorkerCommand = { type: 'buffer'; shared: SharedDeviceBuffer } | { type: 'stop' };

interface Running {
  slot: number;
  thread: number;
  worker: Worker;
  exited: Promise<number>;
  /** Set before terminate() or stop: an exit is expected. */
  ending: boolean;
  done: Extract<WorkerReport, { type: 'done' }> | undefined;
}

const workerUrl = new URL('./worker.js', import.meta.url);

export class Fleet {
  readonly #ctx: Context;
  readonly #base: Omit<WorkerSetup, 'thread' | 'slot'>;
  readonly #ledgers: LeaseLedger[];
  readonly #running: Running[] = [];
  #nextThread = 2;
  /** Workers started (replacements included), terminated, and their steps. */
  started = 0;
  terminated = 0;
  steps = 0;
  invalidCalls = 0;
  roundTrips = 0;
  readonly tally = new Map<string, number>();

  constructor(ctx: Context, base: Omit<WorkerSetup, 'thread' | 'slot'>, ledgers: LeaseLedger[]) {
    this.#ctx = ctx;
    this.#base = base;
    this.#ledgers = ledgers;
  }

  /** Starts a worker in heartbeat slot `slot` (1 and up). */
  start(slot: number): void {
    const thread = this.#nextThread++;
    const setup: WorkerSetup = { ...this.#base, thread, slot };
    const worker = new Worker(workerUrl, { workerData: setup });
    const running: Running = { slot, thread, worker, exited: Promise.resolve(0), ending: false, done: undefined };
    const name = `worker slot ${slot} (thread ${thread})`;
    running.exited = new Promise<number>((resolve) => {
      worker.on('exit', (code) => {
        if (!running.ending) this.#ctx.fail(`${name} exited with code ${code} without being asked to`);
        resolve(code);
      });
    });
    worker.on('error', (error) => this.#ctx.fail(`${name} threw an uncaught ${describeError(error)}${error instanceof Error && error.stack ? `\n${error.stack}` : ''}`));
    worker.on('message', (report: WorkerReport) => {
      if (report.type === 'failure')
        this.#ctx.fail(`${name} failed at its step ${report.step}: ${report.message}\nlast steps of ${name}:\n${report.lines.map((l) => `  ${l}`).join('\n')}`);
      else running.done = report;
    });
    this.#running.push(running);
    this.started++;
  }

  /** The running workers' slots. */
  get slots(): number[] {
    return this.#running.map((r) => r.slot);
  }

  /** Posts a shared buffer to the worker in `slot`. */
  post(slot: number, command: WorkerCommand): void {
    this.#running.find((r) => r.slot === slot)?.worker.postMessage(command);
  }

  /** Terminates the worker in `slot` mid-work (its leases come back by the library's cleanup) and starts another. */
  async replace(slot: number): Promise<void> {
    const running = this.#running.find((r) => r.slot === slot);
    if (!running) return;
    running.ending = true;
    for (const ledger of this.#ledgers) ledger.markDying(running.thread);
    const beat = new Heartbeat(this.#base.heartbeat, slot);
    this.steps += beat.read(0).step;
    beat.idle();
    await this.#ctx.within(running.worker.terminate(), `terminate() of worker slot ${slot} (thread ${running.thread})`);
    await this.#ctx.within(running.exited, `exit of worker slot ${slot} (thread ${running.thread})`);
    for (const ledger of this.#ledgers) ledger.clearThread(running.thread);
    this.#running.splice(this.#running.indexOf(running), 1);
    this.terminated++;
    this.start(slot);
  }

  /** Asks every worker to stop, tear down and exit, then waits for each (`onEach` starts a step per worker, so the
   * watchdog sees progress); a worker that does not exit within the step timeout is a hang. */
  async stopAll(onEach: (line: string) => void): Promise<void> {
    for (const running of this.#running) {
      running.ending = true;
      running.worker.postMessage({ type: 'stop' } satisfies WorkerCommand);
    }
    for (const running of this.#running.splice(0)) {
      const name = `worker slot ${running.slot} (thread ${running.thread})`;
      onEach(`end: wait for ${name} to tear down and exit`);
      const code = await this.#ctx.within(running.exited, `exit of ${name} after stop`);
      if (code !== 0) this.#ctx.fail(`${name} exited with code ${code} after stop`);
      else if (!running.done) this.#ctx.fail(`${name} exited without reporting its teardown`);
      if (running.done) {
        this.steps += running.done.steps;
        this.invalidCalls += running.done.invalidCalls;
        this.roundTrips += running.done.roundTrips;
        for (const [op, count] of Object.entries(running.done.tally)) this.tally.set(op, (this.tally.get(op) ?? 0) + count);
      }
      new Heartbeat(this.#base.heartbeat, running.slot).idle();
    }
  }
}

/** Main-thread operations on the workers: share a buffer with one, terminate one mid-work and start a replacement. */
export function fleetOperations(fleet: Fleet): Operation[] {
  return [
    {
      name: 'worker.shareBuffer',
      weight: 3,
      threads: 'main',
      plan(ctx) {
        const slots = fleet.slots;
        const entry = ctx.model.buffers.pick(ctx.random, (b) => !b.view);
        if (!entry || slots.length === 0) return undefined;
        const slot = ctx.random.pick(slots);
        return {
          text: `post ${entry.label}.share() to worker slot ${slot}`,
          run: () => fleet.post(slot, { type: 'buffer', shared: entry.buffer.share() }),
        };
      },
    },
    {
      name: 'worker.terminate',
      weight: 0.2,
      threads: 'main',
      plan(ctx) {
        const slots = fleet.slots;
        if (slots.length === 0) return undefined;
        const slot = ctx.random.pick(slots);
        return { text: `terminate worker slot ${slot} mid-work and start a replacement`, run: () => fleet.replace(slot) };
      },
    },
  ];
}
