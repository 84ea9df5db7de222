// Device memory allocated in stream order from the device's default memory pool, safe across streams: uses on other
// streams delay the free (Note [buffer uses] in memory/device-buffer.cc).
import { CU_STREAM_PER_THREAD, facts, factWords, native, type NativeRef } from '../binding/binding.js';
import { adopt, released, releaseRef } from '../binding/native-ref-lifetime.js';
import { Device, resolveDevice } from '../device/device.js';
import { DestroyedError, renameDestroyed, type CaptureError } from '../binding/errors.js';
import { waitFor } from '../stream/completion.js';
import { currentStream } from '../stream/scope.js';
import { Stream, streamRef, streamHandle } from '../stream/stream.js';
import { deviceBuffers, register, streams } from '../internal/handles.js';
import { captureRefusal, noteCaptured } from '../stream/capture.js';
import { asKernelPointer, type ImplementsKernelPointer } from '../kernel/kernel-argument.js';
import { copyOnStream } from '../stream/copy.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidState, invalidType, invalidValue, outOfRange, validateBoolean, validateInteger, validateOptions, validateSignal } from '../internal/validate.js';
import { detachedError, isArrayBufferView, viewBytes } from './host-views.js';
import { checkExporter, ipcHandleHex, ipcRecord } from '../internal/ipc.js';

/** Options for {@link DeviceBuffer.alloc}. */
export interface DeviceBufferAllocOptions {
  /** The stream the allocation is ordered on, and the stream `free()` uses by default. Work on other streams must
   * wait for it (`other.waitStream(stream)`) before touching the memory.
   * @defaultValue {@link currentStream}(options.device) */
  stream?: Stream;
  /** The device, as a `Device` or an ordinal; must be the stream's device when both are given.
   * @defaultValue the stream's device, else 0 */
  device?: Device | number;
  /** Allocate memory that another process can open ({@link DeviceBuffer.exportIpcHandle}): from cuMemAlloc, since
   * the driver cannot export memory of a stream-ordered pool. Such memory is allocated at once, not in stream order,
   * and its free first waits for the work ordered before it (cuStreamSynchronize on the freeing stream), then calls
   * cuMemFree: allocate it once and keep it, as shared memory is used. Not with {@link DeviceBuffer.from}.
   * @defaultValue false */
  exportable?: boolean;
}

/** What {@link DeviceBuffer.exportIpcHandle} returns: a plain record, structured-cloneable and JSON-serializable, that
 * another process of this machine passes to {@link DeviceBuffer.openIpcHandle}. It holds no resource: the exporting
 * process must keep the buffer until every importer has freed its import. */
export interface DeviceBufferIpcHandle {
  /** Always `'cuda-stream-pool:DeviceBufferIpcHandle'`. */
  readonly kind: 'cuda-stream-pool:DeviceBufferIpcHandle';
  /** The driver's IPC memory handle (cuIpcGetMemHandle): 64 bytes as 128 lowercase hexadecimal digits. */
  readonly handle: string;
  /** The buffer's size in bytes. */
  readonly byteLength: number;
  /** The exporting process's id (`process.pid`): an import is refused once it has exited. */
  readonly processId: number;
}

/** Options for {@link DeviceBuffer.openIpcHandle}. */
export interface DeviceBufferOpenIpcOptions {
  /** The stream the import is ordered after for its free, and the stream `free()` uses by default.
   * @defaultValue {@link currentStream}(options.device) */
  stream?: Stream;
  /** The device to open the memory on (the exporter's device; its ordinal in this process may differ).
   * @defaultValue the stream's device, else 0 */
  device?: Device | number;
}

const IPC_KIND = 'cuda-stream-pool:DeviceBufferIpcHandle';

/** Options for {@link DeviceBuffer.from}: as {@link DeviceBufferAllocOptions}; the copy is queued on the same stream. */
export type DeviceBufferFromOptions = Omit<DeviceBufferAllocOptions, 'exportable'>;

/** Options for {@link DeviceBuffer.toArray}. */
export interface ToArrayOptions {
  /** The stream the copy is queued on and awaited; must be on the buffer's device. Work that writes the buffer on
   * other streams must be ordered before it (`stream.waitStream(other)`).
   * @defaultValue {@link currentStream}(the buffer's device) */
  stream?: Stream;
  /** Aborts the wait (not a copy already queued); the promise rejects with `signal.reason`. A signal that has
   * already aborted when `toArray()` is called rejects at once, and nothing is queued. */
  signal?: AbortSignal;
}

/** A typed-array constructor, for {@link DeviceBuffer.toArray}. */
export type TypedArrayConstructor =
  | Int8ArrayConstructor
  | Uint8ArrayConstructor
  | Uint8ClampedArrayConstructor
  | Int16ArrayConstructor
  | Uint16ArrayConstructor
  | Int32ArrayConstructor
  | Uint32ArrayConstructor
  | Float32ArrayConstructor
  | Float64ArrayConstructor
  | BigInt64ArrayConstructor
  | BigUint64ArrayConstructor;

