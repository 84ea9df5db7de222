// Pinned (page-locked) host memory from the library's pinned-block cache, seen from JS as an external ArrayBuffer.
// Pinned memory is recycled, never freed while the GPU works: see Note [pinned cache] in memory/pinned-buffer.cc.
import { native, type NativeRef } from '../binding/binding.js';
import { adopt } from '../binding/native-ref-lifetime.js';
import { driverState } from '../binding/cuda.js';
import { DestroyedError } from '../binding/errors.js';
import { privateState, register } from '../internal/handles.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, invalidValue, outOfRange, validateInteger } from '../internal/validate.js';

/** The largest PinnedBuffer: 2**32 - 1 bytes, the largest typed array Node 20 can make. */
const MAX_PINNED_BYTES = 2 ** 32 - 1;

/** A constructor {@link PinnedBuffer.view} accepts: a TypedArray class (or subclass) or `DataView`. */
export interface PinnedViewConstructor<T extends ArrayBufferView> {
  new (buffer: ArrayBuffer, byteOffset: number, length: number): T;
  /** Bytes per element (4 for `Float32Array`): `byteOffset` must be a multiple of it, and `length` counts
   * elements of this size. Absent on `DataView`, which counts single bytes. */
  readonly BYTES_PER_ELEMENT?: number;
  /** The class's name (`'Float32Array'`), which error messages quote. */
  readonly name: string;
}

/** The library's pinned cache, for diagnostics ({@link PinnedBuffer.cacheInfo}). */
export interface PinnedCacheInfo {
  /** Bytes of pinned blocks that are idle: no buffer, no staged copy, no queued copy uses them. */
  idleBytes: number;
  /** Bytes of every pinned block the cache holds (idle, in use, or waiting for queued copies), process-wide. */
  totalBytes: number;
  /** The staging of copies between pageable JS memory and device buffers: reusable pinned chunks of 256 KiB per
   * device, bounded by `capBytes` (`CUDA_STREAM_POOL_STAGING_BYTES`, default 64 MiB, rounded down to whole chunks);
   * copies larger than what is free stream through the chunks as they come free. */
  staging: {
    /** The most staging one device may hold, in bytes. */
    capBytes: number;
    /** Staging allocated so far on every device, in bytes (kept until the process exits). */
    allocatedBytes: number;
    /** The most staging in use at once on one device since the process started, in bytes. */
    highWaterBytes: number;
    /** The native threads that share the memcpy of large staged copies with the calling thread (`csp-copy`), running
     * now: 0 until the first copy of at least 1 MiB, then `CUDA_STREAM_POOL_COPY_THREADS` (default: the machine's
     * hardware threads less one, at most 7), fewer if some could not start. */
    copyThreads: number;
    /** Bytes of staging the copy threads have evicted from the CPU caches after device-to-host copies from 1 MiB to
     * 8 MiB that fit in free staging chunks landed (not those streamed through the chunks or sent through a pinned block), so that the copy engine's next write into them is not slowed by cores holding the lines
     * (`clflushopt`; x86-64 only, 0 elsewhere and without copy threads). Counted once done, process-wide. */
    evictedBytes: number;
  };
}

/** A `Ctor` view of `memory` (host memory of a PinnedBuffer or ManagedBuffer) from `byteOffset`, `length` elements
 * (default: the rest): the checks and errors `view()` documents. `requireAlive` runs after the type check and throws
 * DestroyedError once the memory was freed. @internal */
export function hostView<T extends ArrayBufferView>(memory: ArrayBuffer, Ctor: PinnedViewConstructor<T>, byteOffset: number, length: number | undefined, requireAlive: () => void): T {
  const isView = typeof Ctor === 'function' && (Ctor === (DataView as unknown) || Ctor.prototype instanceof TypedArray);
  if (!isView) throw invalidType('Ctor', 'a TypedArray constructor (such as Float32Array) or DataView', Ctor);
  requireAlive();
  const byteLength = memory.byteLength;
  const size = Ctor === (DataView as unknown) ? 1 : Ctor.BYTES_PER_ELEMENT ?? 1;
  validateInteger(byteOffset, 'byteOffset', 0, byteLength);
  if (byteOffset % size !== 0)
    throw outOfRange('byteOffset', `a multiple of ${size} (${Ctor.name}.BYTES_PER_ELEMENT) from 0 to ${byteLength}`, byteOffset);
  const fits = Math.floor((byteLength - byteOffset) / size);
  const count = length === undefined ? fits : validateInteger(length, 'length', 0, fits);
  return new Ctor(memory, byteOffset, count);
}

