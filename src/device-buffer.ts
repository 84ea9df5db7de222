// Device memory allocated in stream order from the device's default memory pool, safe across streams: uses on other
// streams delay the free (Note [buffer uses] in src/native/memory.cc). See DESIGN.md "Rules".
import { native, type Box } from './native.js';
import { Device, resolveDevice } from './device.js';
import { DestroyedError } from './errors.js';
import { waitFor } from './completion.js';
import { currentStream } from './scope.js';
import { Stream, streamBox } from './stream.js';
import { noteCaptured, requireNotCapturing } from './capture.js';
import { asKernelPointer, type KernelPointer } from './kernel-argument.js';
import { invalidType, invalidValue, validateInteger, validateOptions } from './validate.js';

/** Options for {@link DeviceBuffer.alloc}. */
export interface DeviceBufferAllocOptions {
  /** The stream the allocation is ordered on, and the stream `free()` uses by default. Work on other streams must
   * wait for it (`other.waitStream(stream)`) before touching the memory.
   * @defaultValue {@link currentStream}(options.device) */
  stream?: Stream;
  /** The device, as a `Device` or an ordinal; must be the stream's device when both are given.
   * @defaultValue the stream's device, else 0 */
  device?: Device | number;
}

/** Options for {@link DeviceBuffer.free}. */
export interface DeviceBufferFreeOptions {
  /** The stream the free is ordered on. @defaultValue the buffer's allocation stream (`buffer.stream`) */
  stream?: Stream;
}

/** Options for {@link DeviceBuffer.attach}. */
export interface DeviceBufferAttachOptions {
  /** The view's `stream`: informational for a borrowed view, which never frees.
   * @defaultValue {@link currentStream}(the buffer's device) */
  stream?: Stream;
}

const SHARED_KIND = 'cuda-stream-pool.DeviceBuffer';

/** A structured-cloneable handle to a {@link DeviceBuffer}, from `buffer.share()`, for
 * {@link DeviceBuffer.attach} in another thread. Holds no memory: it names the buffer while its owner keeps it. */
export interface SharedDeviceBuffer {
  readonly kind: typeof SHARED_KIND;
  /** A process-unique id; never an address. */
  readonly id: bigint;
  readonly byteLength: number;
  readonly ptr: bigint;
  /** The device ordinal. */
  readonly device: number;
}

const PER_THREAD = 2n; // CU_STREAM_PER_THREAD

// Kernel arguments and recordStream() of borrowed views on this thread's per-thread stream: their events are recorded
// by this thread after the launch that follows (Note [buffer uses]), batched into one microtask.
const settling: Array<[Box, Box]> = [];

function settle(): void {
  for (const [buffer, stream] of settling.splice(0)) {
    try {
      native.deviceBufferUse(buffer, stream, true, 'launch');
    } catch {
      // Freed or destroyed meanwhile: there is nothing left to order.
    }
  }
}

let boxOf: (buffer: DeviceBuffer, method: string) => Box;

/** Device memory, allocated in stream order (`cuMemAllocFromPoolAsync`) from the device's default memory pool
 * ({@link Device.memoryPool}). Its contents start undefined.
 *
 * Safe across streams: a use on a stream other than the allocation stream (a copy or fill through this library, a
 * kernel argument, or {@link DeviceBuffer.recordStream}) delays the free until the work that stream had queued before
 * the free is done: the free's stream waits on an event of each such stream. Nothing is keyed by raw stream handles.
 * A raw `buffer.ptr` passed elsewhere is not tracked: announce such uses with `recordStream(stream)`.
 *
 * Lifetime: owned. `free({ stream })`, `[Symbol.dispose]` or `[Symbol.asyncDispose]` free it in stream order; a
 * native finalizer frees a forgotten buffer the same way. A free never uses a destroyed stream: when the allocation
 * stream is gone, the free is ordered after that stream's last work on a stream the library owns. After free every
 * method throws {@link DestroyedError}. A borrowed view ({@link DeviceBuffer.attach}) never frees the memory.
 *
 * Thread-safety: use it on the thread that allocated it; `share()` hands other threads a borrowed view.
 *
 * @example
 * ```ts
 * const stream = Stream.create();
 * using buffer = DeviceBuffer.alloc(4 * n, { stream });
 * stream.copy(buffer, input);
 * kernel.launch({ grid, block, stream }, buffer, n);
 * stream.copy(output, buffer);
 * await stream.synchronize();
 * ```
 */
export class DeviceBuffer implements KernelPointer {
  #box: Box;
  #stream: Stream;
  #borrowed: boolean;
  #freed: string | undefined;
  /** The size in bytes. */
  readonly byteLength: number;
  /** The device address (`CUdeviceptr`) as a bigint; valid until the memory is freed. */
  readonly ptr: bigint;
  /** The device that holds the memory. */
  readonly device: Device;

