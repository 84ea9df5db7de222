// The current stream: scoped per async context (AsyncLocalStorage), else the device's per-thread default stream.
import { AsyncLocalStorage } from 'node:async_hooks';

import { type Device, resolveDevice } from '../device/device.js';
import { Stream } from './stream.js';
import { streams } from '../internal/handles.js';
import { invalidType, validateFunction } from '../internal/validate.js';

/** One withStream scope: its stream and the scope it is nested in, so that a pool can tell whether the calling
 * context holds one of its leases at any depth (pool.close() inside pool.run()). The stream is a Stream except in the
 * pool policy's CPU tests, which enter scopes of stand-ins through enterScope(). */
interface Scope {
  readonly stream: object;
  readonly outer: Scope | undefined;
}

/* Note [scope and the await tax]: on Node 20 and 22 an AsyncLocalStorage in use installs promise hooks, and every
 * later `await` of the process, in any code, costs about 2.5× as much (a settled promise's await, 38 ns before the
 * first run(), 90-100 ns after; Node 24 keeps the context in async context frames and pays nothing). The storage could
 * be disabled again whenever no scope is active (disable() removes the hooks once no storage is enabled: measured, the
 * await goes back to its old cost), but that changes what a continuation sees: a callback or promise reaction made
 * inside a scope that runs after the scope ended (a timer, a reaction of a promise the scope did not await) reads its
 * store through the hooks' bookkeeping, and with the storage disabled it sees no scope, so currentStream() would
 * silently become the per-thread stream instead of the retired lease stream, whose use throws. Knowing that no such
 * continuation is pending would need the very hooks whose cost is in question, so the storage stays enabled. */
const scope = new AsyncLocalStorage<Scope>();

/** The stream that work without an explicit stream goes to: the innermost `withStream`/`pool.run` scope's stream
 * (when `device` is given, only if it is on that device), else the calling thread's per-thread default stream of
 * `device` (default 0). Follows async context: correct across awaits, in nested and concurrent scopes.
 * @throws {@link DestroyedError} never here; using a lease's stream after its lease ended throws it.
 * {@link CudaUnavailableError} without a GPU when no scope is active. */
export function currentStream(device?: Device | number): Stream {
  const scoped = scope.getStore()?.stream as Stream | undefined;
  if (scoped && (device === undefined || scoped.device === resolveDevice(device, 'device'))) return scoped;
  return Stream.perThread(device);
}

/** Runs `fn(stream)` with `stream` as {@link currentStream} for everything `fn` does, across awaits; returns what
 * `fn` returns (a promise stays a promise). The scope ends when `fn` returns or its promise settles.
 * Follows: PyTorch's stream guard, scoped instead of global. */
export function withStream<T>(stream: Stream, fn: (stream: Stream) => T): T {
  if (!streams.is(stream)) throw invalidType('stream', 'a Stream', stream);
  validateFunction(fn, 'fn');
  return enterScope(stream, fn);
}

/** Runs `fn(stream)` with `stream` as the current stream, checking nothing: for the library's own callers, whose
 * streams come from a pool (a real Stream, or a stand-in in the pool policy's CPU tests) and whose `fn` was checked.
 * @internal */
export function enterScope<S extends object, T>(stream: S, fn: (stream: S) => T): T {
  return scope.run({ stream, outer: scope.getStore() }, fn, stream);
}

/** True when `stream` is the stream of the calling async context's scope or of a scope it is nested in. @internal */
export function inScope(stream: object): boolean {
  for (let s = scope.getStore(); s !== undefined; s = s.outer) if (s.stream === stream) return true;
  return false;
}
