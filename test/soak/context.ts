// What every soak operation works with in one thread: the model, the random choices, the checks of errors and
// waits, the waits still pending, and the tallies.
import type { SharedDeviceBuffer, SharedStreamPool } from 'cuda-stream-pool';

import { describeError, errorProblem, SoakFailure, type ErrorKind } from './check.js';
import type { Heartbeat } from './heartbeat.js';
import type { LeaseLedger } from './ledger.js';
import { Model, type PoolEntry } from './model.js';
import type { Random } from './random.js';

/** How a wait ended. */
export type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/* Note [soak waits]: a promise an operation does not await at once (a stream or event wait, an acquire or run waiting
 * for a lease) is tracked as pending, with a check that is applied to its outcome when a later step (or the
 * teardown) settles it, raced against the step timeout. The check reads the model at that time, since what is right
 * depends on what happened meanwhile (an acquire on a pool destroyed since may reject with DestroyedError).
 * A thread has at most one acquire() or run() waiting for a lease at a time (`leaseWaits`), and before it awaits
 * one it releases every lease it holds, on every pool. So a thread blocked on a lease holds none (no cycle of
 * threads each holding what the next waits for can form, across pools either), and the holders, which go on
 * stepping or only await GPU work, release theirs: no deadlock of the harness's own making can pass for a hang of
 * the library. */
export interface Pending {
  readonly label: string;
  readonly step: number;
  readonly outcome: Promise<Outcome>;
  /** Undefined when the outcome is right, else what is wrong. */
  readonly check: (outcome: Outcome) => string | undefined;
  /** The pool whose lease this waits for (Note [soak waits]). */
  readonly pool?: PoolEntry;
}

/** What one thread's steps share. */
export interface ContextSetup {
  /** The ledger's id of this thread: 1 for the main thread, 2 and up for workers. */
  thread: number;
  isMain: boolean;
  random: Random;
  heartbeat: Heartbeat;
  stepTimeoutMs: number;
  /** The test kernels' PTX text. */
  ptx: string;
  /** Calls the garbage collector (node --expose-gc). */
  gc: () => void;
}

export class Context {
  readonly model = new Model();
  readonly thread: number;
  readonly isMain: boolean;
  readonly random: Random;
  readonly heartbeat: Heartbeat;
  readonly stepTimeoutMs: number;
  readonly ptx: string;
  readonly gc: () => void;
  /** The step now running (1 for the first). */
  step = 0;
  /** Failures found outside a step's own code (a lease callback, a worker's report); the runner fails on the first. */
  readonly failures: string[] = [];
  readonly pending: Pending[] = [];
  /** Steps per operation name. */
  readonly tally = new Map<string, number>();
  /** Invalid calls that got the right typed error. */
  invalidCalls = 0;
  /** acquire() and run() calls of this thread not granted yet (at most one: Note [soak waits]). */
  leaseWaits = 0;
  /** Round trips whose bytes came back right. */
  roundTrips = 0;
  /** Shared buffers received from the main thread, not attached yet (workers). */
  readonly inbox: SharedDeviceBuffer[] = [];
  /** The pool the main thread shares with the workers, and its ledger (every thread's view of one buffer). */
  sharedPool: { record: SharedStreamPool; ledger: LeaseLedger } | undefined;
  /** The ledger of StreamPool.default() of device 0, shared by every thread. */
  defaultLedger: LeaseLedger | undefined;

  constructor(setup: ContextSetup) {
    this.thread = setup.thread;
    this.isMain = setup.isMain;
    this.random = setup.random;
    this.heartbeat = setup.heartbeat;
    this.stepTimeoutMs = setup.stepTimeoutMs;
    this.ptx = setup.ptx;
    this.gc = setup.gc;
  }

  /** Resolves as `promise` does, or throws a SoakFailure naming `what` and the step when it takes longer than the
   * step timeout (a hang). */
  async within<T>(promise: Promise<T>, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new SoakFailure(`hang: ${what} did not settle within ${this.stepTimeoutMs} ms (step ${this.step})`)),
        this.stepTimeoutMs,
      );
    });
    try {
      return await Promise.race([promise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Calls `fn`, which must throw a typed error of one of `kinds`. @throws SoakFailure otherwise. */
  invalid(what: string, kinds: readonly ErrorKind[], fn: () => unknown): void {
    let result: unknown;
    try {
      result = fn();
    } catch (error) {
      this.#checkError(what, kinds, error);
      return;
    }
    if (result instanceof Promise) result.catch(() => undefined);
    throw new SoakFailure(`${what} was accepted; expected a ${kinds.join(' or ')} error`);
  }

  /** Calls `fn`, which must throw, or return a promise that rejects, with a typed error of one of `kinds` (for calls
   * whose argument checks may come before or inside their promise). @throws SoakFailure otherwise. */
  async invalidEither(what: string, kinds: readonly ErrorKind[], fn: () => unknown): Promise<void> {
    let result: unknown;
    try {
      result = fn();
    } catch (error) {
      this.#checkError(what, kinds, error);
      return;
    }
    if (result instanceof Promise) return this.invalidAsync(what, kinds, result);
    throw new SoakFailure(`${what} was accepted; expected a ${kinds.join(' or ')} error`);
  }

  /** Awaits `promise`, which must reject with a typed error of one of `kinds`. @throws SoakFailure otherwise. */
  async invalidAsync(what: string, kinds: readonly ErrorKind[], promise: Promise<unknown>): Promise<void> {
    const outcome = await this.within(settled(promise), what);
    if (outcome.ok) throw new SoakFailure(`${what} resolved; expected it to reject with a ${kinds.join(' or ')} error`);
    this.#checkError(what, kinds, outcome.error);
  }

  #checkError(what: string, kinds: readonly ErrorKind[], error: unknown): void {
    const problem = errorProblem(error, kinds);
    if (problem) throw new SoakFailure(`${what} threw ${problem}${untypedStack(error)}`);
    this.invalidCalls++;
  }

  /** Tracks a wait that a later step settles (Note [soak waits]). */
  track(label: string, promise: Promise<unknown>, check: Pending['check'], pool?: PoolEntry): void {
    this.pending.push({ label, step: this.step, outcome: settled(promise), check, pool });
  }

  /** Records a failure found outside a step's own code. */
  fail(message: string): void {
    this.failures.push(message);
  }
}

/** The outcome of `promise`, never rejecting (so nothing is an unhandled rejection meanwhile). */
export function settled(promise: Promise<unknown>): Promise<Outcome> {
  return promise.then(
    (value) => ({ ok: true, value }) as const,
    (error: unknown) => ({ ok: false, error }) as const,
  );
}

/** A check for a wait that must resolve. */
export function mustResolve(outcome: Outcome): string | undefined {
  return outcome.ok ? undefined : `rejected with ${describeError(outcome.error)}${untypedStack(outcome.error)}`;
}

/** The stack of an error that is not a typed one, to find where it came from. */
export function untypedStack(error: unknown): string {
  return errorProblem(error, ['type', 'value', 'range', 'destroyed', 'cuda', 'capture', 'compile']) && error instanceof Error && error.stack ? `\n${error.stack}` : '';
}
