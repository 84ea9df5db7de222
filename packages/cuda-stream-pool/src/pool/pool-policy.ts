// The stream pool's policy in plain TypeScript over abstract streams, each known by its index: round-robin hand-out, exclusive leases,
// waiters (FIFO in a thread, rotating across threads), abort, run() scoping, close and detach. The same code runs over
// the native shared words (pool/pool.cc) and, in the CPU tests, over a JS SharedArrayBuffer with fake streams.
// See Note [pool hand-out] in pool/pool.ts; the shared words are Note [pool shared words] in pool/pool-words.ts.
import { DestroyedError } from '../binding/errors.js';
import { whenAborted } from '../internal/abort.js';
import { invalidState, invalidType, outOfRange, validateFunction, validateInteger, validateOptions, validateSignal } from '../internal/validate.js';
import {
  ATTACHED_ENVS,
  CLOSE_BELL,
  CLOSING,
  CURSOR,
  DESTROYED,
  ENV_WAKE_COUNTER,
  ENV_ENTRIES,
  ENV_STRIDE,
  ENV_MEMORY_WAITERS,
  ENV_WAITERS,
  MEMORY_LIMIT_INDEX,
  MEMORY_LOCK,
  MEMORY_TURN,
  NEXT,
  OPEN,
  poolLayout,
  RECLAIMED,
  STATE,
  UNKNOWN_IDLE,
  WAITING_ENVS,
  WRAPS,
  type PoolLayout,
} from './pool-words.js';
import { leases, type LeaseOwner, type StreamLease } from './stream-lease.js';

/** Free streams whose idleness is asked (cuStreamQuery) before one is taken: bounds what a lease costs. */
const IDLE_PROBES = 4;
/** The backstop of every wait: how often a waiting thread looks again even without a notification (ms). */
export const BACKSTOP_MS = 50;
/** How long one Atomics.waitAsync registration lives before it is renewed (ms). */
const WATCH_MS = 1000;
/** How long a lease is held strongly before it is tracked weakly, so it can be reclaimed (ms; Note [lease reclaim]). */
export const PROMOTE_MS = 250;

/** What the policy needs from the streams: the pool's streams by index, abstracted so CPU tests can run it with fakes. */
export interface PoolStreams<S> {
  /** The shared stream at each index: what getStream() hands out. */
  readonly streams: readonly S[];
  /** A new wrapper of the stream at `streamIndex` for one lease, made on the lease's first read of `lease.stream`, which
   * keeps `lease` reachable while it is (so a lease whose stream is still in use is never reclaimed); retired when the
   * lease ends. */
  leaseView(streamIndex: number, lease: object): S;
  /** Makes `view` throw DestroyedError from now on, with `why` in the message. */
  retire(view: S, why: string): void;
  /** True when the stream at that index has no queued work (cuStreamQuery); a throw counts as busy. */
  isIdle(streamIndex: number): boolean;
  /** True when anything was done through `view` (a lease's wrapper): work may have been queued. */
  used(view: S): boolean;
  /** Runs `fn(view)` with `view` as the current stream (enterScope: a fake view is no Stream). */
  scope<T>(view: S, fn: (stream: S) => T): T;
  /** Resolves when the queued work of the stream at that index is done (close()). */
  drain(streamIndex: number): Promise<void>;
  /** True when `view` is the current stream of the calling async context or of a scope it is nested in; lets close()
   * refuse to wait for a lease its caller holds. Absent: close() does not check. */
  inScope?(view: S): boolean;
}

/** Options for {@link StreamPool.tryAcquire}. */
export interface TryAcquireOptions {
  /** The GPU memory the task declares it will use at most while it holds the lease, in bytes: an integer from 0 to
   * the pool's `memoryLimitBytes`. The lease is granted only while the budgets of every lease held in every thread,
   * this one included, add up to no more than that limit; the budget comes back when the lease ends. A declaration:
   * the library does not measure or police what the task allocates. @defaultValue 0 (no memory admission) */
  memoryBytes?: number;
}

/** Options for {@link StreamPool.acquire}. */
export interface AcquireOptions extends TryAcquireOptions {
  /** Aborts the wait for a lease, or for its memory budget; the promise rejects with `signal.reason`. A lease already
   * granted is kept. */
  signal?: AbortSignal;
}

/** Options for {@link StreamPool.run}. */
export interface RunOptions extends TryAcquireOptions {
  /** Aborts the wait for a lease, or for its memory budget (not `fn` once it runs); the promise rejects with
   * `signal.reason`. */
  signal?: AbortSignal;
}

/** Options for {@link StreamPool.close}. */
export interface CloseOptions {
  /** Gives the close up: when it aborts before the pool was destroyed (or this thread detached), the promise
   * rejects with `signal.reason` and the pool is open again (see `StreamPool.close` for what stays rejected). */
  signal?: AbortSignal;
}

/** A snapshot of a pool's counters, global across every thread that shares the pool. */
export interface PoolCounters {
  /** Per stream index: how many times getStream() handed it out (round-robin and by index). */
  handOuts: number[];
  /** Per stream index: how many leases were granted on it. */
  leaseCounts: number[];
  /** Streams leased now, in any thread (including ones being handed from one thread to another). */
  leased: number;
  /** acquire() calls waiting now, in all threads (a thread beyond the first 128 waiting at once is not counted),
   * those in `memoryWaiters` included. */
  waiters: number;
  /** The most memory the budgets of the leases held at once may add up to (bytes): the pool's limit. */
  memoryLimitBytes: number;
  /** The budgets of the leases held now, in all threads, added up (bytes); at most `memoryLimitBytes`. */
  memoryAdmittedBytes: number;
  /** Of `waiters`, those queued in a thread whose first waiter has a stream and waits for its memory budget: waiting
   * for memory rather than for a stream. */
  memoryWaiters: number;
  /** Leases given back to the pool, in all threads since the pool was created, because they became unreachable
   * unreleased: neither the lease nor its `stream` could be reached any more, and the garbage collector reclaimed
   * them (a FinalizationRegistry; when that happens is up to the collector). A count of leases, from 0. */
  leasesReclaimed: number;
}

interface Waiter<S> {
  bytes: number;
  resolve: (lease: StreamLease<S>) => void;
  reject: (error: unknown) => void;
  stopAbort: (() => void) | undefined;
  settled: boolean;
}

/** A snapshot from `pool.stats()`. The counters are global: every thread that shares the pool adds to them. */
export interface StreamPoolStats extends PoolCounters {
  /** The number of streams. */
  size: number;
  /** The device ordinal. */
  device: number;
  /** The streams' effective priority (lower is higher). */
  priority: number;
  /** How many hardware work queues the device gives this process's context: CUDA_DEVICE_MAX_CONNECTIONS as the
   * driver reads it at context creation (an integer from 1 to 32), 8 when unset or unreadable. Streams beyond this
   * number share queues, so work on different streams can wait on each other. */
  maxConnections: number;
}