const TypedArray = Object.getPrototypeOf(Int8Array) as Function;

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
  /** Always `'cuda-stream-pool.DeviceBuffer'`: marks the record as a shared DeviceBuffer, which
   * {@link DeviceBuffer.attach} checks. */
  readonly kind: typeof SHARED_KIND;
  /** A process-unique id; never an address. */
  readonly id: bigint;
  /** The buffer's size in bytes, as `buffer.byteLength`. */
  readonly byteLength: number;
  /** The device address (`CUdeviceptr`) as a bigint, as `buffer.ptr`: the same in every thread, which share the
   * device's primary context. */
  readonly ptr: bigint;
  /** The device ordinal. */
  readonly device: number;
}


// Kernel arguments and recordStream() of borrowed views on this thread's per-thread stream: their events are recorded
// by this thread after the launch that follows (Note [buffer uses]), batched into one microtask.
const settling: Array<[NativeRef, NativeRef]> = [];

// What deviceBufferUse notes, which also names the call in its DestroyedError: a kernel launch's argument, a
// recordStream(), or the note after a launch on the per-thread stream, once its work was queued.
const USE_BY_LAUNCH = 0;
const USE_BY_RECORD_STREAM = 1;
const USE_AFTER_LAUNCH = 2;

function settle(): void {
  for (const [buffer, stream] of settling.splice(0)) {
    try {
      native.deviceBufferUse(buffer, stream, USE_AFTER_LAUNCH);
    } catch {
      // Freed or destroyed meanwhile: there is nothing left to order.
    }
  }
}

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
 * using stream = Stream.create();
 * using buffer = DeviceBuffer.from(input, { stream }); // a Float32Array of n values
 * kernel.launch({ grid, block, stream }, buffer, n);
 * const output = await buffer.toArray(Float32Array, { stream });
 * ```
 */
export class DeviceBuffer {
  #ref: NativeRef;
  #stream: Stream;
  #borrowed: boolean;
  #freed: string | undefined;
  #parent: DeviceBuffer | undefined; // the allocation a subarray view belongs to
  #offset = 0; // bytes from the allocation's start (views)
  /** Where the memory came from: the stream-ordered pool, cuMemAlloc for export, or another process's export. */
  #origin: 'pool' | 'exportable' | 'imported' = 'pool';
  // Getters over private fields, not read-only own properties: a buffer is made per allocation, and defining
  // non-writable properties on each one cost more than the allocation's native call.
  readonly #byteLength: number;
  #ptr: bigint | undefined; // read from the ref on first use: most buffers never need it as a bigint
  // The address as a number, for kernel arguments, where the allocation reported it (NaN elsewhere): a launch writes
  // it into its argument slot as two 32-bit words, without the BigInt that reading `ptr` makes. Device addresses
  // are below 2 ** 49; a larger one stays NaN and takes the bigint path.
  #address = NaN;
  readonly #device: Device;
  #pitch: number | undefined;
  #usedOn: WeakSet<Stream> | undefined; // streams whose use of the buffer its kernel launches noted ([asKernelPointer])
  /** Bytes from the start of one row to the next, for a buffer from {@link DeviceBuffer.allocPitched} (a multiple of
   * `device.pitchAlignmentBytes`); `undefined` for others. `stream.copy2D()` takes it as the buffer's default pitch. */
  get pitch(): number | undefined {
    return this.#pitch;
  }
  /** The size in bytes. */
  get byteLength(): number {
    return this.#byteLength;
  }
  /** The device address (`CUdeviceptr`) as a bigint; valid until the memory is freed (still readable after). */
  get ptr(): bigint {
    if (this.#ptr !== undefined) return this.#ptr;
    const address = this.#address;
    return (this.#ptr = address >= 0 ? BigInt(address) : this.#parent ? this.#parent.ptr + BigInt(this.#offset) : native.deviceBufferPointer(this.#ref));
  }
  /** The device that holds the memory. */
  get device(): Device {
    return this.#device;
  }

  private constructor(token: symbol, ref: NativeRef, byteLength: number, ptr: bigint | undefined, device: Device, stream: Stream, borrowed: boolean) {
    checkConstruction(token, 'DeviceBuffer', 'DeviceBuffer.alloc() or DeviceBuffer.attach()');
    this.#ref = ref;
    this.#stream = stream;
    this.#borrowed = borrowed;
    this.#byteLength = byteLength;
    this.#ptr = ptr;
    this.#device = device;
  }

  static {
    guardReceivers(DeviceBuffer, (value) => #ref in value);
    register(deviceBuffers, {
      is: (value: unknown): value is DeviceBuffer => typeof value === 'object' && value !== null && #ref in value,
      ref: (buffer, method) => (buffer as DeviceBuffer).#use(method),
      offset: (buffer) => (buffer as DeviceBuffer).#offset,
      pitch: (buffer) => (buffer as DeviceBuffer).#pitch,
      device: (buffer) => (buffer as DeviceBuffer).#device,
      byteLength: (buffer) => (buffer as DeviceBuffer).#byteLength,
    });
  }

  #use(method: string): NativeRef {
    if (this.#freed !== undefined) throw new DestroyedError('DeviceBuffer', method, this.#freed);
    if (this.#parent?.freed) throw new DestroyedError('DeviceBuffer', method, 'is a view of a buffer that was freed');
    return this.#ref;
  }

  static #allocationStream(o: Partial<DeviceBufferAllocOptions>): Stream {
    const { stream, device: deviceOption } = o; // each read once (a getter could answer differently)
    if (stream === undefined) return currentStream(deviceOption === undefined ? undefined : resolveDevice(deviceOption));
    if (!streams.is(stream)) throw invalidType('options.stream', 'a Stream', stream);
    if (deviceOption !== undefined) {
      const device = resolveDevice(deviceOption);
      if (device !== stream.device)
        throw invalidValue('options.stream', `is on device ${stream.device.ordinal}, but "options.device" is device ${device.ordinal}.`);
    }
    return stream;
  }

  #sameDevice(stream: Stream, name: string): void {
    if (streams.device(stream) !== this.#device)
      throw invalidValue(name, `is on device ${stream.device.ordinal}, but the buffer is on device ${this.device.ordinal}.`);
  }

  #noteUse(stream: Stream, method: 'kernel.launch' | 'buffer.recordStream', ref = streamRef(stream, method)): void {
    native.deviceBufferUse(this.#ref, ref, method === 'kernel.launch' ? USE_BY_LAUNCH : USE_BY_RECORD_STREAM);
    if (this.#borrowed && streamHandle(stream) === CU_STREAM_PER_THREAD) {
      if (settling.length === 0) queueMicrotask(settle);
      settling.push([this.#ref, ref]);
    }
  }

  /** Allocates `byteLength` bytes of device memory in stream order on `options.stream` (default:
   * `currentStream(device)`): other streams must wait on that stream before touching the memory. The memory is on the
   * stream's device: the given stream's, or inside `withStream()` / `pool.run()` / `group.run()` the scoped stream's
   * when `options.device` is not given, else device 0.
   * @param byteLength - size in bytes, an integer from 1 to `Number.MAX_SAFE_INTEGER`.
   * @throws `RangeError` ERR_OUT_OF_RANGE for a bad `byteLength`; `TypeError` ERR_INVALID_ARG_TYPE /
   * ERR_INVALID_ARG_VALUE for bad options, unknown keys, or a stream of another device than `options.device`;
   * {@link DestroyedError} for a destroyed stream; {@link CaptureError} while the stream is capturing a graph (a graph
   * owns no memory: allocate before the capture); {@link CudaUnavailableError} without a GPU; {@link CudaError}
   * `CUDA_ERROR_OUT_OF_MEMORY` naming the bytes asked for (later allocations still work).
   * With `options.exportable`, the memory comes from cuMemAlloc instead, at once, so that another process can open
   * it (see {@link DeviceBuffer.exportIpcHandle}).
   * Wraps: cuMemAllocFromPoolAsync on the device's default pool (cuDeviceGetDefaultMemPool); cuMemAlloc when
   * exportable. Thread-safety: any thread or worker. Lifetime: owned; free with `free({ stream })` or `using`. */
  static alloc(byteLength: number, options?: DeviceBufferAllocOptions): DeviceBuffer {
    validateInteger(byteLength, 'byteLength', 1, Number.MAX_SAFE_INTEGER);
    const o = validateOptions<DeviceBufferAllocOptions>(options, 'options', 'DeviceBuffer.alloc', ['stream', 'device', 'exportable']);
    const exportableOption = o.exportable;
    const exportable = exportableOption === undefined ? false : validateBoolean(exportableOption, 'options.exportable');
    const stream = DeviceBuffer.#allocationStream(o);
    const streamHandle = streamRef(stream, 'DeviceBuffer.alloc');
    let result: NativeRef | -1 | -2;
    try {
      result = native.deviceBufferAlloc(streamHandle, byteLength, exportable);
    } catch (error) {
      throw renameDestroyed(error, 'DeviceBuffer.alloc'); // a stream destroyed by another thread meanwhile
    }
    const refused = DeviceBuffer.#refusal(result);
    if (refused !== 0) throw captureRefusal(refused, stream.id, 'DeviceBuffer.alloc()');
    const ref = result as NativeRef;
    const buffer = new DeviceBuffer(internalConstruction, ref, byteLength, undefined, streams.device(stream), stream, false);
    const high = factWords[1]!; // the address the allocation left in the fact scratch
    if (high < 2 ** 21) buffer.#address = high * 2 ** 32 + factWords[0]!; // below 2 ** 53: exact as a number
    if (exportable) buffer.#origin = 'exportable';
    adopt(buffer, ref);
    return buffer;
  }

  /** Allocates `height` rows of at least `widthBytes` bytes each, in stream order as {@link DeviceBuffer.alloc} does,
   * each row starting at a multiple of the device's pitch alignment: the buffer's {@link DeviceBuffer.pitch} is
   * `widthBytes` rounded up to `device.pitchAlignmentBytes`, and its `byteLength` is `pitch * height`. Row `y` starts
   * at byte `y * pitch`. Use it with {@link Stream.copy2D} and with kernels that take the pitch.
   * @param widthBytes - bytes of each row's data, an integer from 1.
   * @param height - rows, an integer from 1.
   * @throws as {@link DeviceBuffer.alloc}, and `RangeError` ERR_OUT_OF_RANGE for a bad `widthBytes` or `height` or a
   * size past `Number.MAX_SAFE_INTEGER`. Wraps: cuMemAllocFromPoolAsync (cuMemAllocPitch is not stream-ordered),
   * with the pitch from CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT.
   * @example
   * ```ts
   * using image = DeviceBuffer.allocPitched(width * 4, height, { stream }); // rows of `width` floats
   * stream.copy2D(image, pixels, { widthBytes: width * 4, height });
   * ```
   */
  static allocPitched(widthBytes: number, height: number, options?: Omit<DeviceBufferAllocOptions, 'exportable'>): DeviceBuffer {
    validateInteger(widthBytes, 'widthBytes', 1, Number.MAX_SAFE_INTEGER);
    validateInteger(height, 'height', 1, Number.MAX_SAFE_INTEGER);
    const o = validateOptions<DeviceBufferAllocOptions>(options, 'options', 'DeviceBuffer.allocPitched', ['stream', 'device']);
    const device = o.stream !== undefined && streams.is(o.stream) ? o.stream.device : resolveDevice(o.device);
    const alignment = Math.max(1, device.pitchAlignmentBytes);
    const pitch = Math.ceil(widthBytes / alignment) * alignment;
    if (pitch * height > Number.MAX_SAFE_INTEGER)
      throw outOfRange('height', `at most ${Math.floor(Number.MAX_SAFE_INTEGER / pitch)} rows of ${pitch} bytes`, height);
    const buffer = DeviceBuffer.alloc(pitch * height, o);
    buffer.#pitch = pitch;
    return buffer;
  }

  /** A record that another process of this machine passes to {@link DeviceBuffer.openIpcHandle} to use this buffer's
   * memory: the driver's IPC memory handle, the size and this process's id. Plain data: send it any way (a message,
   * a job's payload, a file). The memory is shared, not copied: order writes and reads across the processes with an
   * interprocess event ({@link Event.exportIpcHandle}). Keep this buffer until every importer has freed its import:
   * the driver leaves the importer's mapping of freed memory undefined, and no process is told.
   * @throws `TypeError` ERR_INVALID_STATE when the buffer was not allocated with `{ exportable: true }`, is a view
   * (`subarray`; the handle names a whole allocation), borrowed or imported; {@link DestroyedError} after `free()`;
   * {@link CudaError} when the driver refuses. Wraps: cuIpcGetMemHandle. Thread-safety: the buffer's thread. */
  exportIpcHandle(): DeviceBufferIpcHandle {
    const ref = this.#use('exportIpcHandle');
    if (this.#origin !== 'exportable' || this.#parent !== undefined || this.#borrowed)
      throw invalidState(
        `exportIpcHandle() needs a buffer allocated with DeviceBuffer.alloc(byteLength, { exportable: true }); this one is ${this.#parent ? 'a view (subarray) of a buffer' : this.#borrowed ? 'borrowed from another thread' : this.#origin === 'imported' ? 'imported from another process' : 'from the stream-ordered pool, which the driver cannot export'}.`,
      );
    const bytes = native.deviceBufferExportIpc(ref);
    return Object.freeze({ kind: IPC_KIND, handle: ipcHandleHex(bytes), byteLength: this.#byteLength, processId: process.pid });
  }

  /** Opens, in this process, the memory of a buffer that another process exported with
   * {@link DeviceBuffer.exportIpcHandle}: a DeviceBuffer over the same device memory (no copy), usable as any other
   * (copies, fills, kernel arguments, views, `share()` to workers). Its `free()` closes the import once the work
   * ordered before it is done (cuStreamSynchronize, then cuIpcCloseMemHandle); the exporter's memory stays.
   * @param handle - the record `exportIpcHandle()` returned, unchanged (or parsed back from its JSON).
   * @throws `TypeError` ERR_INVALID_ARG_TYPE when `handle` is not such a record or a field has the wrong type;
   * ERR_INVALID_ARG_VALUE when `handle.handle` is not 128 hexadecimal digits or names this process (the driver
   * opens only another process's handles: use the buffer itself, or `share()` for workers); `RangeError`
   * ERR_OUT_OF_RANGE for a bad `byteLength` or `processId`, or when the allocation holds fewer bytes than
   * `byteLength`; {@link DestroyedError} when the exporting process has exited; {@link CudaError} when the driver
   * refuses (a freed export, an altered handle: CUDA_ERROR_INVALID_VALUE and the like); as
   * {@link DeviceBuffer.alloc} for the options. Wraps: cuIpcOpenMemHandle (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
   * cuMemGetAddressRange. Thread-safety: any thread. Lifetime: owned; free it before the exporter frees its buffer. */
  static openIpcHandle(handle: DeviceBufferIpcHandle, options?: DeviceBufferOpenIpcOptions): DeviceBuffer {
    const { record, bytes } = ipcRecord<DeviceBufferIpcHandle>(handle, IPC_KIND, 'a DeviceBufferIpcHandle from buffer.exportIpcHandle()');
    const { byteLength, processId } = record;
    validateInteger(byteLength, 'handle.byteLength', 1, Number.MAX_SAFE_INTEGER);
    checkExporter(processId, 'DeviceBuffer', 'openIpcHandle');
    const o = validateOptions<DeviceBufferOpenIpcOptions>(options, 'options', 'DeviceBuffer.openIpcHandle', ['stream', 'device']);
    const stream = DeviceBuffer.#allocationStream(o);
    const streamHandle = streamRef(stream, 'DeviceBuffer.openIpcHandle');
    let ref: NativeRef;
    try {
      ref = native.deviceBufferOpenIpc(streamHandle, bytes, byteLength!);
    } catch (error) {
      if (error instanceof RangeError) throw outOfRange('handle.byteLength', 'at most the size of the exported allocation', byteLength, error.message);
      throw renameDestroyed(error, 'DeviceBuffer.openIpcHandle');
    }
    const buffer = new DeviceBuffer(internalConstruction, ref, byteLength!, undefined, stream.device, stream, false);
    buffer.#origin = 'imported';
    adopt(buffer, ref);
    return buffer;
  }

  /** Allocates a buffer of `source.byteLength` bytes on `options.stream` (default: `currentStream(device)`) and
   * queues the copy of `source` into it on the same stream; returns at once. The source is read now (through the
   * library's pinned staging, or directly from a `PinnedBuffer` view), so it may change afterwards. Work on other
   * streams must wait for that stream before using the buffer.
   * @param source - any TypedArray, DataView or Buffer of 1 byte or more, read through the intrinsic getters (a
   * `buffer`, `byteOffset` or `byteLength` property shadowed on the view is not consulted).
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for another source; ERR_INVALID_ARG_VALUE when its ArrayBuffer is
   * detached (transferred); `RangeError` ERR_OUT_OF_RANGE for an empty one; otherwise as
   * {@link DeviceBuffer.alloc} and `stream.copy`.
   * Wraps: cuMemAllocFromPoolAsync, cuMemcpyHtoDAsync. Thread-safety: any thread or worker. Lifetime: owned.
   * Follows: RMM `to_device`, CuPy `asarray`.
   * @example
   * ```ts
   * using x = DeviceBuffer.from(new Float32Array([1, 2, 3]), { stream });
   * ```
   */
  static from(source: ArrayBufferView, options?: DeviceBufferFromOptions): DeviceBuffer {
    if (!isArrayBufferView(source)) throw invalidType('source', 'a TypedArray, DataView or Buffer', source);
    const sourceBytes = () => {
      const found = viewBytes(source);
      if (found.detached) throw detachedError('source', true);
      if (found.byteLength === 0) throw outOfRange('source.byteLength', `an integer from 1 to ${Number.MAX_SAFE_INTEGER}`, 0);
      return found;
    };
    sourceBytes(); // before the driver is needed
    const o = validateOptions<DeviceBufferFromOptions>(options, 'options', 'DeviceBuffer.from', ['stream', 'device']);
    const stream = DeviceBuffer.#allocationStream(o);
    // Again, after the options: a getter among them may have detached or shrunk the source.
    const bytes = sourceBytes();
    let buffer: DeviceBuffer;
    try {
      buffer = DeviceBuffer.alloc(bytes.byteLength, { stream });
    } catch (error) {
      throw renameDestroyed(error, 'DeviceBuffer.from');
    }
    try {
      // The bytes found above, as a plain Uint8Array: nothing of the caller's object is read again.
      copyOnStream(stream, buffer, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), undefined, 'DeviceBuffer.from');
    } catch (error) {
      buffer.free();
      throw error;
    }
    return buffer;
  }

  /** Copies the whole buffer into a new typed array of type `Ctor` on `options.stream` (default:
   * `currentStream(device)`) and resolves with it once the copy has landed; never blocks the event loop.
   * @param Ctor - a typed-array constructor (`Float32Array`, `Int32Array`, `BigUint64Array`, ...); the buffer's byte
   * length must be a multiple of its `BYTES_PER_ELEMENT`.
   * @throws (synchronously) `TypeError` ERR_INVALID_ARG_TYPE for another `Ctor` or a bad stream; ERR_INVALID_ARG_VALUE
   * for a stream of another device or when the byte length is not a multiple of the element size;
   * {@link DestroyedError} after free. Rejects with {@link CudaError} when the copy or the stream's work failed, with
   * an `Error` whose `code` is `EAGAIN` when the library's completion thread cannot start, or with `signal.reason`
   * when `options.signal` aborts the wait (at once, queuing no copy, when it had aborted before the call).
   * Wraps: cuMemcpyDtoHAsync (through pinned staging), then waits for the stream as `stream.synchronize()`.
   * Follows: RMM `copy_to_host`, CuPy `get()`.
   * @example
   * ```ts
   * const values = await buffer.toArray(Float32Array, { stream });
   * ```
   */
  toArray<C extends TypedArrayConstructor>(Ctor: C, options?: ToArrayOptions): Promise<InstanceType<C>> {
    if (typeof Ctor !== 'function' || !(Ctor.prototype instanceof TypedArray))
      throw invalidType('Ctor', 'a TypedArray constructor (such as Float32Array)', Ctor);
    const o = validateOptions<ToArrayOptions>(options, 'options', 'toArray', ['stream', 'signal']);
    if (o.stream !== undefined && !streams.is(o.stream)) throw invalidType('options.stream', 'a Stream', o.stream);
    const signal = validateSignal(o.signal, 'options.signal');
    this.#use('toArray');
    const size = Ctor.BYTES_PER_ELEMENT;
    if (this.byteLength % size !== 0)
      throw invalidValue('Ctor', `is ${Ctor.name}, whose ${size}-byte elements do not divide the buffer's ${this.byteLength} bytes; pick an element size that does, or read a subarray.`);
    const stream = o.stream ?? currentStream(this.device);
    this.#sameDevice(stream, 'options.stream');
    // Nobody will read what an already-aborted call would copy: queue nothing (the copy would keep its stream alive).
    if (signal?.aborted) return Promise.reject(signal.reason);
    const out = new Ctor(this.byteLength / size) as InstanceType<C>;
    try {
      copyOnStream(stream, out, this, undefined, 'buffer.toArray');
    } catch (error) {
      // Bad arguments and destroyed objects throw; a copy the driver or the system refused rejects, as a wait would.
      if (error instanceof TypeError || error instanceof RangeError || error instanceof DestroyedError) throw error;
      return Promise.reject(error);
    }
    return stream.synchronize({ signal }).then(() => out);
  }

  /** A view of bytes `begin` to `end` (exclusive) of this buffer, with JavaScript's `subarray` meaning: negative
   * values count from the end, values are clamped to the buffer, and `end` before `begin` gives an empty view.
   * Creates nothing on the device. The view shares this buffer's memory, lifetime and cross-stream tracking: its
   * uses on other streams delay this buffer's free, and once this buffer is freed every method of the view throws
   * {@link DestroyedError}. The view's own `free()` only retires the view.
   * @param begin - byte offset. @defaultValue 0
   * @param end - byte offset, exclusive. @defaultValue `byteLength`
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for a non-integer offset; {@link DestroyedError} after free. */
  subarray(begin = 0, end = this.byteLength): DeviceBuffer {
    for (const [name, value] of [['begin', begin], ['end', end]] as const)
      if (typeof value !== 'number' || !Number.isInteger(value)) throw invalidType(name, 'an integer (a byte offset)', value);
    this.#use('subarray');
    const clamp = (at: number) => (at < 0 ? Math.max(this.byteLength + at, 0) : Math.min(at, this.byteLength));
    const first = clamp(begin);
    const length = Math.max(clamp(end) - first, 0);
    const parent = this.#parent ?? this;
    const view = new DeviceBuffer(internalConstruction, this.#ref, length, undefined, this.#device, this.#stream, this.#borrowed);
    view.#parent = parent;
    view.#offset = this.#offset + first;
    view.#address = this.#address + first;
    return view;
  }

  /** A borrowed view, in this thread, of the buffer that `shared` (from `buffer.share()` in any thread) names. Its
   * uses on streams of this thread delay the owner's free like the owner's own; it never frees the memory (its
   * `free()` only retires the view). Order its work after the owner's writes yourself (for example the owner awaits
   * its stream before posting `shared`).
   * @param shared - the record `share()` returned, unchanged: every field must agree with the buffer its `id` names.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE when `shared` is not a SharedDeviceBuffer record or a field has the
   * wrong type; `RangeError` ERR_OUT_OF_RANGE naming the id when `shared.id` is outside 1 to 2**64 - 1 or names no
   * buffer `share()` ever gave ("no such buffer"); ERR_INVALID_ARG_VALUE naming the field and both values when
   * `byteLength`, `ptr` or `device` disagrees with that buffer; {@link DestroyedError} when the owner already freed
   * the buffer (or forgot it and its finalizer ran).
   * Thread-safety: any thread or worker. Lifetime: borrowed; the owner must outlive the view's work. */
  static attach(shared: SharedDeviceBuffer, options?: DeviceBufferAttachOptions): DeviceBuffer {
    if (typeof shared !== 'object' || shared === null || shared.kind !== SHARED_KIND)
      throw invalidType('shared', 'a SharedDeviceBuffer from buffer.share()', shared);
    // Each field once: a getter on a forged record cannot answer differently later.
    const { id, byteLength, ptr, device: sharedDevice } = shared;
    if (typeof id !== 'bigint') throw invalidType('shared.id', 'a bigint (from buffer.share())', id);
    if (id < 1n || id >= 2n ** 64n) throw outOfRange('shared.id', 'a buffer id from buffer.share(): an integer from 1n to 2n ** 64n - 1n', id);
    if (typeof byteLength !== 'number') throw invalidType('shared.byteLength', 'a number', byteLength);
    if (typeof ptr !== 'bigint') throw invalidType('shared.ptr', 'a bigint', ptr);
    if (typeof sharedDevice !== 'number') throw invalidType('shared.device', 'a device ordinal (number)', sharedDevice);
    const o = validateOptions<DeviceBufferAttachOptions>(options, 'options', 'DeviceBuffer.attach', ['stream']);
    if (o.stream !== undefined && !streams.is(o.stream)) throw invalidType('options.stream', 'a Stream', o.stream);
    const found = native.deviceBufferAttach(id);
    if (found === undefined)
      throw outOfRange('shared.id', 'the id of a buffer shared by buffer.share() in this process', id, 'There is no such buffer.');
    const { ref, ptr: realPtr, bytes, device: ordinal } = found;
    const fields: Array<[string, unknown, unknown]> = [['byteLength', byteLength, bytes], ['ptr', ptr, realPtr], ['device', sharedDevice, ordinal]];
    for (const [field, given, real] of fields)
      if (given !== real)
        throw invalidValue(`shared.${field}`, `is ${String(given)}, but buffer ${id} has ${field} ${String(real)}; pass the record from buffer.share() unchanged.`);
    const device = Device.get(ordinal);
    const stream = o.stream ?? currentStream(device);
    if (stream.device !== device)
      throw invalidValue('options.stream', `is on device ${stream.device.ordinal}, but the buffer is on device ${ordinal}.`);
    const view = new DeviceBuffer(internalConstruction, ref, bytes, realPtr, device, stream, true);
    adopt(view, ref);
    return view;
  }

  /** The stream `free()` uses by default: the allocation stream (a borrowed view: its attach stream). */
  get stream(): Stream {
    return this.#stream;
  }

  /** True after `free()` (or, for a borrowed view or a subarray, after its own `free()` or its buffer's). */
  get freed(): boolean {
    return this.#freed !== undefined || this.#parent?.freed === true;
  }

  /** True for a view from {@link DeviceBuffer.attach}, which never frees the memory. */
  get borrowed(): boolean {
    return this.#borrowed;
  }

  /** Announces that work on `stream` uses the memory (for example a kernel given `buffer.ptr` as a bigint, or another
   * library's work): the free then waits for everything `stream` had queued before the free. Returns at once; copies,
   * fills and `DeviceBuffer` kernel arguments do this themselves. `stream` may belong to another device (a kernel there
   * reading this buffer through peer access, see `Device.enablePeerAccess`): the free then waits for that device's
   * stream too.
   * @throws `TypeError` for a non-Stream; {@link DestroyedError} after free or for a destroyed stream.
   * Wraps: cuEventCreate (once per stream), in the stream's context. Follows: PyTorch `Tensor.record_stream`. */
  recordStream(stream: Stream): void {
    if (!streams.is(stream)) throw invalidType('stream', 'a Stream', stream);
    this.#use('recordStream');
    this.#noteUse(stream, 'buffer.recordStream');
  }

  /** The pointer for a 'ptr' kernel argument; records the use on `stream`. @internal */
  [asKernelPointer](stream: Stream): number | bigint {
    this.#use('kernel.launch');
    this.#sameDevice(stream, 'options.stream');
    const ref = streamRef(stream, 'kernel.launch');
    // A launch on a stream that an earlier launch of this buffer noted needs no native call: the native use entry
    // stays until the free, or until the stream is destroyed, and then the launch's own call refuses the stream. Kept
    // by Stream object (one ref for life), not by ref, whose number a slot reused 2**29 times would repeat; weakly, so
    // that a forgotten stream or lease is still collected while the buffer lives. Only for a buffer of this thread: a
    // borrowed one may be freed by its owner elsewhere, which only the native call sees.
    const usedOn = this.#usedOn;
    if (usedOn === undefined || !usedOn.has(stream)) {
      this.#noteUse(stream, 'kernel.launch', ref);
      if (!this.#borrowed) (this.#usedOn ??= new WeakSet()).add(stream);
    }
    noteCaptured(ref, this);
    const address = this.#address;
    return address >= 0 ? address : this.ptr;
  }

  /** Frees the memory in stream order on `options.stream` (default: `buffer.stream`) and returns at once: the memory
   * is reused only after the work queued so far on that stream and on every other stream that used the buffer,
   * streams of other devices included (a peer copy from or into it, `recordStream`). When
   * the allocation stream was destroyed (and no stream is given) the free is ordered after its last work on a stream
   * the library owns. A borrowed view only retires itself. Idempotent; never throws after a device fault.
   * @throws `TypeError` for bad options or a stream of another device; {@link DestroyedError} for a destroyed
   * `options.stream`; {@link CaptureError} while the free's stream is capturing a graph (the buffer stays usable);
   * {@link CudaError} when the driver refuses. A live Graph or GraphExec that uses the buffer does not stop the free:
   * its launches queued so far finish first, and later launches throw {@link DestroyedError}.
   * Wraps: cuEventRecord, cuStreamWaitEvent, cuMemFreeAsync. Thread-safety: the owning thread. */
  free(options?: DeviceBufferFreeOptions): void {
    const { stream } = validateOptions<DeviceBufferFreeOptions>(options, 'options', 'DeviceBuffer.free', ['stream']);
    if (stream !== undefined) {
      if (!streams.is(stream)) throw invalidType('options.stream', 'a Stream', stream);
      this.#sameDevice(stream, 'options.stream');
    }
    if (this.#freed !== undefined) return;
    if (this.#parent) {
      this.#freed = 'was freed (this subarray only: its buffer frees the memory)';
      return;
    }
    if (this.#borrowed) {
      this.#freed = 'was freed (this borrowed view only: the owner frees the memory)';
      return;
    }
    const target = stream === undefined ? undefined : streamRef(stream, 'DeviceBuffer.free');
    // A Stream.fromHandle() wrapper whose lender was destroyed: the native free would quietly take another stream.
    if (stream?.destroyed) throw new DestroyedError('Stream', 'DeviceBuffer.free');
    this.#freed = 'was freed';
    let refused = 0;
    try {
      refused = DeviceBuffer.#refusal(native.deviceBufferFree(this.#ref, target, false));
    } finally {
      if (refused !== 0) this.#freed = undefined;
      else this.#ptr ??= facts[0]!; // the handle is released: the address, if ever read, comes from what the free left
    }
    if (refused !== 0) throw DeviceBuffer.#freeRefusal(refused);
    released(this);
  }

  /** The capture status (1 or 2) of the stream, or of a stream that used the buffer, when the native alloc or free
   * refused because that stream is capturing (it returns the status negated; a ref is never negative); else 0. */
  static #refusal(result: NativeRef | number | undefined): number {
    return typeof result === 'number' && result < 0 ? -result : 0;
  }

  /** The CaptureError of a free the native layer refused with capture status `status`, from the facts it left: the
   * capturing stream's id (known to the native layer once the stream was made or any wrapper of it read its facts;
   * asking the driver now would invalidate the capture), and whether it is not the free's own stream but one that
   * used the buffer. */
  static #freeRefusal(status: number): CaptureError {
    return captureRefusal(status, facts[1]!, 'DeviceBuffer.free()', facts[2] === 1n ? 'a stream that used the buffer' : 'the stream');
  }

  /** Same as `free()`. */
  [Symbol.dispose](): void {
    this.free();
  }

  /** Frees as `free()` does, then resolves once the free's stream has reached the free (so the memory is back in
   * the pool), without blocking the event loop. Rejects with {@link CudaError} when that work failed. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#freed !== undefined) return;
    if (this.#borrowed || this.#parent) return this.free();
    this.#freed = 'was freed';
    const result = native.deviceBufferFree(this.#ref, undefined, true);
    const refused = DeviceBuffer.#refusal(result);
    if (refused !== 0) {
      this.#freed = undefined;
      throw DeviceBuffer.#freeRefusal(refused);
    }
    this.#ptr ??= facts[0]!;
    released(this);
    if (result === undefined) return;
    const marker = result as NativeRef;
    try {
      await waitFor('event', marker, 'cuMemFreeAsync', () => `device ${this.device.ordinal}, freeing ${this.byteLength} bytes`);
    } finally {
      releaseRef(marker);
    }
  }

  /** A structured-cloneable handle for another thread's {@link DeviceBuffer.attach}; creates nothing. The buffer is
   * still freed by this owner: a view attached after the free throws {@link DestroyedError}.
   * @throws {@link DestroyedError} after free. */
  share(): SharedDeviceBuffer {
    if (this.#parent) throw invalidValue('buffer', 'is a subarray; share its buffer and take the subarray in the other thread.');
    const id = native.deviceBufferShare(this.#use('share'));
    return { kind: SHARED_KIND, id, byteLength: this.byteLength, ptr: this.ptr, device: this.device.ordinal };
  }
}

/** DeviceBuffer as a 'ptr' kernel argument: fails to compile when the class stops implementing KernelPointer. @internal */
export type DeviceBufferKernelPointer = ImplementsKernelPointer<DeviceBuffer>;
