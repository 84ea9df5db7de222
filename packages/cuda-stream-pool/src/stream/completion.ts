// Awaiting stream and event completion without blocking the event loop. See Note [completion engine] in
// stream/completion.h: the library enqueues a marker that does not block the stream, one native poller thread
// per process watches the markers, and finished waits reach this thread in batches, settled by one callback.
import { native, NOT_READY, type NativeRef, type CompletionStats } from '../binding/binding.js';
import { whenAborted } from '../internal/abort.js';
import { validateOptions, validateSignal } from '../internal/validate.js';

interface Waiter {
  call: string;
  detail: () => string;
  resolve: () => void;
  reject: (error: unknown) => void;
  stopAbort: (() => void) | undefined;
}

/** This thread's waits, shared by every evaluation of this module in the thread (a bundler's or a test runner's second
 * copy of the library): the addon has one completion channel per thread, so one dispatch must settle every copy's
 * waits, and their tokens must come from one counter. */
interface CompletionState {
  waiters: Map<number, Waiter>;
  nextToken: number;
  /** Staged device-to-host copies of this thread that may not have landed yet (see landPending()). */
  landingsPending: number;
}

const shared = native.threadShared() as { completion?: CompletionState };
const state: CompletionState = (shared.completion ??= startCompletion());
const waiters = state.waiters;

function startCompletion(): CompletionState {
  const fresh: CompletionState = { waiters: new Map(), nextToken: 1, landingsPending: 0 };
  // Runs on this thread once per batch of finished waits (results: 0, or what failed them, as waitError reads it).
  native.completionInit((tokens: number[], results: (number | Error)[]) => {
    fresh.landingsPending = native.completionFlush();
    for (let i = 0; i < tokens.length; i++) settle(tokens[i]!, results[i]!);
  });
  return fresh;
}

/** The CudaError for a failed wait's result, as the native side reports it: a CUresult, or, for a sticky fault of
 * another device whose work the waited work waited on, that CUresult plus (device + 1) * 65536 (`wait_result` in
 * internal/device-faults.h; Note [cross-device dependencies] there). The error then names that device. @internal */
export function waitError(result: number, call: string, detail: string): Error {
  if (result < 0x10000) return native.cudaError(result, call, detail);
  const device = Math.floor(result / 0x10000) - 1;
  return native.cudaError(result % 0x10000, call, `${detail} (waiting on device ${device}, which faulted)`);
}

function settle(token: number, result: number | unknown): void {
  const waiter = waiters.get(token);
  if (!waiter) return; // already settled by an abort
  waiters.delete(token);
  waiter.stopAbort?.();
  if (waiters.size === 0) native.completionUnref();
  if (result === 0) waiter.resolve();
  else if (typeof result === 'number') waiter.reject(waitError(result, waiter.call, waiter.detail()));
  else waiter.reject(result);
}

/** Lands every staged device-to-host copy of this thread whose copy is done, so that its bytes are in place before
 * a completion that follows it is reported (a settled wait, or a query that found the work done). @internal */
export function landPending(): void {
  if (state.landingsPending > 0) state.landingsPending = native.completionFlush();
}

/** Notes a staged device-to-host copy queued by this thread. @internal */
export function landingQueued(): void {
  state.landingsPending++;
}

/** What a wait is on: the work queued on a stream so far, or an event's recorded work. */
type WaitKind = 'stream' | 'event';

/** Resolves once the work of `ref` (a stream or event ref, per `kind`) is done; rejects with the CudaError naming
 * `call` and `describe()` if it failed, with `capturing(status)` when the stream is capturing a graph (1 active, 2
 * invalidated), or with `signal.reason` on abort. Settles at once when the work is already done (no marker, no
 * thread hop). A stream's wait starts with one native call (streamWait: capture check, query, marker). Never throws:
 * every failure rejects. */
export function waitFor(
  kind: WaitKind,
  ref: NativeRef,
  call: string,
  describe: () => string,
  signal?: AbortSignal,
  capturing?: (status: number) => Error,
): Promise<void> {
  try {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const token = state.nextToken++;
    // After a sticky fault every query returns the sticky error itself.
    const status = kind === 'stream' ? native.streamWait(ref, token) : native.eventStatus(ref);
    if (status < 0) return Promise.reject(capturing ? capturing(-status) : new Error(`cuda-stream-pool internal: capture status ${-status}`));
    if (status === 0) {
      landPending();
      if (state.landingsPending === 0) return Promise.resolve();
      // A staged copy of this thread that could not be landed yet (its marker not seen done) may be on this stream:
      // then the wait goes through the engine, whose delivery lands copies before it settles waits.
      if (kind === 'stream') native.streamNotify(ref, token);
      else native.eventNotify(ref, token);
    } else if (status !== NOT_READY) return Promise.reject(waitError(status, call, describe()));
    else if (kind === 'event') native.eventNotify(ref, token);
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { call, detail: describe, resolve, reject, stopAbort: undefined };
      if (signal) waiter.stopAbort = whenAborted(signal, () => settle(token, signal.reason));
      if (waiters.size === 0) native.completionRef(); // keeps the process alive exactly while something is pending
      waiters.set(token, waiter);
    });
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The `signal` of `synchronize(options)` of streams and events, validated. @throws TypeError for bad options. */
export function waitSignal(options: unknown): AbortSignal | undefined {
  if (options === undefined) return undefined;
  const o = validateOptions<{ signal?: AbortSignal }>(options, 'options', 'synchronize', ['signal']);
  return validateSignal(o.signal, 'options.signal');
}

// The counters' type lives with the binding that returns them; it is public under this file's name.
export type { CompletionStats };

/**
 * The completion engine's counters: this thread's wake-ups, the waits they settled and the largest batch, and the
 * process-wide poller's state. Counters only grow (except the pending counts and `pollerParked`).
 *
 * Source: the library's own completion engine (markers written by `cuStreamWriteValue64`, or pooled events, watched
 * by one native poller thread per process). Never throws once the native addon loaded.
 */
export function completionStats(): CompletionStats {
  return native.completionStats();
}

export type { NativeRef };