  private constructor(box: Box, byteLength: number, ptr: bigint, device: Device, stream: Stream, borrowed: boolean) {
    this.#box = box;
    this.#stream = stream;
    this.#borrowed = borrowed;
    this.byteLength = byteLength;
    this.ptr = ptr;
    this.device = device;
  }

  static {
    boxOf = (buffer, method) => buffer.#use(method);
  }

  #use(method: string): Box {
    if (this.#freed !== undefined) throw new DestroyedError('DeviceBuffer', method, this.#freed);
    return this.#box;
  }

  #sameDevice(stream: Stream, name: string): void {
    if (stream.device !== this.device)
      throw invalidValue(name, `is on device ${stream.device.ordinal}, but the buffer is on device ${this.device.ordinal}.`);
  }

  #noteUse(stream: Stream, method: string): void {
    const streamHandle = streamBox(stream, method);
    native.deviceBufferUse(this.#box, streamHandle, false, method);
    if (this.#borrowed && stream.handle === PER_THREAD) {
      if (settling.length === 0) queueMicrotask(settle);
      settling.push([this.#box, streamHandle]);
    }
  }

  /** Allocates `byteLength` bytes of device memory in stream order on `options.stream` (default:
   * `currentStream(device)`): other streams must wait on that stream before touching the memory.
   * @param byteLength - size in bytes, an integer from 1 to `Number.MAX_SAFE_INTEGER`.
   * @throws `RangeError` ERR_OUT_OF_RANGE for a bad `byteLength`; `TypeError` ERR_INVALID_ARG_TYPE /
   * ERR_INVALID_ARG_VALUE for bad options, unknown keys, or a stream of another device than `options.device`;
   * {@link DestroyedError} for a destroyed stream; {@link CaptureError} while the stream is capturing a graph (a graph
   * owns no memory: allocate before the capture); {@link CudaUnavailableError} without a GPU; {@link CudaError}
   * `CUDA_ERROR_OUT_OF_MEMORY` naming the bytes asked for (later allocations still work).
   * Wraps: cuMemAllocFromPoolAsync on the device's default pool (cuDeviceGetDefaultMemPool).
   * Thread-safety: any thread or worker. Lifetime: owned; free with `free({ stream })` or `using`. */
  static alloc(byteLength: number, options?: DeviceBufferAllocOptions): DeviceBuffer {
    validateInteger(byteLength, 'byteLength', 1, Number.MAX_SAFE_INTEGER);
    const o = validateOptions<DeviceBufferAllocOptions>(options, 'options', 'DeviceBuffer.alloc', ['stream', 'device']);
    let stream: Stream;
    if (o.stream !== undefined) {
      if (!(o.stream instanceof Stream)) throw invalidType('options.stream', 'a Stream', o.stream);
      stream = o.stream;
      if (o.device !== undefined) {
        const device = resolveDevice(o.device);
        if (device !== stream.device)
          throw invalidValue('options.stream', `is on device ${stream.device.ordinal}, but "options.device" is device ${device.ordinal}.`);
      }
    } else {
      stream = currentStream(o.device === undefined ? undefined : resolveDevice(o.device));
    }
    const streamHandle = streamBox(stream, 'alloc');
    requireNotCapturing(streamHandle, stream.id, 'DeviceBuffer.alloc()');
    const { box, ptr } = native.deviceBufferAlloc(streamHandle, byteLength);
    return new DeviceBuffer(box, byteLength, ptr, stream.device, stream, false);
  }

  /** A borrowed view, in this thread, of the buffer that `shared` (from `buffer.share()` in any thread) names. Its
   * uses on streams of this thread delay the owner's free like the owner's own; it never frees the memory (its
   * `free()` only retires the view). Order its work after the owner's writes yourself (for example the owner awaits
   * its stream before posting `shared`).
   * @throws `TypeError` ERR_INVALID_ARG_TYPE when `shared` is not from `share()`; {@link DestroyedError} when the
   * owner already freed the buffer (or forgot it and its finalizer ran).
   * Thread-safety: any thread or worker. Lifetime: borrowed; the owner must outlive the view's work. */
  static attach(shared: SharedDeviceBuffer, options?: DeviceBufferAttachOptions): DeviceBuffer {
    if (typeof shared !== 'object' || shared === null || shared.kind !== SHARED_KIND || typeof shared.id !== 'bigint')
      throw invalidType('shared', 'a SharedDeviceBuffer from buffer.share()', shared);
    const o = validateOptions<DeviceBufferAttachOptions>(options, 'options', 'DeviceBuffer.attach', ['stream']);
    if (o.stream !== undefined && !(o.stream instanceof Stream)) throw invalidType('options.stream', 'a Stream', o.stream);
    const { box, ptr, bytes, device: ordinal } = native.deviceBufferAttach(shared.id);
    const device = Device.get(ordinal);
    const stream = o.stream ?? currentStream(device);
    if (stream.device !== device)
      throw invalidValue('options.stream', `is on device ${stream.device.ordinal}, but the buffer is on device ${ordinal}.`);
    return new DeviceBuffer(box, bytes, ptr, device, stream, true);
  }

  /** The stream `free()` uses by default: the allocation stream (a borrowed view: its attach stream). */
  get stream(): Stream {
    return this.#stream;
  }

  /** True after `free()` (or, for a borrowed view, after its `free()`). */
  get freed(): boolean {
    return this.#freed !== undefined;
  }

  /** True for a view from {@link DeviceBuffer.attach}, which never frees the memory. */
  get borrowed(): boolean {
    return this.#borrowed;
  }

  /** Announces that work on `stream` uses the memory (for example a kernel given `buffer.ptr` as a bigint, or another
   * library's work): the free then waits for everything `stream` had queued before the free. Returns at once; copies,
   * fills and `DeviceBuffer` kernel arguments do this themselves.
   * @throws `TypeError` for a non-Stream or a stream of another device; {@link DestroyedError} after free.
   * Follows: PyTorch `Tensor.record_stream`. */
  recordStream(stream: Stream): void {
    if (!(stream instanceof Stream)) throw invalidType('stream', 'a Stream', stream);
    this.#use('recordStream');
    this.#sameDevice(stream, 'stream');
    this.#noteUse(stream, 'recordStream');
  }

  /** The pointer for a 'ptr' kernel argument; records the use on `stream`. @internal */
  [asKernelPointer](stream: Stream): bigint {
    this.#use('launch');
    this.#sameDevice(stream, 'options.stream');
    this.#noteUse(stream, 'launch');
    noteCaptured(streamBox(stream, 'launch'), this);
    return this.ptr;
  }

  /** Frees the memory in stream order on `options.stream` (default: `buffer.stream`) and returns at once: the memory
   * is reused only after the work queued so far on that stream and on every other stream that used the buffer. When
   * the allocation stream was destroyed (and no stream is given) the free is ordered after its last work on a stream
   * the library owns. A borrowed view only retires itself. Idempotent; never throws after a device fault.
   * @throws `TypeError` for bad options or a stream of another device; {@link DestroyedError} for a destroyed
   * `options.stream`; {@link CaptureError} while the free's stream is capturing a graph (the buffer stays usable);
   * {@link CudaError} when the driver refuses. A live Graph or GraphExec that uses the buffer does not stop the free:
   * its launches queued so far finish first, and later launches throw {@link DestroyedError}.
   * Wraps: cuEventRecord, cuStreamWaitEvent, cuMemFreeAsync. Thread-safety: the owning thread. */
  free(options?: DeviceBufferFreeOptions): void {
    const o = validateOptions<DeviceBufferFreeOptions>(options, 'options', 'DeviceBuffer.free', ['stream']);
    if (o.stream !== undefined) {
      if (!(o.stream instanceof Stream)) throw invalidType('options.stream', 'a Stream', o.stream);
      this.#sameDevice(o.stream, 'options.stream');
    }
    if (this.#freed !== undefined) return;
    if (this.#borrowed) {
      this.#freed = 'was freed (this borrowed view only: the owner frees the memory)';
      return;
    }
    const target = o.stream === undefined ? undefined : streamBox(o.stream, 'free');
    const freeStream = o.stream ?? this.#stream;
    if (!freeStream.destroyed) requireNotCapturing(streamBox(freeStream, 'free'), freeStream.id, 'DeviceBuffer.free()');
    this.#freed = 'was freed';
    native.deviceBufferFree(this.#box, target, false);
  }

  /** Same as `free()`. */
  [Symbol.dispose](): void {
    this.free();
  }

  /** Frees as `free()` does, then resolves once the free's stream has reached the free (so the memory is back in
   * the pool), without blocking the event loop. Rejects with {@link CudaError} when that work failed. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#freed !== undefined) return;
    if (this.#borrowed) return this.free();
    if (!this.#stream.destroyed) requireNotCapturing(streamBox(this.#stream, 'free'), this.#stream.id, 'DeviceBuffer.free()');
    this.#freed = 'was freed';
    const marker = native.deviceBufferFree(this.#box, undefined, true);
    if (!marker) return;
    await waitFor('event', marker, 'cuMemFreeAsync', () => `device ${this.device.ordinal}, freeing ${this.byteLength} bytes`);
  }

  /** A structured-cloneable handle for another thread's {@link DeviceBuffer.attach}; creates nothing. The buffer is
   * still freed by this owner: a view attached after the free throws {@link DestroyedError}.
   * @throws {@link DestroyedError} after free. */
  share(): SharedDeviceBuffer {
    const id = native.deviceBufferShare(this.#use('share'));
    return { kind: SHARED_KIND, id, byteLength: this.byteLength, ptr: this.ptr, device: this.device.ordinal };
  }
}

/** The native box of a live buffer, for the copy functions. @throws {@link DestroyedError} after free. @internal */
export function deviceBufferBox(buffer: DeviceBuffer, method: string): Box {
  return boxOf(buffer, method);
}
