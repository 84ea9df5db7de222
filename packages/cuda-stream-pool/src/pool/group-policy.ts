// The device-spreading policy of StreamPoolGroup (pool/pool-group.ts) in plain TypeScript over abstract members: each
// device's StreamPool in the library, pool cores over fake streams in the CPU tests. Kept out of the public class so
// that its type stays over real streams. See Note [device spreading] in pool/pool-group.ts.
import { DestroyedError } from '../binding/errors.js';
import { validateFunction, validateInteger, validateOptions, validateSignal } from '../internal/validate.js';
import type { AcquireOptions, RunOptions, TryAcquireOptions } from './pool-policy.js';

/** What a group needs of each device's pool: `StreamPool` in the library, a pool policy over fake streams in the CPU
 * tests. `S` is the stream type, `L` the lease type, `T` what `stats()` returns. @internal */
export interface PoolGroupMember<S, L extends { readonly stream: S; release(): void }, T> {
  /** The pool's next stream in round-robin order, or the one at `index % size`. */
  getStream(index?: number): S;
  /** A lease now, or undefined when none is free (or its budget does not fit). */
  tryAcquire(options?: TryAcquireOptions): L | undefined;
  /** A lease, now or once one comes back. */
  acquire(options?: AcquireOptions): Promise<L>;
  /** The pool's counters. */
  stats(): T;
}

const DETACHED = 'was destroyed (destroy() detaches the group; its pools stay)';

/** One group object's turns over its members; StreamPoolGroup's methods are these (documented there). @internal */
export class GroupCore<S, L extends { readonly stream: S; release(): void }, T> {
  readonly #members: readonly PoolGroupMember<S, L, T>[];
  readonly #scope: <R>(stream: S, fn: (stream: S) => R) => R;
  #handOut = 0; // the device of the next getStream()
  #turn = 0; // the device that tries first for the next lease
  #detached = false;

  /** @param scope - runs a function with a stream as the current one. */
  constructor(members: readonly PoolGroupMember<S, L, T>[], scope: <R>(stream: S, fn: (stream: S) => R) => R) {
    this.#members = members;
    this.#scope = scope;
  }

  #check(method: string): void {
    if (this.#detached) throw new DestroyedError('StreamPoolGroup', method, DETACHED);
  }

  getStream(index?: number): S {
    this.#check('getStream');
    const count = this.#members.length;
    if (index === undefined) {
      const member = this.#members[this.#handOut]!;
      this.#handOut = (this.#handOut + 1) % count;
      return member.getStream();
    }
    const i = validateInteger(index, 'index', 0, Number.MAX_SAFE_INTEGER);
    return this.#members[i % count]!.getStream(Math.floor(i / count));
  }

  tryAcquire(options?: TryAcquireOptions): L | undefined {
    this.#check('tryAcquire');
    return this.#tryEach(options === undefined ? undefined : { memoryBytes: validateOptions<TryAcquireOptions>(options, 'options', 'tryAcquire', ['memoryBytes']).memoryBytes });
  }

  // A budget is checked by each member against its own device's limit.
  #tryEach(options: TryAcquireOptions | undefined): L | undefined {
    const count = this.#members.length;
    for (let k = 0; k < count; k++) {
      const at = (this.#turn + k) % count;
      const lease = this.#members[at]!.tryAcquire(options);
      if (lease !== undefined) {
        this.#turn = (at + 1) % count;
        return lease;
      }
    }
    return undefined;
  }

  acquire(options?: AcquireOptions): Promise<L> {
    try {
      const o = validateOptions<AcquireOptions>(options, 'options', 'acquire', ['signal', 'memoryBytes']);
      const signal = validateSignal(o.signal, 'options.signal');
      this.#check('acquire');
      if (signal?.aborted) return Promise.reject(signal.reason);
      const lease = this.#tryEach(o.memoryBytes === undefined ? undefined : { memoryBytes: o.memoryBytes });
      if (lease !== undefined) return Promise.resolve(lease);
      const member = this.#members[this.#turn]!;
      this.#turn = (this.#turn + 1) % this.#members.length;
      return member.acquire(options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async run<R>(fn: (stream: S) => R, options?: RunOptions): Promise<Awaited<R>> {
    validateFunction(fn, 'fn');
    const lease = (options === undefined ? this.tryAcquire() : undefined) ?? (await this.acquire(options));
    try {
      return await this.#scope(lease.stream, fn);
    } finally {
      lease.release();
    }
  }

  stats(): T[] {
    this.#check('stats');
    return this.#members.map((member) => member.stats());
  }

  get destroyed(): boolean {
    return this.#detached;
  }

  destroy(): void {
    this.#detached = true;
  }
}
