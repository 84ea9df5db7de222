// A CUDA device and its primary context (retained once per process, made current by every native entry point).
import { landPending, waitError } from '../stream/completion.js';
import { native } from '../binding/binding.js';
import { driverState, requireCuda } from '../binding/cuda.js';
import { whenAborted } from '../internal/abort.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, invalidValue, lockFields, outOfRange, validateOptions, validateSignal } from '../internal/validate.js';
import { memoryPoolOf, type MemoryPool } from '../memory/memory-pool.js';
import { partitionDevice, partitionsOf, type DevicePartition } from './partition.js';

/** A compute capability such as `{ major: 9, minor: 0 }` for an H100/H200. */
export interface ComputeCapability {
  /** The major revision, for example 9 for Hopper (CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR). */
  major: number;
  /** The minor revision, for example 0 for sm_90 (CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR). */
  minor: number;
}

/** Stream priorities the device supports. Lower numbers are higher priorities: `greatest` ≤ `least`
 * (for example -5 and 0). */
export interface StreamPriorityRange {
  /** The highest priority a stream can have: the smallest number, for example -5 (the `greatestPriority` output
   * of cuCtxGetStreamPriorityRange). */
  greatest: number;
  /** The lowest priority, which is also the default priority of a stream: the largest number, usually 0 (the
   * `leastPriority` output of cuCtxGetStreamPriorityRange). */
  least: number;
}

/** Free and total device memory, in bytes, as {@link Device.memoryInfo} reports it. */
export interface DeviceMemoryInfo {
  /** Bytes the driver can still allocate on the device, across every process using it. */
  freeBytes: number;
  /** The device's memory in bytes. */
  totalBytes: number;
}

/** Options for {@link Device.synchronize}. */
export interface DeviceSynchronizeOptions {
  /** Aborts the wait (not the GPU work); the promise rejects with `signal.reason`. */
  signal?: AbortSignal;
}

const devices = new Map<number, Device>();

/** Every Device made by the library: the brand that receivers are checked against. */
const instances = new WeakSet<object>();

// Device's private constructor, for deviceOf() below.
let makeDevice: (ordinal: number) => Device;

/** A CUDA device, one object per ordinal per thread. Borrows the device's primary context, which the library
 * retains once per process and never releases (so streams, memory and modules of every thread share it).
 * Properties are read once from the driver (cuDeviceGetAttribute) when the device is first looked up. */
export class Device {
  /** The device ordinal as the driver numbers devices (after CUDA_VISIBLE_DEVICES). */
  readonly ordinal: number;
  /** The device name, for example `'NVIDIA H200'` (cuDeviceGetName). */
  readonly name: string;
  /** The compute capability (CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR). */
  readonly computeCapability: Readonly<ComputeCapability>;
  /** Streaming multiprocessors (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT). */
  readonly multiprocessorCount: number;
  /** Total device memory in bytes (cuDeviceTotalMem). */
  readonly totalMemoryBytes: number;
  /** Copy engines that can run at once with kernels (CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT). */
  readonly asyncEngineCount: number;
  /** The stream priorities the device supports (cuCtxGetStreamPriorityRange); lower number = higher priority. */
  readonly streamPriorityRange: Readonly<StreamPriorityRange>;
  /** Whether stream-ordered allocation (cuMemAllocAsync) is supported (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED). */
  readonly memoryPoolsSupported: boolean;
  /** Whether kernels may be launched cooperatively, every block resident at once (the `cooperative` option of
   * `kernel.launch()`; CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH). */
  readonly cooperativeLaunch: boolean;
  /** Whether kernels may be launched in thread-block clusters (the `cluster` option of `kernel.launch()`;
   * CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, compute capability 9.0 and later). */
  readonly clusterLaunch: boolean;
  /** The alignment of the rows of pitched memory, in bytes (CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT): the pitch
   * of `DeviceBuffer.allocPitched()` is a multiple of it. */
  readonly pitchAlignmentBytes: number;

