// Awaiting stream and event completion without blocking the event loop. See Note [completion path] in
// src/native/completion.h: a host function wakes the JS thread; a poll (every 250 ms while anything is pending)
// backs every wait, because the driver stops running host functions once a context has faulted.
import { native, NOT_READY, type Box } from './native.js';
import { validateOptions, validateSignal } from './validate.js';

/** How often pending waits are polled, in milliseconds (DESIGN.md: at most every 250 ms). */
export const POLL_INTERVAL_MS = 250;

interface Waiter {
  device: number;
  status: () => number; // CUresult of a non-blocking query: 0 done, 600 busy, else the failure
  call: string;
  detail: string;
  resolve: () => void;
  reject: (error: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

const waiters = new Map<number, Waiter>();
let nextToken = 1;
let pollTimer: NodeJS.Timeout | undefined;

function settle(token: number, error?: unknown): void {
  const waiter = waiters.get(token);
  if (!waiter) return; // already settled by the poll or an abort; a late host function lands here
  waiters.delete(token);
  if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
  if (waiters.size === 0) {
    native.completionUnref();
    clearInterval(pollTimer);
    pollTimer = undefined;
  }
  if (error === undefined) waiter.resolve();
  else waiter.reject(error);
}

function failure(waiter: Waiter, code: number): Error {
  return native.cudaError(code, waiter.call, waiter.detail);
}

// A destroyed object's queued work still completes; its status can no longer be asked, so only a fault counts.
function safeStatus(waiter: Waiter): number {
  try {
    return waiter.status();
  } catch {
    return NOT_READY;
  }
}

function poll(): void {
  for (const [token, waiter] of waiters) {
    const fault = native.deviceFault(waiter.device);
    if (fault !== 0) {
      settle(token, failure(waiter, fault));
      continue;
    }
    const status = safeStatus(waiter);
    if (status === 0) settle(token);
    else if (status !== NOT_READY) settle(token, failure(waiter, status));
  }
}

// Runs on this thread when a host function reports that the work before it is done.
native.completionInit((token: number) => {
  const waiter = waiters.get(token);
  if (!waiter) return;
  const fault = native.deviceFault(waiter.device);
  if (fault !== 0) return settle(token, failure(waiter, fault));
  const status = safeStatus(waiter);
  settle(token, status === 0 || status === NOT_READY ? undefined : failure(waiter, status));
});

/** What a wait needs: how to ask without blocking, how to enqueue the wake-up, and names for errors. */
export interface WaitTarget {
  device: number;
  status: () => number;
  notify: (token: number) => void;
  call: string;
  detail: string;
}

/** Resolves once the target's work is done; rejects with the CudaError if it failed, or with `signal.reason` on
 * abort. Settles at once when the target is already idle (no host function round trip). */
export function waitFor(target: WaitTarget, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  // No separate fault check here: after a sticky fault every query returns the sticky error itself.
  const status = target.status();
  if (status === 0) return Promise.resolve();
  if (status !== NOT_READY) return Promise.reject(native.cudaError(status, target.call, target.detail));
  return new Promise<void>((resolve, reject) => {
    const token = nextToken++;
    target.notify(token);
    const waiter: Waiter = { ...target, resolve, reject, signal, onAbort: undefined };
    if (signal) {
      waiter.onAbort = () => settle(token, signal.reason);
      signal.addEventListener('abort', waiter.onAbort, { once: true });
    }
    if (waiters.size === 0) {
      native.completionRef(); // keeps the process alive exactly while something is pending
      pollTimer = setInterval(poll, POLL_INTERVAL_MS).unref();
    }
    waiters.set(token, waiter);
  });
}

/** `synchronize(options)` of streams and events: validates `{ signal }`, then waits for `target()` (called after
 * validation, so a use-after-destroy check inside it comes second). Never throws: every failure rejects. */
export function synchronizeWith(options: unknown, target: () => WaitTarget): Promise<void> {
  try {
    const o = validateOptions<{ signal?: AbortSignal }>(options, 'options', 'synchronize', ['signal']);
    return waitFor(target(), validateSignal(o.signal, 'options.signal'));
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Waits pending in this thread (for tests and diagnostics). */
export function pendingWaits(): number {
  return waiters.size;
}

export type { Box };
