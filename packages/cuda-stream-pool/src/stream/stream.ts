// CUDA streams: owned (created here), borrowed (legacy, per-thread, foreign handles) and pool streams.
// See Note [handle guard] in internal/native-object.h for why destroy is safe across threads.
import { CU_STREAM_PER_THREAD, factWords, native, NOT_READY, type NativeRef } from '../binding/binding.js';
import { adopt, released } from '../binding/native-ref-lifetime.js';
import { Device, resolveDevice } from '../device/device.js';
import { partitionDeviceOf, partitionIndex, partitionsOf, type DevicePartition } from '../device/partition.js';
import { CaptureError, DestroyedError, renameDestroyed } from '../binding/errors.js';
import { landPending, waitError, waitFor, waitSignal } from './completion.js';
import { Event, events } from './event.js';
import { privateState, register, streams } from '../internal/handles.js';
import { copy2DOnStream, copyBatchOnStream, copyOnStream, fillOnStream, type Copy2DOptions, type CopyOptions, type FillOptions } from './copy.js';
import { abandonCapture, beginCapture, CAPTURE_MODES, captureRefusal, captureStatus, endCapture, noteJoin, requireNotCapturing, type CaptureMode, type CaptureRecord } from './capture.js';
// Type-only imports of the classes above this file, which the public signatures name (Stream.fill(DeviceBuffer),
// Stream.copy(ManagedBuffer, ...), Stream.endCapture(): Graph); the cycle test allows exactly these.
import type { DeviceBuffer } from '../memory/device-buffer.js';
import type { ManagedBuffer } from '../memory/managed-buffer.js';
import type { PinnedBuffer } from '../memory/pinned-buffer.js';
import type { Graph } from '../graph/graph.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, invalidValue, validateBoolean, validateInteger, validateOptions } from '../internal/validate.js';

/** Options for {@link Stream.create}. */
export interface StreamOptions {
  /** The device, as a `Device` or an ordinal. @defaultValue 0 */
  device?: Device | number;
  /** True: the stream never synchronizes implicitly with the legacy default stream (CU_STREAM_NON_BLOCKING).
   * @defaultValue true */
  nonBlocking?: boolean;
  /** The priority; lower numbers are higher priorities. Any integer: the driver clamps it into
   * `device.streamPriorityRange`, and `stream.priority` reports the effective value.
   * @defaultValue the device's least priority (0 on current GPUs) */
  priority?: number;
  /** A partition of the device (from `device.partition()`): the stream runs its kernels only on the partition's
   * multiprocessors (cuGreenCtxStreamCreate). `device` may be left out; `nonBlocking` must not be false.
   * @defaultValue the whole device */
  partition?: DevicePartition;
}

/** Options for waits: `{ signal }` aborts the wait (not the GPU work), rejecting with `signal.reason`. */
export interface WaitOptions {
  /** Aborts the wait; the promise rejects with `signal.reason`. The GPU work goes on. */
  signal?: AbortSignal;
}

/** Options for {@link Stream.beginCapture}. */
export interface CaptureOptions {
  /** Which API calls the driver prohibits while the capture runs, because they could synchronize with the captured
   * work: `'thread-local'` in this thread only; `'global'` in every thread of the process, the library's own
   * included; `'relaxed'` none. The library's guards (Note [capture safety] in stream/capture.ts) apply in every mode.
   * @defaultValue 'thread-local' */
  mode?: CaptureMode;
}

/** 'pool': handed out by getStream() (shared); 'lease': a lease's view of a pool stream (exclusive). */
type Kind = 'owned' | 'borrowed' | 'pool' | 'lease';

const LEGACY = 1n; // CU_STREAM_LEGACY
const perThreadStreams = new Map<number, Stream>();
const legacyStreams = new Map<number, Stream>();

/** What new streams are made with, from the options that `Stream.create()` and `new StreamPool()` share: the device
 * (a partition's when no `device` is given; 0 by default; null is no device), `nonBlocking` (default true), `priority`
 * (default 0) and the partition's index (-1 without one). Each option is read once, so a getter that answers
 * differently cannot pass a check with one value and reach the driver with another. @internal */
export function streamCreation(o: Partial<StreamOptions>): { device: Device; nonBlocking: boolean; priority: number; partition: number } {
  const { device: deviceOption, nonBlocking: nonBlockingOption, priority: priorityOption, partition: partitionOption } = o;
  const nonBlocking = nonBlockingOption === undefined ? true : validateBoolean(nonBlockingOption, 'options.nonBlocking');
  const priority = priorityOption === undefined ? 0 : validateInteger(priorityOption, 'options.priority', -(2 ** 31), 2 ** 31 - 1);
  const device = resolveDevice(deviceOption === undefined ? partitionDeviceOf(partitionOption) : deviceOption);
  const partition = partitionIndex(partitionOption, deviceOption === undefined ? undefined : device, nonBlockingOption);
  return { device, nonBlocking, priority, partition };
}

