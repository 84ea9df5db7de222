// Managed (unified) memory: one allocation that both the host (as an ArrayBuffer) and the device (by its address)
// use, migrated by the driver on demand or by prefetch. See Note [managed lifetime] in memory/managed-buffer.cc.
import { native, type NativeRef } from '../binding/binding.js';
import { adopt, released } from '../binding/native-ref-lifetime.js';
import { Device, resolveDevice } from '../device/device.js';
import { requireCuda } from '../binding/cuda.js';
import { DestroyedError } from '../binding/errors.js';
import { currentStream } from '../stream/scope.js';
import { Stream, streamRef } from '../stream/stream.js';
import { managedBuffers, register, streams } from '../internal/handles.js';
import { noteCaptured } from '../stream/capture.js';
import { asKernelPointer, type ImplementsKernelPointer } from '../kernel/kernel-argument.js';
import { hostView, type PinnedViewConstructor } from './pinned-buffer.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, invalidValue, lockFields, validateInteger, validateOptions } from '../internal/validate.js';

/** Options for {@link ManagedBuffer.alloc}. */
export interface ManagedBufferAllocOptions {
  /** The device whose context owns the memory, and whose streams may use it. @defaultValue 0 */
  device?: Device | number;
}

/** A hint to the driver about how a range of managed memory is used ({@link ManagedBuffer.advise}), named after
 * CUmem_advise: `'setReadMostly'`/`'unsetReadMostly'` (read-only copies may live on every accessing processor),
 * `'setPreferredLocation'`/`'unsetPreferredLocation'` (where the pages should live), `'setAccessedBy'`/
 * `'unsetAccessedBy'` (keep the pages mapped for that processor). */
export type ManagedAdvice =
  | 'setReadMostly'
  | 'unsetReadMostly'
  | 'setPreferredLocation'
  | 'unsetPreferredLocation'
  | 'setAccessedBy'
  | 'unsetAccessedBy';

// CUmem_advise values.
const ADVICE: Record<ManagedAdvice, number> = {
  setReadMostly: 1,
  unsetReadMostly: 2,
  setPreferredLocation: 3,
  unsetPreferredLocation: 4,
  setAccessedBy: 5,
  unsetAccessedBy: 6,
};

/** Options for {@link ManagedBuffer.advise}. */
export interface ManagedAdviseOptions {
  /** The processor the advice names: a device, or `'cpu'` for the host. Ignored by the read-mostly advice.
   * @defaultValue the buffer's device */
  device?: Device | number | 'cpu';
  /** Where the range starts, in bytes. @defaultValue 0 */
  byteOffset?: number;
  /** Bytes in the range. @defaultValue the rest of the buffer from `byteOffset` */
  byteLength?: number;
}

const CPU = -1; // CU_DEVICE_CPU
const MAX_MANAGED_BYTES = 2 ** 32 - 1; // the largest typed array Node 20 can make

/** Managed (unified) memory, allocated with cuMemAllocManaged: the host reads and writes it through `bytes` or
 * `view()`, kernels through its address (pass the buffer as a `'ptr'` argument), and the driver migrates pages on
 * demand or ahead of time with {@link ManagedBuffer.prefetch}. Copies between it and a `DeviceBuffer` (or another
 * ManagedBuffer) are stream-ordered like any `stream.copy`.
 *
 * Host access is not stream-ordered: read or write the host views only while no queued work uses the memory (after
 * `await stream.synchronize()`). On devices without concurrent managed access
 * (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0) a host access while any kernel runs faults.
 *
 * Lifetime: owned. `free()` or `[Symbol.dispose]` returns at once: the views detach (length 0) and the memory is
 * released (cuMemFree) once all work queued on the device before the free is done, by the device's synchronizer
 * thread; a forgotten buffer is freed the same way. After free every method throws {@link DestroyedError}.
 * Thread-safety: use it on the thread that allocated it. Follows: CuPy `cuda.ManagedMemory`, RMM `managed_memory_resource`.
 *
 * @example
 * ```ts
 * using data = ManagedBuffer.alloc(4 * n);
 * data.view(Float32Array).fill(1);
 * data.prefetch(data.device, stream);
 * scale.launch({ grid, block, stream }, data, 2, n);
 * data.prefetch('cpu', stream);
 * await stream.synchronize();
 * console.log(data.view(Float32Array)[0]); // 2
 * ```
 */