type WaitAsync = (array: Int32Array, index: number, value: number, timeoutMs: number) => { async: boolean; value: Promise<string> | string };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/* Note [pool waiting]: how a lease finds its way to a waiter, across threads, without starving anybody.
 * - In a thread, waiters form one FIFO queue. A thread with waiters registers an entry in the waiting table
 *   (its environment id, a wake counter, its waiter count) and then looks for a free stream once more, so a
 *   release racing with the registration is not missed (each side writes, then reads the other's word).
 * - A release with other threads registered hands the stream to the next registered entry after CURSOR (the
 *   releasing thread's own entry included): it writes -id into the lease word, bumps that entry's wake counter and
 *   Atomics.notify()s it. The receiver claims -id words (compareExchange to +id) and serves its queue head. If the
 *   receiver unregistered meanwhile, the releaser takes the word back and hands it on. Rotation bounds every
 *   thread's wait by the number of waiting threads: no starvation across threads.
 * - With no other thread waiting, a release serves this thread's queue head directly (no shared write), or frees
 *   the word; then, if a thread registered meanwhile, it bumps every wake counter so the newcomer looks again.
 * - Every waiting thread also wakes every BACKSTOP_MS on a timer. That is how leases given back by the native cleanup
 *   hook of a thread that exited reach waiters: native code cannot Atomics.notify. The timer also keeps the event
 *   loop alive while the thread waits (Atomics.waitAsync does not), except when no other thread could ever end the
 *   wait: no other environment holds a handle on the pool (ATTACHED_ENVS) and every lease word that matters is this
 *   thread's own. Then only this thread's own code can release a lease (or the garbage collector reclaim one), so a
 *   thread with nothing else to do has deadlocked itself, and the timer is unref'd: the process ends as Node ends any
 *   unsettled await (exit code 13) instead of hanging silently. Checked again at every wake-up, so a thread that
 *   attaches later (its worker keeps the process alive meanwhile) makes the timer ref'd again. close()'s wait for
 *   leases follows the same rule; waits on GPU work (drains) always keep the loop alive.
 * - Among free streams a lease prefers an idle one (up to IDLE_PROBES queries), starting after the last one this
 *   thread took, so consecutive leases rotate through the streams.
 */

/* Note [memory admission]: a lease may carry a memory budget (bytes), and is granted only while the budgets of every
 * lease held in every thread add up to no more than the pool's limit, as Spark's GPU semaphore bounds the tasks on a
 * GPU. Budgets are declarations: nothing measures what a task allocates.
 * - The budget lives with the lease word, in the stream's budget word (Note [pool shared words]): only the word's
 *   holder writes it, and zeroes it before freeing or handing off the word. The admitted sum is the sum of the
 *   budget words, so the native cleanup of a dead thread gives its budgets back with its lease words, and nothing
 *   is counted twice or lost.
 * - Admitting reads the sum and writes one budget word under MEMORY_LOCK (a compareExchange of this environment's
 *   id); a release zeroes its word without it (a sum that still counts it only refuses more). The cleanup of a
 *   thread that died holding the lock frees it.
 * - Order: a waiter first gets a stream, then its budget, so that a budget never waits in a thread that could die
 *   without a lease word to carry it. In a thread, waiters stay first come first served: a first waiter whose budget
 *   does not fit keeps its stream (parked) and the waiters behind it wait too. Meanwhile the thread publishes its
 *   waiters as memory waiters and none as waiters, so other threads hand it no stream it cannot use; one handed to
 *   it anyway is passed on.
 * - Across threads, the first thread whose budget does not fit takes MEMORY_TURN, and no other thread admits a
 *   budget until it gives the turn up (admitted, aborted, detached or dead): a large budget is not starved by a
 *   stream of small ones. A turn held by a thread that no longer waits is taken back by anyone.
 * - Ending a lease with a budget rings every waiting thread (memory came back); a waiting thread also looks again
 *   every BACKSTOP_MS, which covers budgets given back by the cleanup of a dead thread.
 * - A lease without a budget neither waits for memory nor pays for admission, beyond one array read on release.
 */

/** The pool's policy for one thread's handle on a pool. @internal */
export class PoolCore<S> implements LeaseOwner<S> {
  readonly size: number;
  readonly environment: number;
  readonly #words: Int32Array;
  readonly #u32: Uint32Array;
  readonly #streams: readonly S[];
  readonly #poolStreams: PoolStreams<S>;
  readonly #layout: PoolLayout;
  /** NEXT is wound back by this multiple of size once it reaches it, so `n % size` never jumps. */
  readonly #limit: number;
  #detached: string | undefined;
  #closingHere = false;
  #queue: Waiter<S>[] = [];
  #head = 0;
  #live = 0;
  /** This thread's leases by stream index (a thread holds a stream's lease at most once): new ones strongly (#young), older ones
   * weakly (#held), so that a forgotten lease can be reclaimed (Note [lease reclaim]). */
  readonly #young: (StreamLease<S> | undefined)[];
  readonly #held: (WeakRef<StreamLease<S>> | undefined)[];
  #heldCount = 0;
  #promotion: NodeJS.Timeout | undefined;
  readonly #reclaimer: FinalizationRegistry<number>;
  /** Wakes close()'s wait for leases when this thread gives one back. */
  #closeWake: (() => void) | undefined;
  #entry = -1;
  #watched = -1;
  #timer: NodeJS.Timeout | undefined;
  #scan = 0;
  #closing: Promise<void> | undefined;
  #leasesBack: (() => void) | undefined;
  #terminated = false;
  /** The budget words and the limit (Note [memory admission]), over the same buffer as #words. */
  readonly #memory: BigInt64Array;
  /** The index of stream 0's budget in #memory. */
  readonly #budgetIndex: number;
  /** The budget of this thread's lease on each stream (bytes), 0 for none. */
  readonly #budgets: number[];
  /** The stream this thread's first waiter holds while it waits for its memory budget; -1 when none. */
  #parked = -1;
  /** The waiter the parked stream is kept for. */
  #parkedFor: Waiter<S> | undefined;

