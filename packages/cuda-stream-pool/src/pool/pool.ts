// StreamPool: a fixed set of streams created once and handed to tasks cheaply, from any thread or worker. The policy
// is plain TS in pool/pool-policy.ts (Note [pool waiting], Note [pool shared words]); the process-wide state is
// pool/pool.cc (Note [one backing store]). See Note [pool hand-out] below.

/* Note [pool hand-out]: a pool owns `size` streams (1 to 1024, default 32; the default pool of a device takes
 * CUDA_STREAM_POOL_SIZE or 32), all created up front on one device, non-blocking unless `nonBlocking: false`.
 * There are two ways to get one of them.
 * - Shared, `getStream()`: the n-th call, counted across every thread that shares the pool, returns stream n % size,
 *   starting at index 0. One Atomics.add on a counter in shared memory: no N-API call, no allocation, nothing to give
 *   back, never blocks. The consequence, as in PyTorch's pool: the (size + 1)-th call returns the first stream again,
 *   so two tasks that got their streams `size` calls apart share one stream and their work runs one after the other
 *   (it does not race: a stream runs its work in order). `getStream()` also hands out streams that are leased.
 * - Exclusive, `acquire()`/`tryAcquire()`/`run()`: each stream has a lease word in the same shared memory, moved from
 *   free to the holder's thread by compareExchange; until release, no other lease in any thread holds that stream.
 *   Waiters are served first come first served within a thread and in rotation across threads (Note [pool waiting]).
 * Workers: `share()` returns a small structured-cloneable record; `StreamPool.attach()` in another thread (and
 * `StreamPool.default()` in any thread) finds the pool in a process-wide native registry and gets the same streams and
 * a SharedArrayBuffer over the same words, so every thread walks one round-robin sequence and sees the same leases.
 * A thread that exits or is terminated gives its leases back (a native cleanup hook).
 * Hardware: the device runs at most CUDA_DEVICE_MAX_CONNECTIONS (default 8) hardware work queues per context; more
 * streams than that share queues, so work on two different pool streams can still wait on each other
 * (`stats().maxConnections`). A pool of 32 gives distinct streams, not 32 independent queues.
 */
import { native, type NativeRef, type PoolDescription } from '../binding/binding.js';
import { adopt, releaseRef } from '../binding/native-ref-lifetime.js';
import { Device, resolveDevice } from '../device/device.js';
import { partitionsOf, type DevicePartition } from '../device/partition.js';
import { CudaError, DestroyedError } from '../binding/errors.js';
import { retire, streamCreation, streamHandle, wasUsed, wrapStream, type Stream, type StreamInfo } from '../stream/stream.js';
import { enterScope, inScope } from '../stream/scope.js';
import { poolGroup, type StreamPoolGroup } from './pool-group.js';
import { poolLayout } from './pool-words.js';
import { guardReceivers, invalidType, invalidValue, lockFields, outOfRange, validateInteger, validateOptions, validateSignal } from '../internal/validate.js';
import { PoolCore, type AcquireOptions, type CloseOptions, type RunOptions, type StreamPoolStats, type TryAcquireOptions } from './pool-policy.js';
import type { StreamLease } from './stream-lease.js';

// The snapshot's type lives with the counters it extends; it is public under this file's name.
export type { StreamPoolStats };

export type { AcquireOptions, CloseOptions, RunOptions, TryAcquireOptions };

/** Options for `new StreamPool()`. Every field is optional. */
export interface PoolOptions {
  /** The device, as a `Device` or an ordinal. @defaultValue 0 */
  device?: Device | number;
  /** How many streams the pool creates up front: an integer from 1 to 1024. @defaultValue 32 */
  size?: number;
  /** The priority of every stream; lower numbers are higher priorities. Any 32-bit integer: the driver clamps it
   * into `device.streamPriorityRange`, and `pool.priority` reports the effective value.
   * @defaultValue 0 (the least priority on current GPUs) */
  priority?: number;
  /** True: the streams never synchronize implicitly with the legacy default stream (CU_STREAM_NON_BLOCKING).
   * @defaultValue true */
  nonBlocking?: boolean;
  /** The most GPU memory the tasks holding leases may declare at once, in bytes: the sum of the `memoryBytes`
   * budgets of the leases held at any moment, in every thread, stays at or under it, and a lease whose budget would
   * pass it waits (see {@link StreamPool.acquire}). An integer from 1 to `Number.MAX_SAFE_INTEGER`; it may exceed the
   * device's memory (managed memory can oversubscribe it). Fixed for the pool's life; threads that attach share it.
   * @defaultValue the device's total memory, `device.totalMemoryBytes` */
  memoryLimitBytes?: number;
  /** A partition of the device (from `device.partition()`): every stream of the pool runs its kernels only on the
   * partition's multiprocessors (cuGreenCtxStreamCreate). `device` may be left out; `nonBlocking` must not be false.
   * @defaultValue the whole device */
  partition?: DevicePartition;
}