export class ManagedBuffer {
  #ref: NativeRef;
  #buffer: ArrayBuffer;
  #bytes: Uint8Array;
  #freed = false;
  /** The size in bytes. */
  readonly byteLength: number;
  /** The address, the same for the host and every device (unified addressing), as a bigint; valid until free. */
  readonly ptr: bigint;
  /** The device whose context owns the memory. */
  readonly device: Device;

  private constructor(token: symbol, ref: NativeRef, ptr: bigint, buffer: ArrayBuffer, device: Device) {
    checkConstruction(token, 'ManagedBuffer', 'ManagedBuffer.alloc()');
    adopt(this, ref);
    this.#ref = ref;
    this.#buffer = buffer;
    this.#bytes = new Uint8Array(buffer);
    this.byteLength = buffer.byteLength;
    this.ptr = ptr;
    this.device = device;
    lockFields(this, ['byteLength', 'ptr', 'device']);
  }

  static {
    register(managedBuffers, {
      is: (value: unknown): value is ManagedBuffer => typeof value === 'object' && value !== null && #ref in value,
      ref: (buffer, method) => (buffer as ManagedBuffer).#use(method),
    });
    guardReceivers(ManagedBuffer, (value) => #ref in value);
  }

  #use(method: string): NativeRef {
    if (this.#freed) throw new DestroyedError('ManagedBuffer', method, 'was freed');
    return this.#ref;
  }

  /** A non-empty range of the buffer (the driver refuses an empty one with a bare CUDA_ERROR_INVALID_VALUE). */
  #range(byteOffset: unknown, byteLength: unknown): [number, number] {
    const offset = byteOffset === undefined ? 0 : validateInteger(byteOffset, 'options.byteOffset', 0, this.byteLength - 1);
    const length = byteLength === undefined ? this.byteLength - offset : validateInteger(byteLength, 'options.byteLength', 1, this.byteLength - offset);
    return [offset, length];
  }

  /** Allocates `byteLength` bytes of managed memory, attached globally (any stream of the device may use it).
   * Its contents start undefined.
   * @param byteLength - an integer from 1 to 2**32 - 1 (the largest typed array Node 20 can make).
   * @throws `RangeError` ERR_OUT_OF_RANGE for a bad size; {@link CudaUnavailableError} without a GPU;
   * {@link CudaError} CUDA_ERROR_OUT_OF_MEMORY, or CUDA_ERROR_NOT_SUPPORTED on a device without managed memory.
   * Wraps: cuMemAllocManaged (CU_MEM_ATTACH_GLOBAL). Thread-safety: any thread or worker. Lifetime: owned. */
  static alloc(byteLength: number, options?: ManagedBufferAllocOptions): ManagedBuffer {
    validateInteger(byteLength, 'byteLength', 1, MAX_MANAGED_BYTES);
    const o = validateOptions<ManagedBufferAllocOptions>(options, 'options', 'ManagedBuffer.alloc', ['device']);
    requireCuda();
    const device = resolveDevice(o.device);
    const { ref, ptr, buffer } = native.managedAlloc(device.ordinal, byteLength);
    return new ManagedBuffer(internalConstruction, ref, ptr, buffer, device);
  }

  /** All the bytes, as one Uint8Array over the managed memory (the same object on each read); length 0 after free. */
  get bytes(): Uint8Array {
    return this.#bytes;
  }

  /** True after `free()`. */
  get freed(): boolean {
    return this.#freed;
  }

