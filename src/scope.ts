// The current stream: scoped per async context (AsyncLocalStorage), else the device's per-thread default stream.
import { AsyncLocalStorage } from 'node:async_hooks';

import { type Device, resolveDevice } from './device.js';
import { Stream } from './stream.js';
import { invalidType, validateFunction } from './validate.js';

/** One withStream scope: its stream and the scope it is nested in, so that a pool can tell whether the calling
 * context holds one of its leases at any depth (pool.close() inside pool.run()). */
interface Scope {
  readonly stream: Stream;
  readonly outer: Scope | undefined;
}

const scope = new AsyncLocalStorage<Scope>();

/** The stream that work without an explicit stream goes to: the innermost `withStream`/`pool.run` scope's stream
 * (when `device` is given, only if it is on that device), else the calling thread's per-thread default stream of
 * `device` (default 0). Follows async context: correct across awaits, in nested and concurrent scopes.
 * @throws {@link DestroyedError} never here; using a lease's stream after its lease ended throws it.
 * {@link CudaUnavailableError} without a GPU when no scope is active. */
export function currentStream(device?: Device | number): Stream {
  const scoped = scope.getStore()?.stream;
  if (scoped && (device === undefined || scoped.device === resolveDevice(device, 'device'))) return scoped;
  return Stream.perThread(device);
}

/** Runs `fn(stream)` with `stream` as {@link currentStream} for everything `fn` does, across awaits; returns what
 * `fn` returns (a promise stays a promise). The scope ends when `fn` returns or its promise settles.
 * Follows: PyTorch's stream guard, scoped instead of global. */
export function withStream<T>(stream: Stream, fn: (stream: Stream) => T): T {
  // instanceof, not the brand check: the pool's policy is tested without a GPU through objects that inherit
  // Stream.prototype. Whatever uses the scoped stream brand-checks it (streamBox).
  if (!(stream instanceof Stream)) throw invalidType('stream', 'a Stream', stream);
  validateFunction(fn, 'fn');
  return scope.run({ stream, outer: scope.getStore() }, fn, stream);
}

/** True when `stream` is the stream of the calling async context's scope or of a scope it is nested in. @internal */
export function inScope(stream: object): boolean {
  for (let s = scope.getStore(); s !== undefined; s = s.outer) if (s.stream === stream) return true;
  return false;
}
