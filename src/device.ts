// A CUDA device and its primary context (retained once per process, made current by every native entry point).
import { native } from './native.js';
import { driverState, requireCuda } from './cuda.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, outOfRange } from './validate.js';
import { memoryPoolOf, type MemoryPool } from './memory-pool.js';

/** A compute capability such as `{ major: 9, minor: 0 }` for an H100/H200. */
export interface ComputeCapability {
  major: number;
  minor: number;
}

/** Stream priorities the device supports. Lower numbers are higher priorities: `greatest` ≤ `least`
 * (for example -5 and 0). */
export interface StreamPriorityRange {
  greatest: number;
  least: number;
}

const devices = new Map<number, Device>();

/** Every Device made by the library: the brand that receivers are checked against. */
const instances = new WeakSet<object>();

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
    instances.add(this);
  }

  static {
    guardReceivers(Device, (value) => instances.has(value));
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
    if (typeof ordinal !== 'number') throw invalidType('ordinal', 'an integer', ordinal);
    const known = devices.get(ordinal);
    if (known) return known;
    // The shape is checked before the driver, so a bad ordinal is the same error with or without a GPU.
    if (!Number.isInteger(ordinal) || ordinal < 0) throw outOfRange('ordinal', 'a non-negative integer (a device ordinal)', ordinal);
    requireCuda();
    const count = Device.count();
    if (!Number.isInteger(ordinal) || ordinal < 0 || ordinal >= count)
      throw outOfRange('ordinal', `an integer from 0 to ${count - 1} (the visible devices)`, ordinal);
    const device = new Device(internalConstruction, ordinal);
    devices.set(ordinal, device);
    return device;
  }
}

/** Resolves a `device` option (`Device | number`, default 0). Throws as {@link Device.get}. */
export function resolveDevice(device: Device | number | undefined, name = 'options.device'): Device {
  if (device === undefined) return Device.get(0);
  if (device instanceof Device) return device;
  if (typeof device !== 'number') throw invalidType(name, 'a Device or a device ordinal (number)', device);
  return Device.get(device);
}