/** What `pool.share()` returns: a plain, structured-cloneable record naming a pool, to post to a worker, which
 * passes it to {@link StreamPool.attach}. It holds no resource; the pool must still exist when it is attached. */
export interface SharedStreamPool {
  /** Always `'cuda-stream-pool:StreamPool'`: marks the record as a shared pool, which {@link StreamPool.attach}
   * checks. */
  readonly kind: 'cuda-stream-pool:StreamPool';
  /** The pool's process-wide id. */
  readonly id: number;
  /** The device ordinal. */
  readonly device: number;
  /** The number of streams. */
  readonly size: number;
}

const SHARED_KIND = 'cuda-stream-pool:StreamPool';
const DEFAULT_SIZE = 32;
const MAX_SIZE = 1024;
const MAX_POOL_ID = 2 ** 31 - 1; // the native registry's ids are C ints
const DETACHED = 'was detached from this thread by destroy() or close()';

/** This thread's StreamPool object for each pool id (so attach() in one thread gives one object). */
const handles = new Map<number, WeakRef<StreamPool>>();
/** This thread's handle on each device's default pool. */
const defaultPools = new Map<number, StreamPool>();
/** Set by attach()/default() for the constructor call that follows. */
let opening: { description: PoolDescription; device: Device; owner: boolean; memoryLimitBytes: number | undefined } | undefined;

/** A pool of CUDA streams created once on one device, handed out round-robin (`getStream()`, shared) or leased
 * exclusively (`acquire()`, `tryAcquire()`, `run()`), from any thread or worker. See Note [pool hand-out].
 *
 * Sharp edge: `getStream()` hands out streams round-robin without checking use, so the (size + 1)-th call returns the
 * first stream again and a stream may be leased at the time. Use `run()` or `acquire()` when a task must have a
 * stream to itself.
 *
 * Lifetime: `new StreamPool()` owns its streams. `destroy()` (or `[Symbol.dispose]`) on the creating object destroys
 * the pool for every thread: streams are destroyed at once (work already queued still completes; a driver stream that
 * a call or a wait of another thread is using at that moment goes when that call returns or that wait settles, so
 * `cuda.liveObjects().streams` may count it for a few milliseconds more), pending
 * `acquire()`s reject, and every later method, and every method of its streams, throws {@link DestroyedError}, in
 * any thread. `close()` (or `[Symbol.asyncDispose]`) does the same once every lease is back and the streams' work is
 * done. An object from {@link StreamPool.attach} or {@link StreamPool.default} does not own the pool: its `destroy()`
 * and `close()` only detach the calling thread (its leases end, its waiters reject), and the pool goes on for the
 * other threads. Once the creating thread is gone (a worker that exited), the last of those objects to detach
 * destroys the pool and its streams at once. A pool no thread can reach any more (no StreamPool object, stream or
 * lease of it) is destroyed by a finalizer; keep the owner alive until workers have attached. A lease that neither
 * its holder nor anything else can reach (the lease and its stream) goes back to the pool at the first garbage
 * collection once it has been held 250 ms (`stats().leasesReclaimed`); a younger forgotten lease waits until then,
 * so a thread that forgets a lease and at once waits for every stream may end as a program waiting for itself.
 *
 * Thread-safety: every method is safe against concurrent calls from any thread sharing the pool, including a
 * concurrent `destroy()`. A StreamPool object, its leases and its stream wrappers belong to one thread; other
 * threads use their own object from `attach()`.
 *
 * Follows: RAPIDS RMM `cuda_stream_pool` (fixed size, round-robin, destroyed with the pool), PyTorch
 * `getStreamFromPool` (per-device pools, wrap-around). Wraps: cuStreamCreateWithPriority (at creation),
 * cuStreamQuery (to prefer idle streams for leases), cuStreamDestroy.
 *
 * @throws {@link CudaUnavailableError} without a GPU; `TypeError`/`RangeError` with Node's codes for bad options;
 * {@link CudaError} when the driver cannot create the streams; {@link DestroyedError} from methods after destroy.
 *
 * @example
 * ```ts
 * await using pool = new StreamPool({ size: 8 });
 * await Promise.all(tasks.map((task) => pool.run(async (stream) => {
 *   stream.copy(input, task.host);               // or rely on currentStream() inside run()
 *   kernel.launch({ grid: 256, block: 256 }, input, task.n);
 *   await stream.synchronize();
 * })));
 * ```
 */
