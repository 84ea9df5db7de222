// The soak's own record of who holds each pool stream's lease, in a SharedArrayBuffer that every thread sharing the
// pool writes, so that a stream leased by two holders at once (in any threads) is caught when the second one gets it.

/** A stream lease held twice: the library handed out a stream that another holder still had. */
export class DoubleLeaseError extends Error {
  override readonly name = 'DoubleLeaseError';
}

/** The most thread ids a ledger knows (main is 1; every worker, replacements included, gets the next id). */
export const MAX_THREADS = 4096;

/**
 * One word per pool stream: 0 when no lease holds it, else the id of the thread whose lease holds it; and one flag
 * per thread id, set before that thread is terminated (its leases then come back without its help, so a stream
 * marked by it may be taken over).
 *
 * A holder claims the stream right after the library granted the lease, and unclaims it right before releasing,
 * so at any moment the library's holder and the ledger's agree, and a second grant finds the word taken.
 */
export class LeaseLedger {
  readonly buffer: SharedArrayBuffer;
  readonly #holders: Int32Array;
  readonly #dying: Int32Array;

  /** A new ledger for `streams` streams, or a view of an existing one (`buffer` from another thread). */
  constructor(streams: number, buffer?: SharedArrayBuffer) {
    this.buffer = buffer ?? new SharedArrayBuffer(4 * (streams + MAX_THREADS));
    if (this.buffer.byteLength !== 4 * (streams + MAX_THREADS))
      throw new RangeError(`a ledger of ${streams} streams needs ${4 * (streams + MAX_THREADS)} bytes; received ${this.buffer.byteLength}`);
    this.#holders = new Int32Array(this.buffer, 0, streams);
    this.#dying = new Int32Array(this.buffer, 4 * streams, MAX_THREADS);
  }

  /** The number of streams. */
  get streams(): number {
    return this.#holders.length;
  }

  /** The thread holding stream `slot`, or 0. */
  holder(slot: number): number {
    return Atomics.load(this.#holders, slot);
  }

  /** Records that `thread` holds stream `slot`. @throws DoubleLeaseError when another live holder has it. */
  claim(slot: number, thread: number, what: string): void {
    checkThread(thread);
    for (;;) {
      const previous = Atomics.compareExchange(this.#holders, slot, 0, thread);
      if (previous === 0) return;
      if (previous === thread)
        throw new DoubleLeaseError(`${what}: stream ${slot} was leased again to thread ${thread}, which already holds it`);
      if (Atomics.load(this.#dying, previous) === 0)
        throw new DoubleLeaseError(`${what}: stream ${slot} was leased to thread ${thread} while thread ${previous} holds it`);
      // The holder was terminated: the library gave its leases back.
      if (Atomics.compareExchange(this.#holders, slot, previous, thread) === previous) return;
    }
  }

  /** Records that `thread` is about to release stream `slot`. @throws DoubleLeaseError when it did not hold it. */
  unclaim(slot: number, thread: number, what: string): void {
    const previous = Atomics.compareExchange(this.#holders, slot, thread, 0);
    if (previous !== thread)
      throw new DoubleLeaseError(`${what}: thread ${thread} releases stream ${slot}, but the ledger has ${previous === 0 ? 'no holder' : `thread ${previous}`} for it`);
  }

  /** Marks `thread` as terminated: its streams may be taken over. */
  markDying(thread: number): void {
    checkThread(thread);
    Atomics.store(this.#dying, thread, 1);
  }

  /** Clears every stream `thread` holds (after it detached or was terminated); returns how many. */
  clearThread(thread: number): number {
    let cleared = 0;
    for (let slot = 0; slot < this.#holders.length; slot++)
      if (Atomics.compareExchange(this.#holders, slot, thread, 0) === thread) cleared++;
    return cleared;
  }

  /** The streams held now, by anyone. */
  held(): number {
    let count = 0;
    for (let slot = 0; slot < this.#holders.length; slot++) if (Atomics.load(this.#holders, slot) !== 0) count++;
    return count;
  }
}

function checkThread(thread: number): void {
  if (!Number.isInteger(thread) || thread < 1 || thread >= MAX_THREADS)
    throw new RangeError(`a ledger thread id is an integer from 1 to ${MAX_THREADS - 1}; received ${thread}`);
}
