// StreamLease: an exclusive lease on one pool stream. The pool's policy (pool/pool-policy.ts) grants and ends it; this
// file knows the policy only through LeaseOwner, so the policy imports the lease and never the other way round.
import { DestroyedError } from '../binding/errors.js';
import { privateState, register } from '../internal/handles.js';
import type { Stream } from '../stream/stream.js';
import { checkConstruction, guardReceivers, internalConstruction } from '../internal/validate.js';

/** What a lease needs of the pool that granted it (PoolCore). @internal */
export interface LeaseOwner<S> {
  /** The wrapper of the stream at `streamIndex` for `lease`, made when the lease's stream is first read. */
  leaseView(streamIndex: number, lease: StreamLease<S>): S;
  /** Ends the lease on `streamIndex`; `view` is undefined when the lease's stream was never read. */
  end(lease: StreamLease<S>, streamIndex: number, view: S | undefined): void;
}

/** A lease's construction, and its stream wrapper (undefined while nobody has asked for it: Note [lean leases]); for
 * the pool's policy. @internal */
export const leases = privateState<{ make<S>(owner: LeaseOwner<S>, streamIndex: number, memoryBytes: number): StreamLease<S>; view<S>(lease: StreamLease<S>): S | undefined }>('StreamLease', ['make', 'view']);

/** An exclusive lease on one stream of a {@link StreamPool}: until it is released, no other lease in any thread holds
 * that stream. `getStream()` (shared mode) may still hand the same stream out; see Note [pool hand-out].
 *
 * Lifetime: borrows the stream from its pool. `release()` or `[Symbol.dispose]` ends the lease (a second call does
 * nothing); afterwards `lease.stream`, and the stream object it returned, throw {@link DestroyedError}. A lease that
 * is never released stays held until its thread detaches from the pool or exits, or the pool is destroyed, or the
 * garbage collector finds that neither the lease nor its stream can be reached any more: then it goes back to the
 * pool, counted in `stats().leasesReclaimed` (the stream keeps its lease alive, so
 * `const { stream } = await pool.acquire()` is safe while `stream` is in use).
 * Thread-safety: a lease belongs to the thread that acquired it.
 * @throws {@link DestroyedError} from `stream` after release. */
export class StreamLease<S = Stream> {
  #core: LeaseOwner<S> | undefined;
  #streamIndex: number;
  #view: S | undefined = undefined;
  readonly #memoryBytes: number;

  private constructor(token: symbol, core: LeaseOwner<S>, streamIndex: number, memoryBytes: number) {
    checkConstruction(token, 'StreamLease', 'pool.acquire(), pool.tryAcquire() or pool.run()');
    this.#core = core;
    this.#streamIndex = streamIndex;
    this.#memoryBytes = memoryBytes;
  }

  static {
    guardReceivers(StreamLease, (value) => #streamIndex in value);
    register(leases, { make: (core, streamIndex, memoryBytes) => new StreamLease(internalConstruction, core, streamIndex, memoryBytes), view: (lease) => lease.#view });
  }

  /** The leased stream: a wrapper of its own, made on first read and retired when the lease ends, so that work
   * scheduled through it after release throws instead of landing on a stream someone else now holds. The same
   * object on every read during the lease.
   * @throws {@link DestroyedError} (resource 'StreamLease') after release. */
  get stream(): S {
    const core = this.#core;
    if (core === undefined) throw new DestroyedError('StreamLease', 'stream', 'was released');
    return (this.#view ??= core.leaseView(this.#streamIndex, this));
  }

  /** The memory budget admitted with this lease, in bytes (`options.memoryBytes` of the call that asked for it);
   * 0 for none. The same after release, though the budget was given back then. */
  get memoryBytes(): number {
    return this.#memoryBytes;
  }

  /** True once the lease was released (by `release()`, or by its pool detaching from this thread). */
  get released(): boolean {
    return this.#core === undefined;
  }

  /** Ends the lease: its memory budget comes back at once, and the stream goes to the next waiter (this thread's first, or another thread's in turn) or back
   * to the free streams. Work already queued on it goes on; the next holder's work queues behind it. Idempotent;
   * never throws. */
  release(): void {
    const core = this.#core;
    if (core === undefined) return;
    this.#core = undefined;
    core.end(this, this.#streamIndex, this.#view);
  }

  /** Same as {@link StreamLease.release}. */
  [Symbol.dispose](): void {
    this.release();
  }
}