/** What copies need to know about a pinned ArrayBuffer, whoever holds it (the wrapper or only views). */
interface PinnedRecord {
  ref: NativeRef;
  freed: boolean;
  /** The memory is the caller's, page-locked by a HostRegistration: a detached buffer is refused, not freed. */
  registered?: true;
}

// Per thread: the ArrayBuffers of this thread's PinnedBuffers and HostRegistrations, so a view into one is copied
// directly.
const records = new WeakMap<ArrayBufferLike, PinnedRecord>();
const TypedArray = Object.getPrototypeOf(Uint8Array) as abstract new (...args: never[]) => ArrayBufferView;

/** The pinned record behind a PinnedBuffer, the brand check (true only for an object the class made; it runs no
 * Proxy trap), and its size without the public getter's receiver check, for stream/copy.ts. @internal */
export const pinnedBuffers = privateState<{ is(value: unknown): value is PinnedBuffer; record(pinned: PinnedBuffer): PinnedRecord; byteLength(pinned: PinnedBuffer): number }>('PinnedBuffer', ['is', 'record', 'byteLength'], {
  is: (_value: unknown): _value is PinnedBuffer => false,
});

/** Pinned (page-locked) host memory: copies between it and the device run asynchronously at full speed, and any
 * view into it (`bytes`, `view()`, or a typed array over `bytes.buffer`) is copied directly, without staging.
 * Its contents start undefined (the memory is recycled).
 *
 * Lifetime: the memory belongs to the external ArrayBuffer behind `bytes`, so views outlive this wrapper. `free()`
 * returns at once and detaches every view (a detached view reads as length 0, never a crash); the memory goes back
 * to the library's pinned cache once no queued copy uses it. When forgotten, the ArrayBuffer's finalizer does the
 * same once the last view is gone. The pinned memory itself is released to the system only by
 * {@link PinnedBuffer.trimCache} (or at exit), because cuMemFreeHost waits for unrelated GPU work.
 *
 * Thread-safety: use it on the thread that allocated it (an ArrayBuffer belongs to one thread).
 *
 * @example
 * ```ts
 * using input = PinnedBuffer.alloc(4 * n);
 * input.view(Float32Array).set(values);
 * stream.copy(deviceBuffer, input);
 * ```
 */
export class PinnedBuffer {
  #record: PinnedRecord;
  #buffer: ArrayBuffer;
  #bytes: Uint8Array;
  // A getter over a private field: pinned buffers are made per task, and a non-writable property on each one cost
  // more than taking a block from the cache.
  readonly #byteLength: number;
  /** The size in bytes, as allocated (unchanged by `free()`). */
  get byteLength(): number {
    return this.#byteLength;
  }