  /** A new `Ctor` view of the memory from `byteOffset`, of `length` elements (default: as many as fit). Like every
   * view, it detaches when the buffer is freed.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for another `Ctor`; `RangeError` ERR_OUT_OF_RANGE for a range outside
   * the buffer or a misaligned offset; {@link DestroyedError} after `free()`. */
  view<T extends ArrayBufferView>(Ctor: PinnedViewConstructor<T>, byteOffset = 0, length?: number): T {
    return hostView(this.#buffer, Ctor, byteOffset, length, () => this.#use('view'));
  }

  /** Queues on `stream` a migration of the whole buffer to `target` (a device, or `'cpu'` for host memory) and
   * returns at once; later work on the stream finds the pages there instead of faulting them in.
   * @param target - a `Device`, a device ordinal, or `'cpu'`.
   * @param stream - must be on the buffer's device. @defaultValue {@link currentStream}(the buffer's device)
   * @throws `TypeError` ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE for a bad target or stream; {@link DestroyedError}
   * after free or for a destroyed stream; {@link CudaError} CUDA_ERROR_INVALID_DEVICE for a device target without
   * concurrent managed access (with deferred submission the prefetch is recorded, and the driver's refusal rejects
   * the stream's next wait instead).
   * Wraps: cuMemPrefetchAsync (the CUDA 12.0 entry point: a CUdevice target, CU_DEVICE_CPU for the host). */
  prefetch(target: Device | number | 'cpu', stream?: Stream): void {
    const to = target === 'cpu' ? CPU : resolveDevice(target as Device | number, 'target').ordinal;
    if (stream !== undefined && !streams.is(stream)) throw invalidType('stream', 'a Stream', stream);
    const ref = this.#use('prefetch');
    const on = stream ?? currentStream(this.device);
    this.#sameDevice(on, 'stream');
    native.managedPrefetch(ref, 0, this.byteLength, to, streamRef(on, 'buffer.prefetch'));
  }

  /** Tells the driver how a range of the buffer is used (see {@link ManagedAdvice}); takes effect at once, not in
   * stream order.
   * @throws `TypeError` ERR_INVALID_ARG_VALUE for an unknown advice; `RangeError` ERR_OUT_OF_RANGE for a range outside
   * the buffer or an empty one; {@link DestroyedError} after free; {@link CudaError} when the driver refuses (for example
   * CUDA_ERROR_INVALID_DEVICE for a device without concurrent managed access).
   * Wraps: cuMemAdvise (the CUDA 12.0 entry point: a CUdevice, CU_DEVICE_CPU for the host). */
  advise(advice: ManagedAdvice, options?: ManagedAdviseOptions): void {
    if (typeof advice !== 'string' || !Object.hasOwn(ADVICE, advice))
      throw invalidValue('advice', `must be one of ${Object.keys(ADVICE).map((a) => `'${a}'`).join(', ')}; received ${typeof advice === 'string' ? JSON.stringify(advice) : String(advice)}.`);
    const o = validateOptions<ManagedAdviseOptions>(options, 'options', 'advise', ['device', 'byteOffset', 'byteLength']);
    const device = o.device === 'cpu' ? CPU : o.device === undefined ? this.device.ordinal : resolveDevice(o.device).ordinal;
    const [offset, length] = this.#range(o.byteOffset, o.byteLength);
    native.managedAdvise(this.#use('advise'), offset, length, ADVICE[advice], device);
  }

  #sameDevice(stream: Stream, name: string): void {
    if (stream.device !== this.device)
      throw invalidValue(name, `is on device ${stream.device.ordinal}, but the ManagedBuffer belongs to device ${this.device.ordinal}.`);
  }

  /** The pointer for a 'ptr' kernel argument. @internal */
  [asKernelPointer](stream: Stream): bigint {
    this.#use('kernel.launch');
    this.#sameDevice(stream, 'options.stream');
    noteCaptured(streamRef(stream, 'kernel.launch'), this);
    return this.ptr;
  }

  /** Detaches the views and frees the memory once all work queued on the device so far is done (see the class
   * docs); returns at once. Idempotent; never throws. Wraps: cuMemFree (on the device's synchronizer thread, after
   * cuCtxSynchronize). */
  free(): void {
    if (this.#freed) return;
    this.#freed = true;
    native.managedFree(this.#ref, this.#buffer);
    released(this);
  }

  /** Same as `free()`. */
  [Symbol.dispose](): void {
    this.free();
  }

  /** Frees as `free()` does, then resolves once the memory was released (after the device's queued work), without
   * blocking the event loop. Rejects with {@link CudaError} when the device's work failed. Idempotent. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#freed) return;
    this.free();
    // The free was queued with the device's synchronizer first, so this wait ends after the cuMemFree.
    await this.device.synchronize();
  }
}

/** ManagedBuffer as a 'ptr' kernel argument: fails to compile when the class stops implementing KernelPointer. @internal */
export type ManagedBufferKernelPointer = ImplementsKernelPointer<ManagedBuffer>;