  /**
   * @param words - the shared words (Note [pool shared words]), over a SharedArrayBuffer.
   * @param environment - this thread's environment id, a positive integer unique among the threads sharing `words`.
   * @param memoryLimitBytes - the pool's memory limit (Note [memory admission]); written only when the words have
   * none yet, so the first handle made on them sets it.
   */
  constructor(words: Int32Array, size: number, environment: number, poolStreams: PoolStreams<S>, memoryLimitBytes?: number) {
    this.size = size;
    this.environment = environment;
    this.#words = words;
    this.#u32 = new Uint32Array(words.buffer, words.byteOffset, words.length);
    this.#streams = poolStreams.streams;
    this.#poolStreams = poolStreams;
    this.#layout = poolLayout(size);
    this.#limit = size * Math.floor(2 ** 31 / size);
    this.#young = new Array<StreamLease<S> | undefined>(size).fill(undefined);
    this.#held = new Array<WeakRef<StreamLease<S>> | undefined>(size).fill(undefined);
    this.#reclaimer = new FinalizationRegistry((streamIndex) => this.#reclaim(streamIndex));
    this.#memory = new BigInt64Array(words.buffer, words.byteOffset, words.length >> 1);
    this.#budgetIndex = this.#layout.budgetBase >> 1;
    this.#budgets = new Array<number>(size).fill(0);
    if (memoryLimitBytes !== undefined) Atomics.compareExchange(this.#memory, MEMORY_LIMIT_INDEX, 0n, BigInt(memoryLimitBytes));
  }

  /** The most memory the budgets of leases held at once may add up to, in bytes (Note [memory admission]). */
  get memoryLimitBytes(): number {
    return Number(Atomics.load(this.#memory, MEMORY_LIMIT_INDEX));
  }

  /** True once this handle cannot be used: detached here, or the pool destroyed anywhere. */
  get destroyed(): boolean {
    return this.#detached !== undefined || this.#words[STATE] === DESTROYED;
  }

  /** The next stream in round-robin order, or the one at `index % size`. See Note [pool hand-out]. */
  getStream(index?: number): S {
    if (index === undefined && this.#detached === undefined && this.#words[STATE] !== DESTROYED) {
      const n = Atomics.add(this.#u32, NEXT, 1);
      if (n >= this.#limit) this.#windBack(n);
      return this.#streams[n % this.size]!;
    }
    return this.#getStreamAt(index);
  }

  #windBack(n: number): void {
    // Exactly one caller sees n === LIMIT; the callers after it still pick (n % size) correctly, since LIMIT is a
    // multiple of size, and the counter never gets near 2 ** 32.
    if (n !== this.#limit) return;
    Atomics.sub(this.#u32, NEXT, this.#limit);
    Atomics.add(this.#words, WRAPS, 1);
  }

  #getStreamAt(index: number | undefined): S {
    this.#check('getStream');
    const i = validateInteger(index, 'index', 0, Number.MAX_SAFE_INTEGER);
    const streamIndex = i % this.size;
    Atomics.add(this.#u32, this.#layout.explicitBase + streamIndex, 1);
    return this.#streams[streamIndex]!;
  }

  /** A lease now if a stream is free, its budget fits and no waiter of this thread is ahead, else undefined; never
   * waits. */
  tryAcquire(options?: TryAcquireOptions, method = 'tryAcquire'): StreamLease<S> | undefined {
    const bytes = options === undefined ? 0 : this.#budgetOf(validateOptions<TryAcquireOptions>(options, 'options', method, ['memoryBytes']), PoolCore.prototype.tryAcquire);
    this.#checkOpen(method);
    if (this.#live > 0) return undefined;
    const streamIndex = this.#take();
    if (streamIndex < 0) return undefined;
    if (bytes === 0 || this.#admit(streamIndex, bytes, false)) return this.#grant(streamIndex, bytes);
    this.#handOff(streamIndex);
    return undefined;
  }

  // options.memoryBytes, checked against the limit; an error's stack starts at the public method that called `caller`.
  #budgetOf(options: Partial<TryAcquireOptions>, caller: Function): number {
    const bytes = options.memoryBytes;
    if (bytes === undefined) return 0;
    if (typeof bytes !== 'number')
      throw invalidType('options.memoryBytes', 'an integer (bytes)', bytes, typeof bytes === 'bigint' ? 'Pass Number(value).' : '', caller);
    const limit = this.memoryLimitBytes;
    if (!Number.isInteger(bytes) || bytes < 0)
      throw outOfRange('options.memoryBytes', `an integer from 0 to the pool's memory limit, ${limit} bytes`, bytes, '', caller);
    if (bytes > limit)
      throw outOfRange('options.memoryBytes', `an integer from 0 to the pool's memory limit, ${limit} bytes`, bytes, 'A budget above the limit could never be admitted.', caller);
    return bytes + 0; // -0 is 0
  }

  /** A lease, now or once a stream comes back; see Note [pool waiting]. */
  acquire(options?: AcquireOptions, method = 'acquire', caller: Function = PoolCore.prototype.acquire): Promise<StreamLease<S>> {
    let signal: AbortSignal | undefined;
    let bytes: number;
    try {
      const o = validateOptions<AcquireOptions>(options, 'options', method, ['signal', 'memoryBytes']);
      signal = validateSignal(o.signal, 'options.signal');
      bytes = this.#budgetOf(o, caller);
      this.#checkOpen(method);
    } catch (error) {
      return Promise.reject(error);
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    let taken = -1;
    if (this.#live === 0) {
      taken = this.#take();
      if (taken >= 0 && (bytes === 0 || this.#admit(taken, bytes, true))) return Promise.resolve(this.#grant(taken, bytes));
    }
    return new Promise<StreamLease<S>>((resolve, reject) => {
      const waiter: Waiter<S> = { bytes, resolve, reject, stopAbort: undefined, settled: false };
      if (signal) {
        waiter.stopAbort = whenAborted(signal, () => {
          if (waiter.settled) return;
          waiter.settled = true;
          this.#live--;
          reject(signal.reason);
          // The first waiter's stream goes to the waiter now first, or elsewhere.
          if (waiter === this.#parkedFor) this.#unpark();
          this.#publishWaiters();
          if (this.#live === 0) this.#stopWaiting();
        });
      }
      this.#queue.push(waiter);
      this.#live++;
      if (taken >= 0) this.#park(taken, waiter);
      this.#startWaiting();
    });
  }

  /** Leases a stream, runs `fn(stream)` with it as the current stream, releases it however `fn` ends, and settles
   * with `fn`'s outcome (the same value or error object). */
  run<T>(fn: (stream: S) => T, options?: RunOptions): Promise<Awaited<T>> {
    // Written with then() rather than async/await: a free stream is taken and fn called in this very call, and the
    // outcome settles the promise one step later instead of three (each step costs more once AsyncLocalStorage is in
    // use). Every error still becomes a rejection.
    let lease: StreamLease<S> | undefined;
    try {
      validateFunction(fn, 'fn');
      if (options === undefined) lease = this.tryAcquire(undefined, 'run');
    } catch (error) {
      return Promise.reject(error);
    }
    if (lease !== undefined) return this.#runLeased(lease, fn);
    return this.acquire(options, 'run', PoolCore.prototype.run).then((granted) => this.#runLeased(granted, fn));
  }

  // Runs fn in the scope of the lease's stream and releases the lease however fn ends, settling with fn's outcome.
  #runLeased<T>(lease: StreamLease<S>, fn: (stream: S) => T): Promise<Awaited<T>> {
    let result: T;
    try {
      result = this.#poolStreams.scope(lease.stream, fn);
    } catch (error) {
      lease.release();
      return Promise.reject(error);
    }
    if (result === null || (typeof result !== 'object' && typeof result !== 'function')) {
      lease.release();
      return Promise.resolve(result as Awaited<T>);
    }
    // A promise or any object (its `then` is read as `await` would read it): released once it settles.
    return (Promise.resolve(result) as Promise<Awaited<T>>).then(
      (value) => {
        lease.release();
        return value;
      },
      (error: unknown) => {
        lease.release();
        throw error;
      },
    );
  }

  /** Counters as Note [pool shared words] keeps them; a snapshot, not atomic as a whole. */
  counters(): PoolCounters {
    this.#check('stats');
    const { size } = this;
    const w = this.#words;
    const u = this.#u32;
    const l = this.#layout;
    const total = Atomics.load(w, WRAPS) * this.#limit + Atomics.load(u, NEXT);
    const rounds = Math.floor(total / size);
    const extra = total % size;
    const handOuts: number[] = [];
    const leaseCounts: number[] = [];
    let leased = 0;
    for (let i = 0; i < size; i++) {
      handOuts.push(rounds + (i < extra ? 1 : 0) + Atomics.load(u, l.explicitBase + i));
      leaseCounts.push(Atomics.load(u, l.leaseCountBase + i));
      if (Atomics.load(w, l.leaseBase + i) !== 0) leased++;
    }
    let waiters = 0;
    let memoryWaiters = 0;
    for (let k = 0; k < ENV_ENTRIES; k++) {
      const entry = l.envBase + k * ENV_STRIDE;
      if (Atomics.load(w, entry) === 0) continue;
      const forMemory = Atomics.load(w, entry + ENV_MEMORY_WAITERS);
      waiters += Atomics.load(w, entry + ENV_WAITERS) + forMemory;
      memoryWaiters += forMemory;
    }
    return {
      handOuts,
      leaseCounts,
      leased,
      waiters,
      memoryLimitBytes: this.memoryLimitBytes,
      memoryAdmittedBytes: this.#admittedBytes(),
      memoryWaiters,
      leasesReclaimed: Atomics.load(u, RECLAIMED),
    };
  }

  /** Destroys the pool for every thread: marks it destroyed, runs `destroyNative` (which destroys the streams),
   * wakes other threads' waiters (they reject), then detaches this thread. Idempotent. */
  destroyEverywhere(destroyNative: () => void): void {
    if (this.#detached !== undefined) return;
    Atomics.store(this.#words, STATE, DESTROYED);
    try {
      destroyNative();
    } finally {
      this.#ringAll();
      this.#ring(CLOSE_BELL);
      this.#detach('was destroyed');
    }
  }

  /** Closes the pool for every thread: rejects pending acquires everywhere, waits until every lease in every
   * thread is released, then for each stream's queued work (`drain`), then destroys it (`destroyEverywhere`).
   * Rejects with a drain's error after destroying, unless `quiet(error)` says to swallow it. When `signal` aborts
   * before the destroy, gives up: the pool is OPEN again and the promise rejects with `signal.reason`. */
  closeEverywhere(destroyNative: () => void, quiet: (error: unknown) => boolean, signal?: AbortSignal): Promise<void> {
    if (this.#closing) return this.#closing;
    if (this.#detached !== undefined) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    Atomics.compareExchange(this.#words, STATE, OPEN, CLOSING);
    this.#ringAll();
    this.#pump(); // rejects this thread's waiters
    const closing = (async () => {
      const aborted = abortPromise(signal);
      let failure: unknown;
      try {
        while (this.#words[STATE] === CLOSING && this.#anyLeased()) await Promise.race([this.#closeBell(), aborted.promise]);
        if (this.#words[STATE] === CLOSING) {
          const drains = this.#streams.map((_, streamIndex) => this.#poolStreams.drain(streamIndex));
          for (const result of await Promise.race([Promise.allSettled(drains), aborted.promise]))
            if (result.status === 'rejected' && failure === undefined && !quiet(result.reason)) failure = result.reason;
        }
      } catch (reason) {
        // Given up (only the abort rejects above): open again, unless another thread destroyed it meanwhile.
        Atomics.compareExchange(this.#words, STATE, CLOSING, OPEN);
        this.#closing = undefined;
        throw reason;
      } finally {
        aborted.dispose();
      }
      this.destroyEverywhere(destroyNative);
      if (failure !== undefined) throw failure;
    })();
    this.#closing = closing;
    return closing;
  }

  /** The ERR_INVALID_STATE error that close() rejects with when the calling async context holds a lease of this pool
   * (inside `run()` or `withStream(lease.stream)`): waiting for it would never end. Undefined otherwise. */
  closeRefusal(method: string): Error | undefined {
    const inScope = this.#poolStreams.inScope;
    if (inScope === undefined || this.#heldCount === 0) return undefined;
    for (let streamIndex = 0; streamIndex < this.size; streamIndex++) {
      const lease = this.#leaseAt(streamIndex);
      const view = lease ? leases.view(lease) : undefined;
      if (view === undefined || !inScope(view)) continue; // a view never made cannot be in scope
      let id: unknown;
      try {
        id = (view as { id?: unknown }).id;
      } catch {
        // a stand-in stream (the policy's tests) has no id
      }
      const stream = typeof id === 'bigint' ? `stream ${streamIndex} (id ${id})` : `stream ${streamIndex}`;
      return invalidState(
        `${method}() was called inside pool.run() (or withStream()) of a lease of this pool, on ${stream}: it would ` +
          'wait forever for that lease, which is released only after the call returns. Close the pool after run() settles.',
      );
    }
    return undefined;
  }

  /** Detaches this thread only: pending acquires of this thread reject, its leases end, later calls throw
   * DestroyedError with `why`. The pool goes on for the other threads. Idempotent. */
  detach(why: string): void {
    this.#detach(why);
  }

  /** Detaches this thread once its leases are released: new acquires and this thread's pending ones reject at once.
   * When `signal` aborts first, gives up: this thread's handle is open again and the promise rejects with its reason. */
  closeHere(why: string, signal?: AbortSignal): Promise<void> {
    if (this.#closing) return this.#closing;
    if (this.#detached !== undefined) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    this.#closingHere = true;
    this.#rejectAll(new DestroyedError('StreamPool', 'acquire', 'is closing'));
    this.#stopWaiting();
    const closing = new Promise<void>((resolve, reject) => {
      let stopAbort: (() => void) | undefined;
      const onAbort = () => {
        if (this.#leasesBack !== done) return;
        this.#leasesBack = undefined;
        this.#closingHere = false;
        this.#closing = undefined;
        reject(signal!.reason);
      };
      const done = () => {
        this.#leasesBack = undefined;
        stopAbort?.();
        this.#detach(why);
        resolve();
      };
      if (this.#heldCount === 0 || this.destroyed) return done();
      this.#leasesBack = done;
      if (signal) stopAbort = whenAborted(signal, onAbort);
    });
    this.#closing = closing;
    return closing;
  }

  /** Stops this handle for good without touching a shared word: its timers and wake-counter watches do nothing from
   * now on, as when its thread is terminated and its JS stops. What it held is given back by the thread-exit release
   * transition (Note [pool shared words]). Lets the model test kill a thread at any step. @internal */
  stopAsIfTerminated(): void {
    this.#terminated = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#promotion !== undefined) clearTimeout(this.#promotion);
    this.#promotion = undefined;
  }

  /** Throws the DestroyedError that says why this handle cannot be used (`method` names the caller). */
  check(method: string): void {
    this.#check(method);
  }

  /** The wrapper of the stream at `streamIndex` for `lease`, made when the lease's stream is first read. @internal */
  leaseView(streamIndex: number, lease: StreamLease<S>): S {
    return this.#poolStreams.leaseView(streamIndex, lease);
  }

  /** Called by StreamLease.release(); `view` is undefined when the lease's stream was never read. @internal */
  end(lease: StreamLease<S>, streamIndex: number, view: S | undefined): void {
    if (view !== undefined) {
      if (this.#poolStreams.used(view)) Atomics.store(this.#u32, this.#layout.idleAtBase + streamIndex, UNKNOWN_IDLE);
      // A lease ended by its pool's end says so: its holder released nothing.
      this.#poolStreams.retire(view, this.#detached === undefined ? 'belongs to a StreamLease that was released' : `belongs to a StreamPool that ${this.#detached}`);
    }
    if (this.#young[streamIndex] === lease) this.#young[streamIndex] = undefined;
    else this.#reclaimer.unregister(lease);
    this.#giveBack(streamIndex);
  }

  /* Note [lean leases]: tryAcquire() + release() is the pool's hot path, so a lease costs one small object and a few
   * shared-word operations, nothing more. On Node 20 an Atomics operation is a call into the runtime (about 20 ns),
   * not an inlined instruction, so the path makes only those the protocol needs and reads the rest plainly:
   * - The lease word is picked by a plain read and taken by compareExchange, which alone decides (a stale read only
   *   makes it fail, or skips a word that has just come free).
   * - The idleness words (Note [known idle]) are read plainly: they choose among free streams, a preference only.
   * - A release's first look at WAITING_ENVS is plain; the free that follows is an Atomics.store and the load after it
   *   is atomic, and that pair is what the ordering rule of Note [pool shared words] relies on.
   * - A stream's lease counter is written by the holder of its lease word alone, so a plain increment is race-free.
   * - The stream wrapper is made when `lease.stream` is first read (run() reads it at once), so a lease that never
   *   needs it costs no Stream. Each lease still gets a wrapper of its own: an object identity is all a stale
   *   reference carries, so a wrapper reused for a later lease could not tell its old holder from the new one.
   */

  /* Note [lease reclaim]: a forgotten lease goes back to the pool once neither it nor its stream can be reached. A
   * lease view keeps its lease alive (leaseView's `lease`), so the lease is what the garbage collector decides on.
   * The core must still find its leases (detach releases them, close() looks for one held by its caller), so it keeps
   * them by stream index (a thread holds a stream's lease at most once), in two steps:
   * - young: a new lease is held strongly in #young. Almost every lease is released within a few milliseconds, and a
   *   WeakRef plus a FinalizationRegistry registration cost 0.5 to 3 µs each, ten times the rest of a lease.
   * - held: every PROMOTE_MS (an unref'd timer, armed by the first lease after the last round) the leases still young
   *   get a WeakRef in #held and a registration with the FinalizationRegistry; release() unregisters them.
   * When a registered lease is collected, its stream comes back as release() would give it, counted in RECLAIMED.
   * Nothing can have queued work through its view since, so only the stream's idleness is forgotten. A callback that
   * comes after the stream was given back some other way (detach) finds no dead WeakRef in #held and does nothing. So
   * a forgotten lease is reclaimed by the first collection at least PROMOTE_MS after it was granted. */
  #promote(): void {
    this.#promotion = undefined;
    if (this.#detached !== undefined || this.#terminated) return;
    for (let streamIndex = 0; streamIndex < this.size; streamIndex++) {
      const lease = this.#young[streamIndex];
      if (lease === undefined) continue;
      this.#young[streamIndex] = undefined;
      this.#held[streamIndex] = new WeakRef(lease);
      this.#reclaimer.register(lease, streamIndex, lease);
    }
  }

  // This thread's live lease on `streamIndex`; null when it was collected unreleased and not reclaimed yet.
  #leaseAt(streamIndex: number): StreamLease<S> | null | undefined {
    const young = this.#young[streamIndex];
    if (young !== undefined) return young;
    const ref = this.#held[streamIndex];
    return ref === undefined ? undefined : (ref.deref() ?? null);
  }

  #reclaim(streamIndex: number): void {
    const ref = this.#held[streamIndex];
    if (ref === undefined || ref.deref() !== undefined || this.#terminated) return;
    Atomics.add(this.#u32, RECLAIMED, 1);
    Atomics.store(this.#u32, this.#layout.idleAtBase + streamIndex, UNKNOWN_IDLE);
    this.#giveBack(streamIndex);
  }

  // The lease on `streamIndex` ended (released or reclaimed): the stream goes to the next waiter or back to the pool.
  #giveBack(streamIndex: number): void {
    this.#young[streamIndex] = undefined;
    this.#held[streamIndex] = undefined;
    this.#heldCount--;
    const budget = this.#budgets[streamIndex]!;
    if (budget !== 0) {
      // Before the word leaves this thread: its next holder writes a budget of its own.
      this.#budgets[streamIndex] = 0;
      Atomics.store(this.#memory, this.#budgetIndex + streamIndex, 0n);
    }
    const state = this.#words[STATE];
    if (state !== DESTROYED) {
      this.#handOff(streamIndex);
      if (budget !== 0 && Atomics.load(this.#words, WAITING_ENVS) > 0) this.#ringAll(); // memory came back
      if (state === CLOSING) {
        this.#ring(CLOSE_BELL);
        this.#closeWake?.();
      }
    }
    if (this.#leasesBack && this.#heldCount === 0) this.#leasesBack();
  }

  // ---- checks ----

  #check(method: string): void {
    if (this.#detached !== undefined) throw new DestroyedError('StreamPool', method, this.#detached);
    if (this.#words[STATE] === DESTROYED) {
      this.#detach('was destroyed');
      throw new DestroyedError('StreamPool', method, 'was destroyed');
    }
  }

  #checkOpen(method: string): void {
    this.#check(method);
    if (this.#closingHere || this.#words[STATE] === CLOSING) throw new DestroyedError('StreamPool', method, 'is closing');
  }

  // ---- taking and giving streams ----

  #idle(streamIndex: number): boolean {
    if (this.#knownIdle(streamIndex)) return true;
    let idle: boolean;
    try {
      idle = this.#poolStreams.isIdle(streamIndex);
    } catch {
      return false;
    }
    if (idle) {
      const l = this.#layout;
      Atomics.store(this.#u32, l.idleExplicitBase + streamIndex, Atomics.load(this.#u32, l.explicitBase + streamIndex));
      Atomics.store(this.#u32, l.idleAtBase + streamIndex, Atomics.load(this.#u32, NEXT));
    }
    return idle;
  }

  /* Note [known idle]: asking the driver whether a stream is idle costs an N-API call and cuStreamQuery (about half
   * a microsecond), more than the rest of a lease. So a stream found idle keeps that fact in idleAt/idleExplicit
   * until something may have queued work on it: a lease whose wrapper was used (end() forgets it), getStream()
   * handing it out round-robin (NEXT passed a value n ≡ streamIndex mod size since idleAt), or getStream(index) (its
   * explicit count changed). Work queued through `stream.handle` by another library is not seen: preferring idle
   * streams is a preference, never a guarantee. */
  #knownIdle(streamIndex: number): boolean {
    // Plain reads: a stale value only changes which free stream is preferred (Note [lean leases]).
    const l = this.#layout;
    const u = this.#u32;
    const then = u[l.idleAtBase + streamIndex]!;
    if (then === UNKNOWN_IDLE) return false;
    if (u[l.explicitBase + streamIndex] !== u[l.idleExplicitBase + streamIndex]) return false;
    const now = u[NEXT]!;
    if (now < then || now - then >= this.size) return false; // wound back, or a whole round handed out
    const firstHandOut = then + ((streamIndex - (then % this.size) + this.size) % this.size); // first n >= then, n % size = streamIndex
    return firstHandOut >= now;
  }

  // Takes a free stream (or one handed to this thread) for this thread; -1 when none. Prefers an idle one.
  #take(): number {
    const w = this.#words;
    const env = this.environment;
    const base = this.#layout.leaseBase;
    const size = this.size;
    let fallback = -1;
    let probes = 0;
    for (let k = 0, streamIndex = this.#scan; k < size; k++, streamIndex = streamIndex + 1 === size ? 0 : streamIndex + 1) {
      // A plain read picks the candidate; the compareExchange below is what takes it (Note [lean leases]).
      const word = w[base + streamIndex]!;
      if (word === -env || (word < 0 && !this.#registered(-word))) {
        // Handed to this thread, or a stale hand-off to a thread no longer waiting: claim or reclaim.
        if (Atomics.compareExchange(w, base + streamIndex, word, env) === word) return this.#took(streamIndex);
        continue;
      }
      if (word !== 0) continue;
      if (probes === IDLE_PROBES) {
        if (fallback < 0) fallback = streamIndex;
        break;
      }
      probes++;
      if (this.#idle(streamIndex)) {
        if (Atomics.compareExchange(w, base + streamIndex, 0, env) === 0) return this.#took(streamIndex);
      } else if (fallback < 0) fallback = streamIndex;
    }
    if (fallback >= 0 && Atomics.compareExchange(w, base + fallback, 0, env) === 0) return this.#took(fallback);
    if (fallback < 0) return -1;
    // Lost the race for the busy one: any free stream will do.
    for (let streamIndex = 0; streamIndex < size; streamIndex++)
      if (Atomics.compareExchange(w, base + streamIndex, 0, env) === 0) return this.#took(streamIndex);
    return -1;
  }

  #took(streamIndex: number): number {
    this.#scan = streamIndex + 1 === this.size ? 0 : streamIndex + 1;
    return streamIndex;
  }

  #grant(streamIndex: number, bytes = 0): StreamLease<S> {
    // Only the holder of a stream's lease word writes its counter, so a plain increment is race-free (the CAS that took
    // the word orders it after the previous holder's); stats() may read it a moment late.
    const counts = this.#u32;
    const at = this.#layout.leaseCountBase + streamIndex;
    counts[at] = counts[at]! + 1;
    const lease = leases.make(this, streamIndex, bytes);
    this.#budgets[streamIndex] = bytes;
    this.#young[streamIndex] = lease;
    this.#heldCount++;
    if (this.#promotion === undefined) {
      this.#promotion = setTimeout(() => this.#promote(), PROMOTE_MS);
      this.#promotion.unref();
    }
    return lease;
  }

  // This thread holds lease word `streamIndex` (+env) and no lease uses it: pass it on, to this thread's waiters too
  // unless `local` is false. See Note [pool waiting].
  #handOff(streamIndex: number, local = true): void {
    const w = this.#words;
    const env = this.environment;
    const at = this.#layout.leaseBase + streamIndex;
    for (let first = true; ; first = false) {
      const mine = this.#entry >= 0 ? 1 : 0;
      // The first look may be a plain read: a registration it misses is seen by the load after the free below,
      // which bumps every wake counter (Note [lean leases]).
      if ((first ? w[WAITING_ENVS]! : Atomics.load(w, WAITING_ENVS)) > mine) {
        const entry = this.#nextWaiting();
        const target = entry >= 0 && entry !== this.#entry ? Atomics.load(w, entry) : 0;
        if (target > 0 && target !== env) {
          Atomics.store(w, at, -target);
          Atomics.add(w, entry + ENV_WAKE_COUNTER, 1);
          Atomics.notify(w, entry + ENV_WAKE_COUNTER);
          if (Atomics.load(w, entry) === target) return;
          // It stopped waiting meanwhile: take the stream back unless it claimed it, and try again.
          if (Atomics.compareExchange(w, at, -target, env) !== -target) return;
          continue;
        }
      }
      if (local && this.#live > 0) {
        this.#serveHead(streamIndex);
        return;
      }
      Atomics.store(w, at, 0);
      if (Atomics.load(w, WAITING_ENVS) > (this.#entry >= 0 ? 1 : 0)) this.#ringAll();
      return;
    }
  }

  // True when an entry of the waiting table names `environment`. See reclaim in Note [pool shared words].
  #registered(environment: number): boolean {
    const w = this.#words;
    const base = this.#layout.envBase;
    for (let k = 0; k < ENV_ENTRIES; k++) if (Atomics.load(w, base + k * ENV_STRIDE) === environment) return true;
    return false;
  }

  // The next registered entry with waiters, from CURSOR on; advances CURSOR past it. -1 when none.
  #nextWaiting(): number {
    const w = this.#words;
    const base = this.#layout.envBase;
    const start = Atomics.load(w, CURSOR) % ENV_ENTRIES;
    for (let k = 0; k < ENV_ENTRIES; k++) {
      const i = (start + k) % ENV_ENTRIES;
      const entry = base + i * ENV_STRIDE;
      if (Atomics.load(w, entry) !== 0 && Atomics.load(w, entry + ENV_WAITERS) > 0) {
        Atomics.store(w, CURSOR, (i + 1) % ENV_ENTRIES);
        return entry;
      }
    }
    return -1;
  }

  // Gives `streamIndex` (held by this thread) to the first waiter still waiting, once its budget is admitted; parks it
  // for that waiter when the budget does not fit (Note [memory admission]).
  #serveHead(streamIndex: number): void {
    if (this.#parked >= 0) {
      // The first waiter has a stream already: memory may have come back; this stream is for the waiter after it.
      if (this.#retryParked() && this.#live > 0) this.#serveHead(streamIndex);
      else this.#handOff(streamIndex, false);
      return;
    }
    const waiter = this.#firstWaiter();
    if (waiter === undefined) {
      // Unreachable while #live counts the unsettled waiters; kept so a stream is never lost.
      this.#live = 0;
      this.#handOff(streamIndex);
      return;
    }
    if (waiter.bytes !== 0 && !this.#admit(streamIndex, waiter.bytes, true)) {
      this.#park(streamIndex, waiter);
      return;
    }
    this.#serve(waiter, streamIndex);
  }

  // The first waiter not settled yet; settled ones before it are dropped from the queue.
  #firstWaiter(): Waiter<S> | undefined {
    const queue = this.#queue;
    while (this.#head < queue.length && queue[this.#head]!.settled) this.#head++;
    if (this.#head > 64 && this.#head * 2 > queue.length) {
      queue.splice(0, this.#head);
      this.#head = 0;
    }
    return queue[this.#head];
  }

  // Grants `streamIndex` to `waiter`, whose budget (if any) is admitted on it.
  #serve(waiter: Waiter<S>, streamIndex: number): void {
    waiter.settled = true;
    this.#live--;
    waiter.stopAbort?.();
    this.#publishWaiters();
    waiter.resolve(this.#grant(streamIndex, waiter.bytes));
    if (this.#live === 0) this.#stopWaiting();
  }

  // ---- memory admission (Note [memory admission]) ----

  // Keeps `streamIndex` for `waiter`, the first waiter, until its budget fits.
  #park(streamIndex: number, waiter: Waiter<S>): void {
    this.#parked = streamIndex;
    this.#parkedFor = waiter;
    this.#publishWaiters();
  }

  // Admits the parked waiter's budget and serves it, if the budget fits now.
  #retryParked(): boolean {
    const waiter = this.#parkedFor!;
    const streamIndex = this.#parked;
    if (!this.#admit(streamIndex, waiter.bytes, true)) return false;
    this.#parked = -1;
    this.#parkedFor = undefined;
    this.#serve(waiter, streamIndex);
    return true;
  }

  // The parked stream's waiter went (aborted, rejected): the stream goes to the next waiter, or elsewhere.
  #unpark(): void {
    const streamIndex = this.#parked;
    if (streamIndex < 0) return;
    this.#parked = -1;
    this.#parkedFor = undefined;
    if (this.#words[STATE] === DESTROYED) return; // every word is void now
    this.#giveUpTurn();
    this.#publishWaiters();
    this.#handOff(streamIndex);
  }

  /** Writes `bytes` as the budget of this thread's word `streamIndex` if the admitted sum stays within the limit and
   * no other waiting thread has the turn. When it does not fit and `waits`, takes the turn if nobody has it. */
  #admit(streamIndex: number, bytes: number, waits: boolean): boolean {
    const w = this.#words;
    const env = this.environment;
    const turn = Atomics.load(w, MEMORY_TURN);
    if (turn !== 0 && turn !== env) {
      if (this.#registered(turn)) return false; // a thread that waits for memory is ahead
      Atomics.compareExchange(w, MEMORY_TURN, turn, 0); // it stopped waiting without giving the turn up
    }
    if (!this.#lockMemory()) return false; // held for long: the backstop looks again
    let fits: boolean;
    try {
      fits = this.#admittedBytes() + bytes <= this.memoryLimitBytes;
      if (fits) Atomics.store(this.#memory, this.#budgetIndex + streamIndex, BigInt(bytes));
    } finally {
      Atomics.store(w, MEMORY_LOCK, 0);
    }
    if (fits) this.#giveUpTurn();
    else if (waits) Atomics.compareExchange(w, MEMORY_TURN, 0, env);
    return fits;
  }

  #lockMemory(): boolean {
    // The lock is held for one sum of `size` words; the cleanup of a thread that died holding it frees it.
    for (let spin = 0; spin < 10_000; spin++) if (Atomics.compareExchange(this.#words, MEMORY_LOCK, 0, this.environment) === 0) return true;
    return false;
  }

  #giveUpTurn(): void {
    if (Atomics.compareExchange(this.#words, MEMORY_TURN, this.environment, 0) === this.environment) this.#ringAll();
  }

  // The budgets of every lease held, in every thread (bytes).
  #admittedBytes(): number {
    let sum = 0n;
    for (let streamIndex = 0; streamIndex < this.size; streamIndex++) sum += Atomics.load(this.#memory, this.#budgetIndex + streamIndex);
    return Number(sum);
  }

  // ---- waiting ----

  #startWaiting(): void {
    if (this.#entry < 0) this.#register();
    else this.#publishWaiters();
    this.#pump();
  }

  #register(): void {
    const w = this.#words;
    for (let k = 0; k < ENV_ENTRIES; k++) {
      const entry = this.#layout.envBase + k * ENV_STRIDE;
      if (Atomics.compareExchange(w, entry, 0, this.environment) === 0) {
        this.#entry = entry;
        this.#publishWaiters();
        Atomics.add(w, WAITING_ENVS, 1);
        return;
      }
    }
    // The table is full: this thread still gets streams, through its backstop timer.
  }

  // A thread whose first waiter waits for memory publishes its waiters as memory waiters, so no stream is handed to it.
  #publishWaiters(): void {
    const entry = this.#entry;
    if (entry < 0) return;
    const forMemory = this.#parked >= 0;
    Atomics.store(this.#words, entry + ENV_WAITERS, forMemory ? 0 : this.#live);
    Atomics.store(this.#words, entry + ENV_MEMORY_WAITERS, forMemory ? this.#live : 0);
  }

  // Serves this thread's queue from free and handed-over streams; then sleeps until its wake counter moves or the backstop.
  #pump(): void {
    if (this.#terminated) return;
    if (this.#live === 0) return this.#stopWaiting();
    const state = this.#words[STATE];
    if (this.#detached !== undefined || state !== OPEN || this.#closingHere) {
      const why = this.#detached ?? (state === DESTROYED ? 'was destroyed' : 'is closing');
      this.#rejectAll(new DestroyedError('StreamPool', 'acquire', why));
      if (state === DESTROYED) this.#detach('was destroyed');
      return this.#stopWaiting();
    }
    const bell = this.#entry >= 0 ? Atomics.load(this.#words, this.#entry + ENV_WAKE_COUNTER) : 0;
    while (this.#live > 0) {
      if (this.#parked >= 0) {
        if (this.#retryParked()) continue;
        this.#passHandedOn();
        break;
      }
      const streamIndex = this.#take();
      if (streamIndex < 0) break;
      this.#serveHead(streamIndex);
    }
    if (this.#live === 0) return this.#stopWaiting();
    this.#sleep(bell);
  }

  // Streams handed to this thread that none of its waiters will take go on to others: those handed after its last
  // waiter was served, or, while its first waiter waits for memory, by a thread that read its waiters just before they
  // were published as memory waiters.
  #passHandedOn(): void {
    const w = this.#words;
    const env = this.environment;
    const base = this.#layout.leaseBase;
    for (let streamIndex = 0; streamIndex < this.size; streamIndex++)
      if (Atomics.load(w, base + streamIndex) === -env && Atomics.compareExchange(w, base + streamIndex, -env, env) === -env) this.#handOff(streamIndex, false);
  }

  #sleep(bell: number): void {
    const entry = this.#entry;
    if (entry >= 0 && this.#watched !== entry) {
      const result = waitAsync(this.#words, entry + ENV_WAKE_COUNTER, bell, WATCH_MS);
      if (!result.async) {
        queueMicrotask(() => this.#pump()); // the wake counter moved since `bell` was read
      } else {
        this.#watched = entry;
        void (result.value as Promise<string>).then(() => {
          if (this.#watched === entry) this.#watched = -1;
          this.#pump();
        });
      }
    }
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      this.#pump();
    }, BACKSTOP_MS);
    // A first waiter waiting for memory with a stream free is still waiting only for this thread's own leases.
    if (this.#selfDeadlocked(this.#parked >= 0)) this.#timer.unref();
    else this.#timer.ref();
  }

  /** True when nothing but this thread can end a wait for leases (Note [pool waiting]): no other environment holds
   * a handle, and every lease word is this thread's (with `freeOk`, every leased word: close()'s wait). */
  #selfDeadlocked(freeOk: boolean): boolean {
    const w = this.#words;
    if (Atomics.load(w, ATTACHED_ENVS) > 1) return false;
    const env = this.environment;
    const base = this.#layout.leaseBase;
    for (let streamIndex = 0; streamIndex < this.size; streamIndex++) {
      const word = Atomics.load(w, base + streamIndex);
      if (word !== env && word !== -env && !(freeOk && word === 0)) return false;
    }
    return true;
  }

  #stopWaiting(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#live > 0 || this.#entry < 0) return;
    const w = this.#words;
    const entry = this.#entry;
    this.#entry = -1;
    Atomics.store(w, entry + ENV_WAITERS, 0);
    Atomics.store(w, entry + ENV_MEMORY_WAITERS, 0);
    Atomics.compareExchange(w, entry, this.environment, 0);
    Atomics.sub(w, WAITING_ENVS, 1);
    // Streams handed over after the last waiter was served: pass them on.
    if (w[STATE] === DESTROYED) return;
    this.#passHandedOn();
  }

  #rejectAll(error: Error): void {
    const waiters = this.#queue.slice(this.#head);
    this.#queue = [];
    this.#head = 0;
    this.#live = 0;
    for (const waiter of waiters) {
      if (waiter.settled) continue;
      waiter.settled = true;
      waiter.stopAbort?.();
      waiter.reject(error);
    }
    this.#unpark();
    this.#publishWaiters();
  }

  #ring(index: number): void {
    Atomics.add(this.#words, index, 1);
    Atomics.notify(this.#words, index);
  }

  #ringAll(): void {
    const w = this.#words;
    for (let k = 0; k < ENV_ENTRIES; k++) {
      const entry = this.#layout.envBase + k * ENV_STRIDE;
      if (Atomics.load(w, entry) !== 0) this.#ring(entry + ENV_WAKE_COUNTER);
    }
  }

  // Reclaims stale hand-offs on the way, so that close() never waits for a thread that is gone.
  #anyLeased(): boolean {
    const w = this.#words;
    let leased = false;
    for (let i = 0; i < this.size; i++) {
      const at = this.#layout.leaseBase + i;
      const word = Atomics.load(w, at);
      if (word < 0 && !this.#registered(-word) && Atomics.compareExchange(w, at, word, 0) === word) continue;
      if (word !== 0) leased = true;
    }
    return leased;
  }

  // Resolves when CLOSE_BELL rings, this thread gives a lease back, or after the backstop; the timer keeps this
  // thread alive meanwhile unless only this thread holds leases (Note [pool waiting]).
  #closeBell(): Promise<void> {
    const bell = Atomics.load(this.#words, CLOSE_BELL);
    if (!this.#anyLeased()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        if (this.#closeWake === wake) this.#closeWake = undefined;
        resolve();
      };
      const timer = setTimeout(wake, BACKSTOP_MS);
      if (this.#selfDeadlocked(true)) timer.unref();
      this.#closeWake = wake;
      const result = waitAsync(this.#words, CLOSE_BELL, bell, WATCH_MS);
      if (!result.async) wake();
      else void (result.value as Promise<string>).then(wake);
    });
  }

  #detach(why: string): void {
    if (this.#detached !== undefined) return;
    this.#detached = why;
    this.#rejectAll(new DestroyedError('StreamPool', 'acquire', why));
    this.#stopWaiting();
    for (let streamIndex = 0; streamIndex < this.size; streamIndex++) {
      const lease = this.#leaseAt(streamIndex);
      if (lease) lease.release();
      else if (lease === null) this.#reclaim(streamIndex); // collected, its callback not run yet
    }
    if (this.#promotion !== undefined) clearTimeout(this.#promotion);
    this.#promotion = undefined;
    if (why === 'was destroyed') for (const stream of this.#streams) this.#poolStreams.retire(stream, 'belongs to a StreamPool that was destroyed');
  }
}

/** A promise that rejects with `signal.reason` when it aborts (never without a signal); `dispose()` stops listening. */
function abortPromise(signal: AbortSignal | undefined): { promise: Promise<never>; dispose: () => void } {
  if (signal === undefined) return { promise: new Promise<never>(() => {}), dispose: () => {} };
  let dispose!: () => void;
  const promise = new Promise<never>((_, reject) => {
    dispose = whenAborted(signal, () => reject(signal.reason));
  });
  promise.catch(() => {}); // raced, and only its rejection matters there
  return { promise, dispose };
}