  private constructor(token: symbol, ordinal: number) {
    checkConstruction(token, 'Device', 'Device.get(ordinal)');
    const info = native.deviceInfo(ordinal);
    this.ordinal = ordinal;
    this.name = info.name;
    this.computeCapability = Object.freeze({ major: info.major, minor: info.minor });
    this.multiprocessorCount = info.multiprocessorCount;
    this.totalMemoryBytes = info.totalMemoryBytes;
    this.asyncEngineCount = info.asyncEngineCount;
    this.streamPriorityRange = Object.freeze({ greatest: info.greatestPriority, least: info.leastPriority });
    this.memoryPoolsSupported = info.memoryPoolsSupported;
    this.cooperativeLaunch = info.cooperativeLaunch;
    this.clusterLaunch = info.clusterLaunch;
    this.pitchAlignmentBytes = info.pitchAlignment;
    lockFields(this, ['pitchAlignmentBytes', 'ordinal', 'name', 'computeCapability', 'multiprocessorCount', 'totalMemoryBytes', 'asyncEngineCount', 'streamPriorityRange', 'memoryPoolsSupported', 'cooperativeLaunch', 'clusterLaunch']);
    instances.add(this);
  }

  static {
    guardReceivers(Device, (value) => instances.has(value));
    makeDevice = (ordinal) => new Device(internalConstruction, ordinal);
  }

  /** Splits the device's streaming multiprocessors into partitions that never overlap, one per entry of
   * `multiprocessors` (each rounded up by the driver to its granularity: a multiple of 8 on an H100/H200), plus one
   * more for those left over, if any; returns them in that order. Streams and pools created with
   * `{ partition }` run their kernels only on its multiprocessors, so a latency-sensitive load on one partition keeps
   * its share of the GPU while a batch load fills another. A device is split once per process: a later call, in any
   * thread, with the same counts returns the same partitions, and `device.partitions` reads them.
   * @param multiprocessors - one integer from 1 to `multiprocessorCount` per partition; rounded up, they must fit
   * the device together (on a 132-multiprocessor H200 a single partition may ask for at most 128).
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for an empty or non-array `multiprocessors`; `RangeError`
   * ERR_OUT_OF_RANGE when a count is out of range or the rounded counts do not fit the device; `TypeError`
   * ERR_INVALID_STATE when the device was split already with other counts; {@link UnsupportedError} where the
   * driver has no green contexts with streams (before CUDA 12.5) or the device cannot be partitioned;
   * {@link CudaError} when the driver refuses.
   * Wraps: cuDeviceGetDevResource, cuDevSmResourceSplitByCount, cuDevResourceGenerateDesc, cuGreenCtxCreate,
   * cuGreenCtxGetDevResource. Thread-safety: any thread; the split is process-wide.
   * @example
   * ```ts
   * const [latency, batch] = Device.get(0).partition([16]); // 16 multiprocessors, and the rest
   * const interactive = new StreamPool({ partition: latency, size: 4 });
   * const bulk = new StreamPool({ partition: batch });
   * ```
   */
  partition(multiprocessors: readonly number[]): readonly DevicePartition[] {
    return partitionDevice(this, multiprocessors);
  }

  /** The device's partitions once {@link Device.partition} has split it (in any thread), else `undefined`. */
  get partitions(): readonly DevicePartition[] | undefined {
    return partitionsOf(this);
  }

  /** The device's default memory pool, which `DeviceBuffer.alloc` allocates from: `usedBytes`, `reservedBytes`,
   * `releaseThresholdBytes` (settable) and `trim(bytesToKeep)`. The same object on each read. See {@link MemoryPool}. */
  get memoryPool(): MemoryPool {
    return memoryPoolOf(this);
  }

  /** False once a sticky error (illegal address, launch failure, ...) was seen on this device by any thread of
   * the process: its context is unusable, every wait on it rejects, frees and destroys stop throwing. */
  get healthy(): boolean {
    return native.deviceFault(this.ordinal) === 0;
  }