export class StreamPool {
  readonly #core: PoolCore<Stream>;
  readonly #handle: NativeRef;
  readonly #id: number;
  readonly #owner: boolean;
  readonly #isDefault: boolean;
  #closing: Promise<void> | undefined;
  /** The number of streams, 1 to 1024. */
  readonly size: number;
  /** The device whose streams these are. */
  readonly device: Device;
  /** The streams' effective priority as the driver reports it (cuStreamGetPriority), after clamping. */
  readonly priority: number;
  /** Whether the streams do not synchronize with the legacy default stream (cuStreamGetFlags). */
  readonly nonBlocking: boolean;
  /** The most memory the budgets of the leases held at once may add up to, in bytes: `options.memoryLimitBytes` of
   * the pool's creation, or for a default pool CUDA_STREAM_POOL_MEMORY_LIMIT; by default the device's total memory. */
  readonly memoryLimitBytes: number;
  /** The device partition whose multiprocessors the pool's kernels run on, or `undefined` for the whole device. */
  readonly partition: DevicePartition | undefined;

  /** Creates `options.size` streams on `options.device`, owned by this object.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE for a wrong option type or an unknown option
   * key (with "did you mean"); `RangeError` ERR_OUT_OF_RANGE for a size outside 1 to 1024 or a priority outside the
   * 32-bit range; {@link CudaUnavailableError} without a GPU; {@link CudaError} when the driver cannot create a
   * stream (the streams created so far are destroyed). */
  constructor(options?: PoolOptions) {
    let opened = opening;
    opening = undefined;
    if (opened === undefined) {
      const o = validateOptions<PoolOptions>(options, 'options', 'StreamPool', ['device', 'size', 'priority', 'nonBlocking', 'memoryLimitBytes', 'partition']);
      // Each option read once (a getter could answer differently).
      const { size: sizeOption, memoryLimitBytes: limitOption } = o;
      const size = sizeOption === undefined ? DEFAULT_SIZE : validateInteger(sizeOption, 'options.size', 1, MAX_SIZE);
      const limit = limitOption === undefined ? undefined : validateInteger(limitOption, 'options.memoryLimitBytes', 1, Number.MAX_SAFE_INTEGER);
      const { device, nonBlocking, priority, partition } = streamCreation(o);
      const description = native.poolCreate(device.ordinal, size, nonBlocking, priority, poolLayout(size), partition);
      opened = { description, device, owner: true, memoryLimitBytes: limit ?? device.totalMemoryBytes };
    }
    const { description, device, owner, memoryLimitBytes } = opened;
    const refs = description.streams;
    // This object's collection releases this thread's handle on the pool (the last one destroys a forgotten pool)
    // and on its streams; each pool stream and lease view keeps it reachable (their `owner`).
    adopt(this, description.handle);
    for (const ref of refs) adopt(this, ref);
    let streams: Stream[];
    try {
      streams = refs.map((ref) => wrapStream(ref, device, 'pool', undefined, this));
    } catch (error) {
      // The pool was destroyed by its owner between attach and here.
      if (error instanceof DestroyedError) throw new DestroyedError('StreamPool', 'attach');
      throw error;
    }
    const infos = streams.map((s): StreamInfo => [streamHandle(s), s.id, s.priority, s.nonBlocking, s.partition?.index ?? -1]);
    this.#core = new PoolCore<Stream>(new Int32Array(description.memory), description.size, native.environmentId, {
      streams,
      // The view keeps its lease alive (Note [lease reclaim] in pool/pool-policy.ts); the lease keeps this object
      // alive through the core.
      leaseView: (streamIndex, lease) => wrapStream(refs[streamIndex]!, device, 'lease', infos[streamIndex], lease),
      retire,
      isIdle: (streamIndex) => native.streamStatus(refs[streamIndex]!) === 0,
      used: wasUsed,
      scope: enterScope,
      drain: (streamIndex) => streams[streamIndex]!.synchronize(),
      inScope,
    }, memoryLimitBytes);
    this.#handle = description.handle;
    this.#id = description.id;
    this.#owner = owner;
    this.#isDefault = description.isDefault;
    this.size = description.size;
    this.device = device;
    this.priority = streams[0]!.priority;
    this.nonBlocking = streams[0]!.nonBlocking;
    this.memoryLimitBytes = this.#core.memoryLimitBytes;
    this.partition = description.partition < 0 ? undefined : partitionsOf(device)![description.partition];
    lockFields(this, ['size', 'device', 'priority', 'nonBlocking', 'memoryLimitBytes', 'partition']);
    handles.set(description.id, new WeakRef(this));
  }

  static {
    guardReceivers(StreamPool, (value) => #core in value);
  }

  /** Hands out a stream that other tasks may use at the same time: the next one in round-robin order (the n-th call
   * across all threads sharing the pool gets stream n % size, from index 0), or with `index`, the stream at
   * `index % size` (the same one on every call). Creates nothing, allocates nothing, never blocks; there is nothing
   * to return. The stream may be leased by someone else at that moment, and the (size + 1)-th call gets the first
   * stream again: see Note [pool hand-out]; use {@link StreamPool.run} for a stream of one's own.
   * Costs one Atomics.add on shared memory (no N-API call).
   * @param index - a non-negative safe integer.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE / `RangeError` ERR_OUT_OF_RANGE for a bad `index`;
   * {@link DestroyedError} (resource 'StreamPool') after the pool was destroyed or this thread detached.
   * Thread-safety: any thread sharing the pool; concurrent callers walk one sequence.
   * Follows: RAPIDS RMM `cuda_stream_pool::get_stream()`, PyTorch `getStreamFromPool()`. */
  getStream(index?: number): Stream {
    return this.#core.getStream(index);
  }

  /** Resolves to a lease on a stream that no other lease holds, in any thread: at once when one is free
   * (preferring one with no queued work, as cuStreamQuery reports), else when one is released. Waiters are served
   * first come first served within a thread, in rotation across threads (no thread starves).
   * Rejects with `options.signal.reason` when the signal aborts first, and with {@link DestroyedError} (resource
   * 'StreamPool') when the pool is destroyed or closing, or this thread detached, before a lease was granted.
   * While no other thread holds the pool and every stream is leased by this thread, the wait does not keep the
   * event loop alive (only this thread could end it; see {@link StreamPool.close}).
   * Release the lease with `release()` or `using`; prefer {@link StreamPool.run}, which cannot forget to.
   *
   * GPU admission: with `options.memoryBytes`, the lease is granted only once that budget fits too: while the
   * budgets of every lease held in every thread add up to no more than {@link StreamPool.memoryLimitBytes}. A waiter
   * gets its stream first and keeps it while it waits for memory; the waiters after it in its thread wait behind it
   * (first come first served), and while it waits no other thread admits a budget before it, so a large budget is not
   * starved by small ones. The budget comes back when the lease ends. Budgets are declarations: the library does not
   * measure or police what a task allocates. `stats()` shows `memoryAdmittedBytes` and `memoryWaiters`.
   * @throws never synchronously: bad options reject with `TypeError` ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE,
   * a `memoryBytes` that is not an integer from 0 to `memoryLimitBytes` with `RangeError` ERR_OUT_OF_RANGE (a
   * budget above the limit could never be admitted). Follows: Spark RAPIDS' GPU semaphore, by bytes rather than
   * by task count. Thread-safety: any thread sharing the pool.
   * @example
   * ```ts
   * const lease = await pool.acquire({ memoryBytes: 2 ** 30 });  // waits while 1 GiB more would pass the limit
   * ```
   */
  acquire(options?: AcquireOptions): Promise<StreamLease> {
    return this.#core.acquire(options);
  }

  /** A lease on a free stream now, or `undefined` when every stream is leased, this thread already has waiters
   * (they come first), or `options.memoryBytes` does not fit now (see {@link StreamPool.acquire}; a thread waiting for
   * memory is ahead of it too). Never waits.
   * @throws {@link DestroyedError} (resource 'StreamPool') after destroy, while closing, or after this thread
   * detached; `TypeError` ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE for bad options, `RangeError`
   * ERR_OUT_OF_RANGE for a `memoryBytes` that is not an integer from 0 to `memoryLimitBytes`. Thread-safety: any
   * thread sharing the pool. */
  tryAcquire(options?: TryAcquireOptions): StreamLease | undefined {
    return this.#core.tryAcquire(options);
  }

  /** Leases a stream, runs `fn(stream)` with it as {@link currentStream} (AsyncLocalStorage: right across awaits,
   * in nested and concurrent runs), releases the lease when `fn` returns, throws, or its promise settles, and
   * settles with `fn`'s outcome: its value, or the very error object it threw. `options.signal` only aborts the wait
   * for a lease; once `fn` runs, it is `fn`'s business. Work `fn` queued still runs after release; await
   * `stream.synchronize()` inside `fn` to wait for it. A context that outlives the run (a callback `fn` left behind)
   * sees a stream that throws {@link DestroyedError}. A run nested inside a run takes a second lease, so nesting
   * deeper than `size` waits for a lease that only the waiting code itself could release: while no other thread
   * holds the pool, that wait does not keep the event loop alive (a process with nothing else to do exits with code
   * 13, as for any unsettled top-level await).
   * With `options.memoryBytes`, `fn` runs only once that budget is admitted, as for {@link StreamPool.acquire}, and
   * the budget comes back when the lease is released.
   * @throws never synchronously: rejects with `TypeError` ERR_INVALID_ARG_TYPE for a non-function `fn`, and as
   * {@link StreamPool.acquire}. Thread-safety: any thread sharing the pool.
   * @example
   * ```ts
   * const sum = await pool.run(async (stream) => { kernel.launch({ grid: 1, block: 1 }, out); await stream.synchronize(); return 1; });
   * ```
   */
  run<T>(fn: (stream: Stream) => T, options?: RunOptions): Promise<Awaited<T>> {
    return this.#core.run(fn, options);
  }

  /** Counters and settings, global across the threads sharing the pool: `handOuts[i]` counts getStream() results
   * that were stream i, `leaseCounts[i]` the leases granted on it, `leased` the streams leased now, `waiters` the
   * acquire() calls waiting now (of which `memoryWaiters` wait for a memory budget), `memoryLimitBytes` the limit
   * and `memoryAdmittedBytes` the budgets of the leases held now, added up, `leasesReclaimed` the leases given back
   * because they became unreachable unreleased (see {@link StreamLease}). A snapshot: not atomic as a whole while other threads work.
   * @throws {@link DestroyedError} after destroy or detach. */
  stats(): StreamPoolStats {
    const counters = this.#core.counters();
    return {
      size: this.size,
      device: this.device.ordinal,
      priority: this.priority,
      ...counters,
      maxConnections: maxConnectionsFromEnvironment(process.env.CUDA_DEVICE_MAX_CONNECTIONS),
    };
  }

  /** A structured-cloneable record to post to a worker, which passes it to {@link StreamPool.attach}.
   * @throws {@link DestroyedError} after destroy or detach. */
  share(): SharedStreamPool {
    this.#core.check('share');
    return Object.freeze({ kind: SHARED_KIND, id: this.#id, device: this.device.ordinal, size: this.size });
  }

  /** True once this object cannot be used: the pool was destroyed (by any thread), or this thread detached. */
  get destroyed(): boolean {
    return this.#core.destroyed;
  }

  /** On the object that created the pool: destroys it for every thread. Its streams are destroyed at once (work
   * already queued still completes, after the driver's own rules); leases end; pending acquire() calls in every
   * thread reject with {@link DestroyedError}; later calls of every method of the pool, its leases' streams and its
   * streams throw {@link DestroyedError}, in any thread. Waits for driver calls in flight on the streams in other
   * threads (Note [handle guard]). On an attached or default pool: detaches this thread only, and when the thread
   * that created the pool is gone and this was the last object attached to it in any thread, destroys the pool and
   * its streams at once (Note [pool attachments] in pool/pool.cc; a default pool is never destroyed).
   * Idempotent; never throws. Wraps: cuStreamDestroy. */
  destroy(): void {
    if (this.#owner && !this.#isDefault) {
      this.#core.destroyEverywhere(() => native.poolDestroy(this.#handle));
    } else {
      this.#core.detach(DETACHED);
      native.poolDetach(this.#handle);
    }
    this.#forget();
  }

  /** Same as {@link StreamPool.destroy}. */
  [Symbol.dispose](): void {
    this.destroy();
  }

  /** On the object that created the pool: rejects pending acquire() calls in every thread (and any new one) with
   * {@link DestroyedError}, waits until every lease in every thread is released (`getStream()` still works), then
   * until each stream's queued work is done (`stream.synchronize()`), then destroys the pool as `destroy()` does.
   * Rejects with the {@link CudaError} of failed work after destroying, except for a sticky fault (then the device is
   * gone and disposal does not throw). On an attached or default pool: rejects this thread's pending acquires, waits
   * for this thread's leases, then detaches this thread only (destroying the pool as `destroy()` does when it was the
   * last attachment of a pool whose creating thread is gone). Never blocks the event loop.
   *
   * Calling it again on this object while a close is under way, or after it ended, returns the same promise
   * (`pool.close() === pool.close()`; that call's options are not used).
   *
   * A forgotten lease: the wait for leases ends when a forgotten lease is reclaimed (see {@link StreamLease}), which
   * needs a garbage collection. While no other thread holds the pool (`share()`/`attach()`, `StreamPool.default()`)
   * and every lease is this thread's, this wait does not keep the event loop alive, so a process with nothing else
   * to do ends as Node ends any unsettled await (exit code 13) instead of hanging; the wait for queued work does.
   *
   * `options.signal` gives the close up: if it aborts before the pool was destroyed (or this thread detached), the
   * promise rejects with `signal.reason` and the pool is usable again: the state goes back to open, new acquire()
   * calls are served, and a later close() starts anew. What the close did stays done: acquire() calls it rejected
   * stay rejected, and when it aborts while waiting for queued work, that wait is dropped (the work still runs).
   * An already aborted signal rejects at once and changes nothing.
   * @param options - `{ signal?: AbortSignal }`.
   * @throws never synchronously. Rejects with `TypeError` ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE for bad
   * options; with `TypeError` ERR_INVALID_STATE, at once and changing nothing, when called from an async context
   * that holds a lease of this pool (inside `pool.run()`, or `withStream(lease.stream)`): that close would wait
   * forever for that lease, and the message names its stream (index and id); with `signal.reason` when given up;
   * as said above for failed work. Thread-safety: any thread sharing the pool. */
  close(options?: CloseOptions): Promise<void> {
    let signal: AbortSignal | undefined;
    try {
      const o = validateOptions<CloseOptions>(options, 'options', 'close', ['signal']);
      signal = validateSignal(o.signal, 'options.signal');
    } catch (error) {
      return Promise.reject(error);
    }
    const refused = this.#core.closeRefusal('close');
    if (refused !== undefined) return Promise.reject(refused);
    if (this.#closing) return this.#closing;
    // Settled: forget this object, unless the close was given up (then this object is open again).
    const settled = () => {
      if (this.destroyed) this.#forget();
      else if (this.#closing === closing) this.#closing = undefined;
    };
    let closing: Promise<void>;
    if (this.#owner && !this.#isDefault) {
      const quiet = (error: unknown) => error instanceof CudaError && error.sticky;
      closing = this.#core.closeEverywhere(() => native.poolDestroy(this.#handle), quiet, signal);
    } else {
      closing = this.#core.closeHere(DETACHED, signal).then(() => native.poolDetach(this.#handle));
    }
    closing = closing.then(settled, (error: unknown) => {
      settled();
      throw error;
    });
    this.#closing = closing;
    return closing;
  }

  /** Same as {@link StreamPool.close}, without options. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #forget(): void {
    if (handles.get(this.#id)?.deref() === this) handles.delete(this.#id);
    if (defaultPools.get(this.device.ordinal) === this) defaultPools.delete(this.device.ordinal);
  }

  /** This thread's handle on a pool shared by another thread (`pool.share()`, posted to this worker): the same
   * streams, the same round-robin sequence, the same leases. The same object on every call in a thread while it is
   * usable (in the creating thread, the creating object itself).
   * Lifetime: borrows the pool; `destroy()`/`close()` on it only detach this thread. When this thread exits or is
   * terminated, its leases go back to the pool.
   * @param shared - the record `share()` returned, unchanged: its `device` and `size` must be those of the pool its
   * `id` names.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE when `shared` is not a SharedStreamPool record or a field has the wrong
   * type; `RangeError` ERR_OUT_OF_RANGE naming the id when `shared.id` is not an integer from 1 to 2**31 - 1 or names
   * no pool ever created ("no such pool"); ERR_INVALID_ARG_VALUE naming the field and both values when `device` or
   * `size` disagrees with that pool; {@link DestroyedError} (resource 'StreamPool') when the pool was destroyed.
   * Thread-safety: any thread. */
  static attach(shared: SharedStreamPool): StreamPool {
    const record = shared as Partial<SharedStreamPool> | null;
    if (record === null || typeof record !== 'object' || record.kind !== SHARED_KIND)
      throw invalidType('shared', 'a SharedStreamPool from pool.share()', shared);
    // Each field once: a getter on a forged record cannot answer differently later.
    const { id, device, size } = record;
    if (typeof id !== 'number') throw invalidType('shared.id', 'a pool id (number) from pool.share()', id);
    if (!Number.isInteger(id) || id < 1 || id > MAX_POOL_ID) throw outOfRange('shared.id', `a pool id from pool.share(): an integer from 1 to ${MAX_POOL_ID}`, id);
    if (typeof device !== 'number') throw invalidType('shared.device', 'a device ordinal (number)', device);
    if (typeof size !== 'number') throw invalidType('shared.size', 'a number of streams', size);
    const check = (pool: { device: number; size: number }) => {
      for (const [field, given, real] of [['device', device, pool.device], ['size', size, pool.size]] as const)
        if (given !== real)
          throw invalidValue(`shared.${field}`, `is ${given}, but pool ${id} has ${field} ${real}; pass the record from pool.share() unchanged.`, StreamPool.attach);
    };
    const known = handles.get(id)?.deref();
    if (known !== undefined && !known.destroyed) {
      check({ device: known.device.ordinal, size: known.size });
      return known;
    }
    const description = native.poolAttach(id);
    if (description === undefined)
      throw outOfRange('shared.id', 'the id of a pool created in this process', id, 'There is no such pool.', StreamPool.attach);
    check(description);
    opening = { description, device: Device.get(description.device), owner: false, memoryLimitBytes: undefined };
    return new StreamPool();
  }

  /** The process-wide pool of `device`: one per device per process, created by the first call in any thread and
   * reachable synchronously from every thread (no message needed), with CUDA_STREAM_POOL_SIZE streams (default 32),
   * non-blocking, priority 0, and CUDA_STREAM_POOL_MEMORY_LIMIT as its `memoryLimitBytes` (an integer of bytes;
   * default the device's total memory), read by the call that creates it. The same object on every call in a thread.
   * Lifetime: owned by the process; its streams live until exit. `destroy()`/`close()` on it only detach the
   * calling thread (a later `StreamPool.default()` call gives a new handle).
   * @throws `TypeError` ERR_INVALID_ARG_VALUE / `RangeError` ERR_OUT_OF_RANGE when CUDA_STREAM_POOL_SIZE is not an
   * integer from 1 to 1024, or CUDA_STREAM_POOL_MEMORY_LIMIT not one from 1 to `Number.MAX_SAFE_INTEGER`; as
   * `Device.get` for `device`. Thread-safety: any thread; concurrent first calls in
   * several threads create one pool. */
  static default(device?: Device | number): StreamPool {
    const size = poolSizeFromEnvironment(process.env.CUDA_STREAM_POOL_SIZE);
    const limit = memoryLimitFromEnvironment(process.env.CUDA_STREAM_POOL_MEMORY_LIMIT);
    const d = resolveDevice(device, 'device');
    const known = defaultPools.get(d.ordinal);
    if (known !== undefined && !known.destroyed) return known;
    const description = native.poolDefault(d.ordinal, size, true, 0, poolLayout(size));
    const cached = handles.get(description.id)?.deref();
    let pool: StreamPool;
    if (cached !== undefined && !cached.destroyed) {
      pool = cached; // attached in this thread through share(): the extra native handle goes at once
      releaseRef(description.handle);
      for (const ref of description.streams) releaseRef(ref);
    } else {
      opening = { description, device: d, owner: false, memoryLimitBytes: limit ?? d.totalMemoryBytes };
      pool = new StreamPool();
    }
    defaultPools.set(d.ordinal, pool);
    return pool;
  }

  /** A group over the default pools of several devices (`StreamPool.default(device)` of each) that spreads tasks over
   * them: `getStream()`, `acquire()`, `tryAcquire()` and `run()` go round-robin over the devices, then over each
   * device's streams, and `stats()` reports each device. Creates no stream and owns nothing: the group's `destroy()`
   * only detaches it. A new group on every call. See {@link StreamPoolGroup}.
   * @param devices - the devices to spread over, in order, as Device objects or ordinals, each once.
   * @defaultValue every visible device, 0 to `Device.count() - 1`
   * @throws {@link CudaUnavailableError} without a GPU; `TypeError` ERR_INVALID_ARG_TYPE when `devices` is not an
   * array or holds something other than a Device or an ordinal; ERR_INVALID_ARG_VALUE for an empty array or a device
   * named twice; `RangeError` ERR_OUT_OF_RANGE for an ordinal outside the visible devices; as
   * {@link StreamPool.default} (CUDA_STREAM_POOL_SIZE, stream creation on first use of a device).
   * Thread-safety: any thread or worker; each thread gets its own group over the same process-wide pools.
   * Follows: PyTorch's per-device pools (`getStreamFromPool(device)`), with the device chosen for the task.
   * @example
   * ```ts
   * const group = StreamPool.forDevices();  // every visible device
   * const results = await Promise.all(tasks.map((task) => group.run((stream) => work(task, stream))));
   * ```
   */
  static forDevices(devices?: readonly (Device | number)[]): StreamPoolGroup {
    const list = groupDevices(devices);
    return poolGroup(list.map((device) => StreamPool.default(device)), list);
  }
}

/** The devices of `StreamPool.forDevices(devices)`: every visible device when undefined, else a non-empty array of
 * distinct devices (Device objects or ordinals). */
function groupDevices(devices: unknown): Device[] {
  if (devices === undefined) {
    const count = Device.count();
    if (count === 0) Device.get(0); // throws CudaUnavailableError, saying why
    return Array.from({ length: count }, (_, ordinal) => Device.get(ordinal));
  }
  if (!Array.isArray(devices)) throw invalidType('devices', 'an array of Devices or device ordinals', devices);
  if (devices.length === 0) throw invalidValue('devices', 'must name at least one device; received an empty array.');
  // Named twice is an argument error, found before any device is resolved (which needs the driver).
  const ordinals = devices.map((device) => (device instanceof Device ? device.ordinal : device));
  const twice = ordinals.findIndex((ordinal, i) => typeof ordinal === 'number' && ordinals.indexOf(ordinal) !== i);
  if (twice >= 0) throw invalidValue(`devices[${twice}]`, `is device ${ordinals[twice]} again; name each device once.`);
  return devices.map((device, i) => resolveDevice(device as Device | number, `devices[${i}]`));
}

/** The default pool size from CUDA_STREAM_POOL_SIZE: 32 when unset or empty, else an integer from 1 to 1024.
 * @throws `TypeError` ERR_INVALID_ARG_VALUE for text that is not a whole number, `RangeError` ERR_OUT_OF_RANGE
 * outside 1 to 1024. @internal */
export function poolSizeFromEnvironment(value: string | undefined): number {
  return integerFromEnvironment('CUDA_STREAM_POOL_SIZE', value, MAX_SIZE, "the default pool's size") ?? DEFAULT_SIZE;
}

/** The default pools' memory limit from CUDA_STREAM_POOL_MEMORY_LIMIT: undefined (the device's total memory) when
 * unset or empty, else an integer of bytes from 1 to `Number.MAX_SAFE_INTEGER`.
 * @throws `TypeError` ERR_INVALID_ARG_VALUE for text that is not a whole number, `RangeError` ERR_OUT_OF_RANGE
 * outside that range. @internal */
export function memoryLimitFromEnvironment(value: string | undefined): number | undefined {
  return integerFromEnvironment('CUDA_STREAM_POOL_MEMORY_LIMIT', value, Number.MAX_SAFE_INTEGER, "the default pools' memory limit, in bytes");
}

/** The integer from 1 to `max` that the environment variable `name` holds (`what` says what it sets, in errors);
 * undefined when unset or empty. Spaces around the digits are allowed.
 * @throws `TypeError` ERR_INVALID_ARG_VALUE for text that is not an integer in decimal digits, `RangeError`
 * ERR_OUT_OF_RANGE for one outside 1 to `max` (negative ones included). */
function integerFromEnvironment(name: string, value: string | undefined, max: number, what: string): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const text = value.trim();
  // A negative integer is an integer out of range, as a negative option value is.
  if (!/^-?\d+$/.test(text)) throw invalidValue(name, `must be an integer from 1 to ${max} (${what}); received ${JSON.stringify(value)}.`);
  const number = Number(text);
  if (number < 1 || number > max) throw outOfRange(name, `an integer from 1 to ${max} (${what})`, value);
  return number;
}

/** CUDA_DEVICE_MAX_CONNECTIONS as the driver reads it: an integer from 1 to 32, else 8. @internal */
export function maxConnectionsFromEnvironment(value: string | undefined): number {
  const text = value?.trim() ?? '';
  if (!/^\d+$/.test(text)) return 8;
  const n = Number(text);
  return n >= 1 && n <= 32 ? n : 8;
}