/** What cuStreamGetId/GetPriority/GetFlags reported for a ref, as [handle, id, priority, nonBlocking] (a lease view
 * reuses its pool stream's). @internal */
export type StreamInfo = ReturnType<typeof native.streamInfo>;

/** What `stream.copy()` copies between: a {@link DeviceBuffer} (or a subarray of one), a {@link ManagedBuffer}, a
 * {@link PinnedBuffer}, or host memory (an `ArrayBuffer`, `SharedArrayBuffer` or any `ArrayBufferView`: TypedArray,
 * DataView, Buffer). A view into a PinnedBuffer is copied directly; other host memory goes through pinned staging. A
 * ManagedBuffer pairs only with a DeviceBuffer or a ManagedBuffer (cuMemcpyAsync); the host uses its views. */
export type CopyOperand = DeviceBuffer | ManagedBuffer | PinnedBuffer | ArrayBufferLike | ArrayBufferView;

/** One copy of {@link Stream.copyBatch}: the operands of {@link Stream.copy} and its options. */
export interface BatchCopy extends CopyOptions {
  /** Where the bytes go, as `copy()`'s `dst`. */
  dst: CopyOperand;
  /** Where the bytes come from, as `copy()`'s `src`. */
  src: CopyOperand;
}

// A stream's lifetime, for the pool files: wrapping a pool stream's ref, whether a wrapper was used, retiring it.
const lifetimes = privateState<{
  wrap(ref: NativeRef, device: Device, kind: Kind, info?: StreamInfo, owner?: object): Stream;
  used(stream: Stream): boolean;
  retire(stream: Stream, why: string): void;
}>('Stream', ['wrap', 'used', 'retire']);

/** How `stream.endCapture()` makes its Graph: graph/graph.ts, which sits above this file, registers it. @internal */
export const graphs = privateState<{ fromCapture(ref: NativeRef, record: CaptureRecord, device: Device): Graph }>('Graph', ['fromCapture']);

/** A CUDA stream: a queue of GPU work that runs in order, concurrently with other streams.
 *
 * Lifetime: `Stream.create` owns its stream (cuStreamDestroy on `destroy()`, `[Symbol.dispose]`, or by a finalizer
 * when forgotten). `Stream.legacy`, `Stream.perThread` and `Stream.fromHandle` borrow theirs: `destroy()` only
 * retires the wrapper. Streams of a `StreamPool` die with their pool (`destroy()` on one is a `TypeError`). After
 * destroy every method throws {@link DestroyedError}, in any thread, and the handle never reaches the driver again.
 *
 * Thread-safety: a stream may be used from any thread that has it (pool streams are shared with workers); every
 * method is safe against concurrent calls from other threads, including a concurrent destroy.
 *
 * @example
 * ```ts
 * using stream = Stream.create();
 * kernel.launch({ grid: 1024, block: 256, stream }, buffer, n);
 * await stream.synchronize();
 * ```
 */