  private constructor(token: symbol, ref: NativeRef, buffer: ArrayBuffer) {
    checkConstruction(token, 'PinnedBuffer', 'PinnedBuffer.alloc()');
    adopt(buffer, ref); // copies find the ref through the ArrayBuffer, which may outlive this wrapper
    this.#record = { ref, freed: false };
    this.#buffer = buffer;
    this.#bytes = new Uint8Array(buffer);
    this.#byteLength = buffer.byteLength;
    records.set(buffer, this.#record);
  }

  static {
    guardReceivers(PinnedBuffer, (value) => #record in value);
    register(pinnedBuffers, {
      is: (value: unknown): value is PinnedBuffer => typeof value === 'object' && value !== null && #record in value,
      record: (pinned) => pinned.#record,
      byteLength: (pinned) => pinned.#byteLength,
    });
  }

  /** Takes `byteLength` bytes of pinned host memory from the library's cache; allocates new pinned memory
   * (cuMemHostAlloc, slow: about 47 ms for 64 MiB on an H200) only when no idle block fits.
   * @param byteLength - an integer from 1 to 2**32 - 1 (the largest typed array Node 20 can make).
   * @throws `RangeError` ERR_OUT_OF_RANGE for a bad size; `TypeError` ERR_INVALID_ARG_VALUE for a second argument; {@link CudaUnavailableError} without a GPU;
   * {@link CudaError} CUDA_ERROR_OUT_OF_MEMORY when the system cannot pin that much.
   * Wraps: cuMemHostAlloc (CU_MEMHOSTALLOC_PORTABLE: usable with every device). Thread-safety: any thread.
   * Lifetime: owned; `free()` or `using`; the ArrayBuffer's finalizer returns forgotten memory to the cache. */
  static alloc(byteLength: number, ...rest: never[]): PinnedBuffer {
    validateInteger(byteLength, 'byteLength', 1, MAX_PINNED_BYTES);
    // It takes no options: one given (a device, as ManagedBuffer.alloc takes) is refused, not silently ignored.
    if (rest.length > 0 && rest[0] !== undefined)
      throw invalidValue('options', 'is not taken: PinnedBuffer.alloc() has only byteLength (pinned blocks are portable: usable with every device).');
    const { ref, buffer } = native.pinnedAlloc(byteLength);
    return new PinnedBuffer(internalConstruction, ref, buffer);
  }

  /** Releases every idle block of the library's pinned cache to the system (cuMemFreeHost) and returns the bytes
   * released; blocks in use or still under queued copies stay. cuMemFreeHost waits for GPU work, even on unrelated
   * streams, and stalls other threads' CUDA calls meanwhile: call it when the GPU is idle (after a burst, at
   * shutdown). Returns 0 without a GPU. Thread-safety: any thread; the cache is process-wide. */
  static trimCache(): number {
    if (!driverState().available) return 0;
    return native.pinnedTrimCache();
  }

  /** The state of the library's process-wide pinned cache (PinnedBuffers) and of the staging of pageable copies. */
  static cacheInfo(): PinnedCacheInfo {
    return { ...native.pinnedCacheInfo(), staging: native.stagingInfo() };
  }

  /** All the bytes, as one Uint8Array (the same object on each read); length 0 after `free()`. */
  get bytes(): Uint8Array {
    return this.#bytes;
  }

  /** True after `free()`. */
  get freed(): boolean {
    return this.#record.freed;
  }

  /** A new `Ctor` view of the memory from `byteOffset`, of `length` elements (default: as many as fit). Like every
   * view, it detaches when the buffer is freed.
   * @param Ctor - a TypedArray class (`Float32Array`, `BigUint64Array`, ...) or `DataView`.
   * @param byteOffset - bytes from the start, a multiple of `Ctor.BYTES_PER_ELEMENT`. @defaultValue 0
   * @param length - elements (bytes for `DataView`). @defaultValue the rest of the buffer
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for another `Ctor`; `RangeError` ERR_OUT_OF_RANGE for a range outside
   * the buffer or a misaligned offset; {@link DestroyedError} after `free()`. */
  view<T extends ArrayBufferView>(Ctor: PinnedViewConstructor<T>, byteOffset = 0, length?: number): T {
    return hostView(this.#buffer, Ctor, byteOffset, length, () => {
      if (this.#record.freed) throw new DestroyedError('PinnedBuffer', 'view', 'was freed');
    });
  }

  /** Returns at once: detaches every view of the memory and gives it back to the library's pinned cache, where it
   * is reused only after every copy queued on it is done. Copies already queued still read or write the memory
   * safely. Idempotent. `cuda.liveObjects().pinnedBytes` drops by `byteLength` now.
   * Thread-safety: the owning thread. */
  free(): void {
    if (this.#record.freed) return;
    this.#record.freed = true;
    native.pinnedFree(this.#record.ref, this.#buffer);
  }

  /** Same as `free()`. */
  [Symbol.dispose](): void {
    this.free();
  }
}

/** The pinned record of an ArrayBuffer made by a PinnedBuffer of this thread, or registered by a HostRegistration of
 * this thread, if it is one. @internal */
export function pinnedRecordOf(buffer: ArrayBufferLike): PinnedRecord | undefined {
  return records.get(buffer);
}

/** Makes copies with `memory` (an ArrayBuffer or SharedArrayBuffer the caller owns) pinned copies through `record`,
 * or ordinary ones again when `record` is undefined. For memory/host-registration.ts. @internal */
export function setRegisteredRecord(memory: ArrayBufferLike, record: PinnedRecord | undefined): void {
  if (record) records.set(memory, record);
  else records.delete(memory);
}

export type { PinnedRecord };