  /** Resolves once all work queued so far on the device's primary context is done: every stream of every thread and
   * of any other library that uses the primary context (the CUDA runtime does). Never blocks the event loop or a
   * libuv pool thread: a native thread per device waits in cuCtxSynchronize, and one such wait serves every
   * request queued before it began. Prefer `stream.synchronize()` for your own work: a device-wide wait also waits
   * for unrelated streams. Copies into JS arrays that this thread queued have landed when it resolves; those of other
   * threads (workers) land on their own thread, the only one that may write their arrays, at its next wait.
   * @throws (rejects) {@link CudaError} when queued work failed (a sticky fault: `CUDA_ERROR_ILLEGAL_ADDRESS`, ...), or
   * with code `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` while a graph capture is open on the device in any thread (the
   * driver is not called, so the capture is not invalidated); `signal.reason` when `options.signal` aborts; `TypeError` ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE (thrown)
   * for bad options. Wraps: cuCtxSynchronize. Thread-safety: any thread or worker. */
  synchronize(options?: DeviceSynchronizeOptions): Promise<void> {
    const o = validateOptions<DeviceSynchronizeOptions>(options, 'options', 'synchronize', ['signal']);
    const signal = validateSignal(o.signal, 'options.signal');
    if (signal?.aborted) return Promise.reject(signal.reason);
    let done: Promise<void>;
    try {
      // This thread's copies into JS arrays land before the wait settles (another thread's land on that thread).
      done = native.deviceSynchronize(this.ordinal).then((status) => {
        if (status !== 0) throw waitError(status, 'cuCtxSynchronize', `device ${this.ordinal}`);
        landPending();
      });
    } catch (error) {
      return Promise.reject(error);
    }
    if (!signal) return done;
    return new Promise<void>((resolve, reject) => {
      const stopAbort = whenAborted(signal, () => reject(signal.reason));
      done.then(resolve, reject).finally(stopAbort);
    });
  }

  /** Blocks the calling thread, event loop included, until all work queued so far on the device's primary context is
   * done; use {@link Device.synchronize} to wait without blocking. Copies into JS arrays that this thread queued have
   * landed when it returns (another thread's land on that thread).
   * @throws {@link CudaError} when queued work failed, or with code `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` while a
   * graph capture is open on the device in any thread (without calling the driver). Wraps: cuCtxSynchronize.
   * Thread-safety: any thread. */
  synchronizeSync(): void {
    const status = native.deviceSynchronizeSync(this.ordinal);
    if (status !== 0) throw waitError(status, 'cuCtxSynchronize', `device ${this.ordinal}`);
    landPending(); // this thread's copies into JS arrays land before the work is reported done
  }

  /** Free and total memory of the device, in bytes, as the driver reports them now. Free bytes count what every
   * process has allocated, and memory that the device's memory pool holds in reserve (see {@link Device.memoryPool}
   * and `memoryPool.trim()`) is not free.
   * @throws {@link CudaError} when the driver fails. Wraps: cuMemGetInfo. Thread-safety: any thread.
   * Follows: PyTorch `torch.cuda.mem_get_info`, CuPy `Device.mem_info`. */
  memoryInfo(): DeviceMemoryInfo {
    return native.deviceMemoryInfo(this.ordinal);
  }

  /** Whether this device can read and write `other`'s memory directly (kernels through its pointers, copies over
   * NVLink or PCIe without going through the host), once {@link Device.enablePeerAccess} allows it. False where the
   * two have no peer path. Copies between the devices work either way.
   * @param other - another device, as a `Device` or an ordinal.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE for another type; `RangeError` ERR_OUT_OF_RANGE for an ordinal outside
   * the visible devices; `TypeError` ERR_INVALID_ARG_VALUE when `other` is this device; {@link CudaError} when the
   * driver fails. Wraps: cuDeviceCanAccessPeer. Thread-safety: any thread or worker.
   * Follows: PyTorch `torch.cuda.can_device_access_peer`, CuPy `runtime.deviceCanAccessPeer`. */
  canAccessPeer(other: Device | number): boolean {
    return native.deviceCanAccessPeer(this.ordinal, peerOrdinal(this, other));
  }