export class Stream {
  #ref: NativeRef;
  #kind: Kind;
  /** Borrowed, from `Stream.fromHandle()` of a stream this library owns: its lender can be destroyed under it. */
  #lent = false;
  #retired: string | undefined;
  #used = false; // anything called through this wrapper (Note [known idle] in pool/pool-policy.ts)
  #owner: object | undefined; // what must outlive this wrapper (a pool stream keeps its StreamPool alive)
  // Getters over private fields, not writable fields: leases make a Stream each, and defining four non-writable
  // properties per construction would cost more than the getters.
  readonly #device: Device;
  // [handle, id, priority, nonBlocking, partition], read from the ref on first use: a created stream that is only used and
  // destroyed never needs them as JS values.
  #info: StreamInfo | undefined;
  // The facts streamDestroy left, as 32-bit words, when #info was never read: decoded on first read after destroy.
  #left: number[] | undefined;
  /** The device whose primary context the stream belongs to. */
  get device(): Device {
    return this.#device;
  }
  #handleShared = false;
  /** The raw `CUstream` value as a bigint (1n for the legacy stream, 2n for the per-thread stream), valid until
   * destroy. For interoperation with other CUDA libraries; never 0n. Reading it tells the library that work may
   * reach the stream from outside it: from then on, repeated waits with no work queued through the library between
   * them no longer share one completion ticket (each wait enqueues its own marker, which is correct whatever else
   * queues work on the stream). */
  get handle(): bigint {
    if (!this.#handleShared && this.#retired === undefined) {
      this.#handleShared = true;
      native.streamShareHandle(this.#ref);
    }
    return this.#facts()[0];
  }
  /** The driver's unique stream id (cuStreamGetId); unlike `handle`, never reused within the process. */
  get id(): bigint {
    return this.#facts()[1];
  }
  /** The effective priority: for a created stream the one asked for, clamped into the device's
   * `streamPriorityRange` as cuStreamCreateWithPriority clamps it; for a borrowed one, cuStreamGetPriority. */
  get priority(): number {
    return this.#facts()[2];
  }
  /** Whether the stream does not synchronize with the legacy default stream (CU_STREAM_NON_BLOCKING: as created,
   * or cuStreamGetFlags for a borrowed stream). */
  get nonBlocking(): boolean {
    return this.#facts()[3];
  }
  /** The device partition whose multiprocessors the stream's kernels run on (a stream created with `{ partition }`,
   * or one of a pool on a partition), or `undefined` for the whole device. A borrowed stream (`Stream.fromHandle()`)
   * reports `undefined`: the driver does not say which green context made a stream. */
  get partition(): DevicePartition | undefined {
    const index = this.#facts()[4];
    return index < 0 ? undefined : partitionsOf(this.#device)![index];
  }

  #facts(): StreamInfo {
    return (this.#info ??= this.#left === undefined ? native.streamInfo(this.#ref) : infoFromWords(this.#left));
  }

  /** `known`: the stream's facts when the caller has them; else they are read on first use, which for a stream whose
   * facts the native layer does not hold (a borrowed one) must happen now, while the stream is alive. */
  private constructor(token: symbol, ref: NativeRef, device: Device, kind: Kind, known?: StreamInfo) {
    checkConstruction(token, 'Stream', 'Stream.create(), Stream.legacy(), Stream.perThread(), Stream.fromHandle() or a StreamPool');
    if (kind === 'owned' || kind === 'borrowed') adopt(this, ref); // a pool's streams are the pool's
    this.#ref = ref;
    this.#kind = kind;
    this.#device = device;
    this.#info = known ?? (kind === 'owned' ? undefined : native.streamInfo(ref));
  }

  static {
    guardReceivers(Stream, (value) => #ref in value);
    register(streams, {
      is: (value: unknown): value is Stream => typeof value === 'object' && value !== null && #ref in value,
      ref: (stream, method) => (stream as Stream).#use(method),
      handle: (stream) => (stream as Stream).#facts()[0],
      device: (stream) => (stream as Stream).#device,
    });
    register(lifetimes, {
      wrap: (ref, device, kind, info, owner) => {
        const stream = new Stream(internalConstruction, ref, device, kind, info);
        stream.#owner = owner;
        return stream;
      },
      used: (stream) => stream.#used,
      retire: (stream, why) => {
        if (stream.#retired === undefined) abandonCapture(stream.#ref);
        stream.#retired ??= why;
        stream.#owner &&= undefined; // a retired wrapper no longer needs its owner alive
      },
    });
  }

  #use(method: string): NativeRef {
    if (this.#retired !== undefined) throw new DestroyedError('Stream', method, this.#retired);
    this.#used = true;
    return this.#ref;
  }

  /** Creates a stream that this object owns.
   * @throws {@link CudaUnavailableError} without a GPU; `TypeError`/`RangeError` for bad options; {@link CudaError}
   * when the driver cannot create a stream.
   * With `options.partition`, a stream of that partition (`ERR_INVALID_ARG_VALUE` beside `nonBlocking: false` or
   * another device). Wraps: cuStreamCreateWithPriority, or cuGreenCtxStreamCreate in a partition. Lifetime: owned; `destroy()` or `using`; a finalizer destroys a forgotten one.
   * Creating a stream costs several microseconds; for many short tasks use a {@link StreamPool} instead. */
  static create(options?: StreamOptions): Stream {
    const o = validateOptions<StreamOptions>(options, 'options', 'Stream', ['device', 'nonBlocking', 'priority', 'partition']);
    const { device, nonBlocking, priority, partition } = streamCreation(o);
    return new Stream(internalConstruction, native.streamCreate(device.ordinal, nonBlocking, priority, partition), device, 'owned');
  }

  /** The legacy default stream of `device` (CU_STREAM_LEGACY), which synchronizes with every blocking stream.
   * Borrowed: `destroy()` retires this wrapper only. The same object on every call in a thread.
   * The library never enqueues its own work on it; waits on it go through an event. */
  static legacy(device?: Device | number): Stream {
    return borrowedOnce(legacyStreams, LEGACY, resolveDevice(device, 'device'));
  }

  /** The calling thread's per-thread default stream of `device` (CU_STREAM_PER_THREAD): each thread (main or
   * worker) gets its own. Borrowed; the same object on every call in a thread. This is what
   * {@link currentStream} returns outside any scope. */
  static perThread(device?: Device | number): Stream {
    return borrowedOnce(perThreadStreams, CU_STREAM_PER_THREAD, resolveDevice(device, 'device'));
  }

  /** Wraps a stream created elsewhere (another CUDA library). Borrowed: the caller keeps the stream alive until
   * this wrapper is destroyed and every use of it is done; `destroy()` never destroys the driver stream.
   * The handle is trusted: the driver gives no way to check it, so it must belong to `device`. A handle of a stream
   * this library owns (`Stream.create()` or a pool's, made in any thread) is tied to that stream instead: once it is
   * destroyed, this wrapper's calls throw {@link DestroyedError}, and buffers it used are freed after that stream's
   * last work.
   * @param handle - a `CUstream` as a bigint; 0n is rejected (use {@link Stream.legacy}).
   * @param device - the stream's device. @defaultValue the device of the library's stream when the handle is one,
   * else device 0
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for a non-bigint, ERR_INVALID_ARG_VALUE for 0n, or for a `device` other
   * than that of the library's stream the handle belongs to. */
  static fromHandle(handle: bigint, device?: Device | number): Stream {
    if (typeof handle !== 'bigint') throw invalidType('handle', 'a bigint', handle, typeof handle === 'number' ? 'Pass BigInt(value).' : '');
    if (handle === 0n) throw invalidValue('handle', 'must not be 0n: 0 is ambiguous; use Stream.legacy() or Stream.perThread().');
    if (handle < 0n || handle >= 2n ** 64n) throw invalidValue('handle', `must be a CUstream value from 1n to 2n ** 64n - 1n; received ${handle}n.`);
    const d = device === undefined ? undefined : resolveDevice(device, 'device');
    const owner = native.streamOwnerDevice(handle);
    if (owner >= 0 && d !== undefined && d.ordinal !== owner)
      throw invalidValue('device', `is device ${d.ordinal}, but the handle is of a stream this library created on device ${owner}; pass ${owner} or leave it out.`);
    const on = d ?? (owner >= 0 ? Device.get(owner) : resolveDevice(undefined, 'device'));
    const stream = new Stream(internalConstruction, native.streamBorrow(on.ordinal, handle), on, 'borrowed');
    stream.#lent = owner >= 0;
    return stream;
  }

  /** True when all work queued so far is done; false while any is pending. Never blocks.
   * @throws {@link DestroyedError} after destroy; {@link CudaError} when queued work failed; {@link CaptureError} while
   * the stream is capturing a graph. Wraps: cuStreamQuery. */
  query(): boolean {
    const ref = this.#use('query');
    requireNotCapturing(ref, this, 'stream.query()');
    const status = native.streamStatus(ref);
    if (status === 0) {
      landPending(); // a copy into a JS array queued before lands before the work is reported done
      return true;
    }
    if (status === NOT_READY) return false;
    native.streamThrowFailure(ref); // recorded work that failed reports its own call
    throw waitError(status, 'cuStreamQuery', `device ${this.device.ordinal}, stream ${this.id}`);
  }

  /** Resolves once all work queued on the stream so far is done, without blocking the event loop. Settles at once
   * when the stream is idle (no thread hop); otherwise it enqueues a completion marker that does not block the stream
   * (a ticket written by cuStreamWriteValue64 into mapped pinned memory, or a pooled event on devices without stream
   * memory operations and on the legacy stream), which the library's poller thread watches; finished waits wake
   * this thread in batches. Rejects with {@link CudaError} when the work failed (within about 10 ms of a sticky
   * device fault, also of another device whose work this stream waited on: see {@link Stream.waitEvent}), with
   * `signal.reason` when aborted, with {@link CaptureError} while the stream is capturing a graph,
   * and with {@link DestroyedError} when called after destroy. A stream destroyed while the wait is pending still
   * settles: when its queued work completes, or with the fault.
   * Thread-safety: any thread. Wraps: cuStreamQuery, cuStreamWriteValue64 (or cuEventRecord). */
  synchronize(options?: WaitOptions): Promise<void> {
    let signal: AbortSignal | undefined;
    let ref: NativeRef;
    try {
      signal = waitSignal(options);
      ref = this.#use('synchronize');
    } catch (error) {
      return Promise.reject(error);
    }
    return waitFor(
      'stream',
      ref,
      'cuStreamSynchronize',
      () => `device ${this.device.ordinal}, stream ${this.id}`,
      signal,
      (status) => captureRefusal(status, this.id, 'stream.synchronize()'),
    );
  }



  /** Blocks the calling thread (and its event loop) until the stream's queued work is done; prefer
   * {@link Stream.synchronize}. Copies into JS arrays queued before have landed when it returns.
   * @throws {@link CudaError} when the work failed; {@link DestroyedError} after destroy;
   * {@link CaptureError} while the stream is capturing a graph.
   * Wraps: cuStreamSynchronize. */
  synchronizeSync(): void {
    const ref = this.#use('synchronizeSync');
    requireNotCapturing(ref, this, 'stream.synchronizeSync()');
    const status = native.streamSynchronize(ref);
    if (status !== 0) throw waitError(status, 'cuStreamSynchronize', `device ${this.device.ordinal}, stream ${this.id}`);
    landPending(); // a copy into a JS array queued before lands before the work is reported done
  }

  /** Makes work queued later on this stream wait until `event`'s recorded work is done; returns at once, and blocks
   * neither this stream's earlier work nor any thread. The event may belong to another device: work on this device
   * then waits for work on that one, in the GPUs' own order (no host round trip). Until a wait on this stream
   * completes cleanly, a sticky fault of that device (or of a device the event's work waited on) makes this stream's
   * waits reject with it: the work after this wait could not have run correctly.
   * A never-recorded event is complete, so nothing waits. An event recorded on a capturing stream forks this stream
   * into that capture (see {@link Stream.beginCapture}).
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for a non-Event; {@link DestroyedError} when the stream or the event was
   * destroyed; {@link CudaError} when the driver refuses. Wraps: cuStreamWaitEvent (in this stream's context).
   * Thread-safety: any thread that has both. */
  waitEvent(event: Event): void {
    if (!(event instanceof Event)) throw invalidType('event', 'an Event', event);
    const ref = this.#use('waitEvent');
    native.streamWaitEvent(ref, events.ref(event, 'stream.waitEvent'));
    noteJoin(ref, events.captured(event));
  }

  /** Makes work queued later on this stream wait for the work queued so far on `other`; returns at once. `other` may
   * be a stream of another device: work on this device then waits for work on that one, in the GPUs' own order, and
   * a sticky fault there reaches this stream's waits as with {@link Stream.waitEvent}.
   * When `other` is capturing a graph, this stream joins the capture (a fork; waiting the other way round joins it
   * back). Records an event on `other` (in its device's context) and waits on it: the calling thread keeps one such
   * event per device of `other`, recorded again on every call and destroyed when the thread ends (an internal event:
   * not counted in `cuda.liveObjects()`).
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for a non-Stream; {@link DestroyedError} when either stream was
   * destroyed; {@link CudaError} when the driver refuses. Wraps: cuEventRecord, cuStreamWaitEvent.
   * Thread-safety: any thread that has both. */
  waitStream(other: Stream): void {
    if (!streams.is(other)) throw invalidType('other', 'a Stream', other);
    const ref = this.#use('waitStream');
    const source = other.#use('waitStream');
    native.streamWaitStream(ref, source);
    noteJoin(ref, source); // joins the capture when `other` is capturing
  }

  /** Queues an asynchronous copy of `options.byteLength` bytes (default: the source's length from `srcOffset`) from
   * `src` to `dst` and returns at once; never blocks the thread. One side must be a `DeviceBuffer`; the other a
   * `DeviceBuffer`, a `PinnedBuffer` or a view into one (copied directly), or other host memory (an ArrayBuffer,
   * SharedArrayBuffer or ArrayBufferView), which goes through the library's pinned staging: a host source is read
   * now (it may change afterwards); a host destination is written by this thread, from staging, before any later
   * completion of this stream settles here, and stays referenced until then; it cannot be a copy source meanwhile. A
   * destination whose buffer was detached or transferred meanwhile gets nothing (its data is dropped; waits still
   * settle). A `ManagedBuffer` pairs with a `DeviceBuffer` or another `ManagedBuffer` (cuMemcpyAsync).
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for other operands; ERR_INVALID_ARG_VALUE for two host operands, a
   * ManagedBuffer with host memory, a
   * buffer of another device, overlapping device ranges, or a source still pending as a destination; `RangeError`
   * ERR_OUT_OF_RANGE naming the offsets and sizes when a range does not fit; {@link DestroyedError} for a freed
   * buffer or a destroyed stream; {@link CaptureError} for staged host memory while the stream is capturing a graph
   * (the graph would replay a staging block long since reused; copy a PinnedBuffer); {@link CudaError} when the
   * driver refuses. During a capture the copy is recorded, and the graph keeps its buffers alive.
   *
   * Between devices: two `DeviceBuffer`s on different devices are copied in the order of this stream, which must
   * belong to one of the two (ERR_INVALID_ARG_VALUE naming `stream` otherwise). Where the destination's device has
   * peer access to the source's or the other way round ({@link Device.enablePeerAccess}) the bytes go directly over
   * NVLink or PCIe; otherwise the driver stages them through host memory, which is correct but slower (`bench micro`
   * shows both). Both buffers count the copy as a use on this stream, so freeing either one waits for it, whichever
   * device the stream is on. A source on another device makes this stream depend on that device's work: a sticky
   * fault there reaches this stream's waits as with {@link Stream.waitEvent}. Every other operand must be on the
   * stream's device.
   * Wraps: cuMemcpyDtoDAsync, cuMemcpyPeerAsync (between devices), cuMemcpyHtoDAsync, cuMemcpyDtoHAsync.
   * Thread-safety: any thread that has the operands. */
  copy(dst: CopyOperand, src: CopyOperand, options?: CopyOptions): void {
    copyOnStream(this, dst, src, options);
  }

  /** Queues many copies at once and returns at once: each entry is what {@link Stream.copy} takes
   * (`{ dst, src, byteLength?, dstOffset?, srcOffset? }`), checked as it checks them, every entry before anything is
   * queued. The batch runs in this stream's order as a whole, but its copies run in any order and at once, so no
   * copy may write bytes that another copy of the batch reads or writes (ERR_INVALID_ARG_VALUE naming both entries);
   * queue dependent copies separately.
   *
   * How the copies travel (the same bytes every way):
   * - 2 to 128 copies of at most 64 KiB each, every one between device memory of this stream's device and device or
   *   pinned host memory (a `PinnedBuffer`, or registered memory where the device may address it by its host pointer):
   *   one launch of the library's copy kernel, which moves them all together on the stream's multiprocessors (the
   *   copy engines take microseconds per copy, however small; on an H200 64 pieces of 4 KiB land about 9 times as
   *   fast). The kernel is compiled by the driver on the first such batch on each device (a millisecond or so); where
   *   it cannot be (a GPU older than compute capability 7.5), or its launch is refused without a sticky fault, the
   *   copies go as below.
   * - Otherwise, copies between a `DeviceBuffer` and a `DeviceBuffer`, pinned memory or a pageable host source of this
   *   device: one cuMemcpyBatchAsync (CUDA 12.8 and later), which reads a pageable source before the call returns, so
   *   the bytes are those of the call (as `copy()` takes them) without the library's staging.
   * - The others (pageable destinations, managed memory, copies between devices), and every copy where neither can be
   *   used (a driver older than CUDA 12.8 or the legacy default stream, for the driver's batch; a stream capturing a
   *   graph), one by one after the batch, as `copy()` queues them.
   * @throws as {@link Stream.copy}, naming the entry (`"copies[3].dst"`); `TypeError` ERR_INVALID_ARG_TYPE when
   * `copies` is not an array of objects; {@link CudaError} naming cuMemcpyBatchAsync, with the number of copies and
   * their bytes, when the driver refuses the batch (nothing of it was queued), or cuLaunchKernel and the copy kernel
   * when its launch meets a sticky fault of the device.
   * Wraps: cuLaunchKernel of the library's copy kernel (cuModuleLoadDataEx once per device); cuMemcpyBatchAsync
   * (CU_MEMCPY_SRC_ACCESS_ORDER_STREAM; DURING_API_CALL for pageable sources).
   * Thread-safety: any thread that has the operands.
   * @example
   * ```ts
   * stream.copyBatch(pieces.map((piece, i) => ({ dst: device, src: piece, dstOffset: i * 4096 })));
   * ```
   */
  copyBatch(copies: readonly BatchCopy[]): void {
    copyBatchOnStream(this, copies);
  }

  /** Queues a copy of a rectangle of bytes, `options.height` rows of `options.widthBytes` bytes, and returns at
   * once. On each side, row `y` starts at `offset + y * pitch`: pitched device memory ({@link DeviceBuffer.allocPitched},
   * whose `pitch` is the default) or rows of a larger host image. One side must be a `DeviceBuffer`; the other a
   * `DeviceBuffer`, or pinned host memory (a `PinnedBuffer`, a view of one, or a buffer registered with
   * `HostRegistration`, copied in place, read and written when the copy runs). Pageable host memory is refused.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for other operands or options; ERR_INVALID_ARG_VALUE for pageable or
   * managed memory, two host operands, a buffer of another device or overlapping device rows; `RangeError`
   * ERR_OUT_OF_RANGE for a pitch below the width or rows past an operand's end (naming how many fit);
   * {@link DestroyedError} for a freed buffer or a destroyed stream; {@link CaptureError} while the stream captures
   * (copy before or after the capture); {@link CudaError} naming cuMemcpy2DAsync when the driver refuses.
   * Wraps: cuMemcpy2DAsync. Thread-safety: any thread that has the operands.
   * @example
   * ```ts
   * // The 64 × 32 pixel tile at (x, y) of a 4-byte-per-pixel image in pinned memory, into a pitched buffer.
   * stream.copy2D(tile, image, { widthBytes: 64 * 4, height: 32, srcPitch: imageWidth * 4, srcOffset: (y * imageWidth + x) * 4 });
   * ```
   */
  copy2D(dst: DeviceBuffer | PinnedBuffer | ArrayBufferLike | ArrayBufferView, src: DeviceBuffer | PinnedBuffer | ArrayBufferLike | ArrayBufferView, options: Copy2DOptions): void {
    copy2DOnStream(this, dst, src, options);
  }

  /** Queues a fill of `dst` with `value` from `options.offset` for `options.byteLength` bytes (default: the rest),
   * and returns at once. With `options.type` (`'f32'`, `'i32'`, `'u32'`, `'u8'`) `value` is a number of that type
   * (`stream.fill(buffer, 1.5, { type: 'f32' })`); without it, the unsigned bit pattern of one `elementSize` element
   * (1.0f is 0x3F800000).
   * @throws `TypeError` for a non-DeviceBuffer, `elementSize` other than 1 or 4, an unknown `type`, or `type` beside
   * `elementSize`; `RangeError` ERR_OUT_OF_RANGE for a value that does not fit one element or a range outside the
   * buffer or not a multiple of the element size;
   * {@link DestroyedError} for a freed buffer or a destroyed stream. Wraps: cuMemsetD8Async, cuMemsetD32Async. */
  fill(dst: DeviceBuffer, value: number, options?: FillOptions): void {
    fillOnStream(this, dst, value, options);
  }

  /** Records `event` (or a new event, timing off) on this stream and returns it; the event completes when the work
   * queued so far is done. Wraps: cuEventRecord. Lifetime: a new event is owned by the caller.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE when `event` is given and is not an {@link Event}; as
   * {@link Event.record} otherwise (a new event is destroyed again when the record fails). */
  recordEvent(event?: Event): Event {
    if (event !== undefined && !(event instanceof Event)) throw invalidType('event', 'an Event', event);
    this.#use('recordEvent');
    const recorded = event ?? Event.create({ device: this.device });
    try {
      recorded.record(this);
    } catch (error) {
      if (event === undefined) recorded.destroy();
      throw renameDestroyed(error, 'stream.recordEvent');
    }
    return recorded;
  }

  /** Begins capturing a graph: until {@link Stream.endCapture}, work queued on this stream (copies, fills, kernel
   * launches, and `waitEvent`/`waitStream`, which fork other streams into the capture and join them back) is recorded,
   * not run. Operations that would wait for the recorded work or run work outside the graph throw
   * {@link CaptureError} and leave the capture usable: `query()`, `synchronize()`, `synchronizeSync()`,
   * `DeviceBuffer.alloc`/`free` on this stream, a copy of pageable host memory (use a `PinnedBuffer`), and waits on
   * events recorded during the capture. Prefer {@link Graph.capture}, which always ends the capture.
   * Allowed on owned streams, borrowed per-thread or foreign streams, and a lease's stream (`pool.run`,
   * `pool.acquire`); refused on a stream from `pool.getStream()`, which other tasks may be using at the same time.
   * A capture still open when this wrapper is destroyed, or when the lease whose stream it is ends, is ended and its
   * graph discarded, so a pool stream never goes back to its pool capturing. A stream made without `nonBlocking`
   * synchronizes implicitly with the legacy default stream: work on the legacy stream from any thread while such a
   * stream captures fails (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) and invalidates the capture, so capture on a
   * `nonBlocking` stream when other threads or tasks use `Stream.legacy()`.
   * @throws {@link CaptureError} for a `getStream()` stream, the legacy default stream, or a stream already
   * capturing; `TypeError` ERR_INVALID_ARG_VALUE for an unknown mode; {@link DestroyedError} after destroy;
   * {@link CudaError} when the driver refuses. Wraps: cuStreamBeginCapture. Thread-safety: end the capture in the
   * thread that began it. Lifetime: a capture still open when this object is collected, or when the thread that began
   * it exits, is ended and its graph discarded. */
  beginCapture(options?: CaptureOptions): void {
    const o = validateOptions<CaptureOptions>(options, 'options', 'beginCapture', ['mode']);
    const mode = o.mode ?? 'thread-local';
    if (!Object.hasOwn(CAPTURE_MODES, mode))
      throw invalidValue('options.mode', `must be 'global', 'thread-local' or 'relaxed'; received ${typeof mode === 'string' ? JSON.stringify(mode) : String(mode)}.`);
    const ref = this.#use('beginCapture');
    if (this.#kind === 'pool')
      throw new CaptureError('stream.beginCapture()', this.id, 'this stream came from pool.getStream() and other tasks may be queuing work on it, which would land in the graph; lease a stream instead (pool.run() or pool.acquire()) or use Stream.create()');
    if (this.#facts()[0] === LEGACY)
      throw new CaptureError('stream.beginCapture()', this.id, 'the legacy default stream cannot capture; use Stream.create() or a leased pool stream');
    beginCapture(ref, this.id, mode, this.#kind === 'owned' || this.#kind === 'borrowed' ? this : undefined);
  }

  /** Ends the capture begun on this stream with {@link Stream.beginCapture} and returns the recorded work as a
   * {@link Graph}, which keeps alive the buffers, pinned memory and kernels it uses. Streams forked into the capture
   * must have been joined back (`this.waitStream(other)`) first.
   * @throws {@link CaptureError} when this stream is not capturing, or joined a capture begun on another stream, or
   * the capture was begun in another thread; {@link CudaError} CUDA_ERROR_STREAM_CAPTURE_INVALIDATED when the
   * driver invalidated the capture, CUDA_ERROR_STREAM_CAPTURE_UNJOINED for a forked stream not joined back (the
   * capture is over either way). Wraps: cuStreamEndCapture. Lifetime: the caller owns the graph. */
  endCapture(): Graph {
    const ref = this.#use('endCapture');
    const { graph, record } = endCapture(ref, this.id);
    return graphs.fromCapture(graph, record, this.device);
  }

  /** True while the stream is capturing a graph (begun here, or joined by waiting on a capturing stream), in any
   * thread; also while an invalidated capture waits for `endCapture()`. Wraps: cuStreamIsCapturing (asked only
   * when a capture may be open). */
  get capturing(): boolean {
    return captureStatus(this.#use('capturing')) !== 0;
  }

  /** True after `destroy()` (or, for a lease's stream, after the lease ended); for a `Stream.fromHandle()` wrapper of
   * a stream this library owns, also once that stream was destroyed (by any thread, by its pool's destroy, or
   * collected), when this wrapper's calls throw {@link DestroyedError}. Never throws. */
  get destroyed(): boolean {
    if (this.#retired !== undefined) return true;
    // Only a lent wrapper asks the native layer: the per-thread and legacy streams are read on every currentStream().
    return this.#lent && !native.streamLenderAlive(this.#ref);
  }

  /** Owned: destroys the stream (cuStreamDestroy); work already queued still completes, and pending
   * `synchronize()` promises settle when it does. Borrowed: retires this wrapper only. Idempotent; never throws
   * after a device fault. @throws `TypeError` for a stream of a `StreamPool` (pool streams die with their pool). */
  destroy(): void {
    if ((this.#kind === 'pool' || this.#kind === 'lease') && this.#retired === undefined)
      throw invalidValue('stream', 'belongs to a StreamPool; pool streams are destroyed with their pool (pool.destroy()).');
    if (this.#retired !== undefined) return;
    this.#retired = 'was destroyed';
    abandonCapture(this.#ref);
    native.streamDestroy(this.#ref);
    released(this);
    // The native layer released the ref: the facts a later read needs come from what the destroy left.
    if (this.#info === undefined && (factWords[2]! | factWords[3]!) !== 0) {
      const w = factWords;
      this.#left = [w[0]!, w[1]!, w[2]!, w[3]!, w[4]!, w[5]!, w[6]!, w[7]!];
    }
  }

  /** Same as {@link Stream.destroy}. */
  [Symbol.dispose](): void {
    this.destroy();
  }

  /** Waits for the queued work as `synchronize()` does (never blocking the event loop), then destroys the stream as
   * `destroy()` does, also when that work failed; rejects with that work's {@link CudaError}. Idempotent.
   * @throws `TypeError` for a stream of a `StreamPool`, before waiting. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#retired !== undefined) return;
    if (this.#kind === 'pool') return this.destroy(); // throws: pool streams die with their pool
    try {
      await this.synchronize();
    } finally {
      this.destroy();
    }
  }
}

function borrowedOnce(cache: Map<number, Stream>, handle: bigint, device: Device): Stream {
  let stream = cache.get(device.ordinal);
  if (!stream || stream.destroyed) {
    stream = lifetimes.wrap(native.streamBorrow(device.ordinal, handle), device, 'borrowed');
    cache.set(device.ordinal, stream);
  }
  return stream;
}

/** The native ref of a live stream, for the other concept files. @throws {@link DestroyedError}. @internal */
export function streamRef(stream: Stream, method: string): NativeRef {
  if (!streams.is(stream)) throw invalidType('stream', 'a Stream', stream);  // e.g. currentStream() set to an imitation
  return streams.ref(stream, method);
}

/** The facts that streamDestroy leaves (handle, id, priority as int64, flags with the partition + 1 in the high word),
 * from their 32-bit words, low word first. */
function infoFromWords(w: number[]): StreamInfo {
  const u64 = (low: number, high: number): bigint => (BigInt(high) << 32n) | BigInt(low);
  return [u64(w[0]!, w[1]!), u64(w[2]!, w[3]!), w[4]! | 0, (w[6]! & 1) !== 0, w[7]! - 1];
}

/** Wraps a native stream ref (pool streams, lease views); `owner` is kept alive as long as the wrapper. @internal */
export function wrapStream(ref: NativeRef, device: Device, kind: Kind, info?: StreamInfo, owner?: object): Stream {
  return lifetimes.wrap(ref, device, kind, info, owner);
}

/** The stream's handle, read by the library itself: unlike `stream.handle`, it does not mark the handle as shared
 * with code outside the library. @internal */
export function streamHandle(stream: Stream): bigint {
  return streams.handle(stream);
}

/** True once any method was called through this wrapper (it may have queued work). @internal */
export function wasUsed(stream: Stream): boolean {
  return lifetimes.used(stream);
}

/** Retires a wrapper without touching the driver stream (a lease's view after release). @internal */
export function retire(stream: Stream, why: string): void {
  lifetimes.retire(stream, why);
}