  /** Lets this device read and write `other`'s memory directly from now on, for the rest of the process: kernels on
   * this device may take `other`'s buffer addresses, and copies from `other` to this device skip the host. One
   * direction only: call `other.enablePeerAccess(this)` as well for the way back. Idempotent (access already enabled,
   * by this library or another one on the same primary contexts, is success). Sets both switches the driver has:
   * the context's (cuCtxEnablePeerAccess, for ordinary allocations) and the read-write access of `other`'s default
   * memory pool (cuMemPoolSetAccess, for the stream-ordered allocations of `DeviceBuffer`). Without it,
   * `stream.copy()` between the devices still works, but the driver stages the bytes through host memory.
   * @param other - another device, as a `Device` or an ordinal.
   * @throws {@link CudaError} `CUDA_ERROR_PEER_ACCESS_UNSUPPORTED` where {@link Device.canAccessPeer} is false (no peer
   * path), `CUDA_ERROR_TOO_MANY_PEERS` when the hardware has no room for another peer; `TypeError`
   * ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE for a bad `other` or this device; `RangeError` ERR_OUT_OF_RANGE for
   * an ordinal outside the visible devices. Wraps: cuDeviceCanAccessPeer, cuCtxEnablePeerAccess, cuMemPoolSetAccess.
   * Thread-safety: any thread or worker; the setting is process-wide.
   * Follows: CUDA `cudaDeviceEnablePeerAccess`; PyTorch's caching allocator enables both switches the same way.
   * @example
   * ```ts
   * const [a, b] = [Device.get(0), Device.get(1)];
   * if (a.canAccessPeer(b)) { a.enablePeerAccess(b); b.enablePeerAccess(a); }
   * ```
   */
  enablePeerAccess(other: Device | number): void {
    native.deviceEnablePeerAccess(this.ordinal, peerOrdinal(this, other));
  }

  /** Whether this device may access `other`'s `DeviceBuffer` memory directly now: `other`'s default memory
   * pool grants this device read-write access, as {@link Device.enablePeerAccess} sets it (or another library did).
   * False where `other` has no memory pools.
   * @param other - another device, as a `Device` or an ordinal.
   * @throws as {@link Device.canAccessPeer}. Wraps: cuMemPoolGetAccess. Thread-safety: any thread or worker. */
  peerAccessEnabled(other: Device | number): boolean {
    return native.devicePeerAccessEnabled(this.ordinal, peerOrdinal(this, other));
  }

  /** The number of visible CUDA devices; 0 when there is no driver or no GPU. Never throws.
   * Wraps: cuDeviceGetCount (after cuInit, on first use). */
  static count(): number {
    return driverState().deviceCount;
  }

  /** The device with this ordinal; the same object on every call in a thread.
   * @param ordinal - 0 to `Device.count() - 1`. @defaultValue 0
   * @throws {@link CudaUnavailableError} without a usable driver or GPU; `RangeError` ERR_OUT_OF_RANGE for an
   * ordinal outside the visible devices; `TypeError` ERR_INVALID_ARG_TYPE for a non-integer.
   * Wraps: cuDeviceGet, cuDevicePrimaryCtxRetain (once per process). */
  static get(ordinal = 0): Device {
    return deviceOf(ordinal, 'ordinal');
  }
}

/** This thread's Device of `ordinal`, made on first use; the errors of Device.get(), naming the argument as `name`. */
function deviceOf(ordinal: unknown, name: string): Device {
  if (typeof ordinal !== 'number') throw invalidType(name, 'an integer', ordinal);
  const known = devices.get(ordinal);
  if (known) return known;
  // The shape is checked before the driver, so a bad ordinal is the same error with or without a GPU.
  if (!Number.isInteger(ordinal) || ordinal < 0) throw outOfRange(name, 'a non-negative integer (a device ordinal)', ordinal);
  requireCuda();
  const count = Device.count();
  if (ordinal >= count) throw outOfRange(name, `an integer from 0 to ${count - 1} (the visible devices)`, ordinal);
  const device = makeDevice(ordinal === 0 ? 0 : ordinal); // -0 is device 0
  devices.set(ordinal, device);
  return device;
}

/** The ordinal of `other` for the peer methods of `device`: another visible device. */
function peerOrdinal(device: Device, other: unknown): number {
  const peer = resolveDevice(other as Device | number, 'other');
  if (peer === device)
    throw invalidValue('other', `is device ${device.ordinal}, the device itself; peer access is between two devices (a device always accesses its own memory).`);
  return peer.ordinal;
}

/** Resolves a `device` option (`Device | number`, default 0). Throws as {@link Device.get}. */
export function resolveDevice(device: Device | number | undefined, name = 'options.device'): Device {
  if (device === undefined) return Device.get(0);
  if (device instanceof Device) return device;
  if (typeof device !== 'number') throw invalidType(name, 'a Device or a device ordinal (number)', device);
  return deviceOf(device, name);
}
