// A device's default memory pool, which DeviceBuffer.alloc allocates from (stream-ordered allocation).
// Reached as device.memoryPool.
import { native } from '../binding/binding.js';
import type { Device } from '../device/device.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, lockFields, outOfRange } from '../internal/validate.js';

/** Every MemoryPool made by the library: the brand that receivers are checked against. */
const instances = new WeakSet<object>();

/** The device's default memory pool (cuDeviceGetDefaultMemPool): stream-ordered allocations come from it and go back
 * to it when freed. It is shared by everything in the process that allocates from the default pool (other libraries
 * using cudaMallocAsync too), so its counters are process-wide, not only this library's buffers (for those, see
 * `cuda.liveObjects().deviceBytes`). Each read asks the driver (cuMemPoolGetAttribute).
 *
 * The release threshold is how many reserved but unused bytes the pool keeps when a stream, event or context
 * synchronizes; the driver's default 0 returns them to the system at every synchronization, so a workload that
 * frees and allocates again may set it higher to keep the memory (an allocation from reserved memory is cheaper).
 *
 * Thread-safety: any thread; the pool is per device and process-wide. Lifetime: borrowed from the device. */
export class MemoryPool {
  /** The device whose default pool this is. */
  readonly device: Device;

  /** @internal (from `device.memoryPool`) */
  constructor(token: symbol, device: Device) {
    checkConstruction(token, 'MemoryPool', 'device.memoryPool');
    this.device = device;
    lockFields(this, ['device']);
    instances.add(this);
  }

  static {
    guardReceivers(MemoryPool, (value) => instances.has(value));
  }

  /** Bytes of the pool currently allocated (CU_MEMPOOL_ATTR_USED_MEM_CURRENT). A free counts once the stream
   * reaches it. */
  get usedBytes(): number {
    return native.memoryPoolInfo(this.device.ordinal).usedBytes;
  }

  /** Bytes of device memory the pool holds, allocated or kept for reuse (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT). */
  get reservedBytes(): number {
    return native.memoryPoolInfo(this.device.ordinal).reservedBytes;
  }

  /** Reserved bytes the pool keeps across synchronizations (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD); `Infinity` keeps
   * everything. Setting it takes a non-negative safe integer or `Infinity`.
   * @defaultValue 0 (the driver's default)
   * @throws `TypeError` ERR_INVALID_ARG_TYPE / `RangeError` ERR_OUT_OF_RANGE when set to anything else. */
  get releaseThresholdBytes(): number {
    return native.memoryPoolInfo(this.device.ordinal).releaseThresholdBytes;
  }

  /** Sets the release threshold of the device's default memory pool (cuMemPoolSetAttribute with
   * CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), process-wide: every thread's view of the device sees the new value.
   * @param bytes - reserved bytes to keep, a safe integer from 0 to `Number.MAX_SAFE_INTEGER`, or `Infinity` for no
   * limit (the driver's UINT64_MAX).
   * @throws `TypeError` ERR_INVALID_ARG_TYPE when `bytes` is not a number; `RangeError` ERR_OUT_OF_RANGE when it
   * is negative, fractional, NaN or above `Number.MAX_SAFE_INTEGER` without being `Infinity`. */
  set releaseThresholdBytes(bytes: number) {
    if (typeof bytes !== 'number') throw invalidType('releaseThresholdBytes', 'a number of bytes', bytes);
    if (bytes !== Infinity && !(Number.isSafeInteger(bytes) && bytes >= 0))
      throw outOfRange('releaseThresholdBytes', `an integer from 0 to ${Number.MAX_SAFE_INTEGER}, or Infinity`, bytes);
    native.memoryPoolSetReleaseThreshold(this.device.ordinal, bytes);
  }

  /** Releases unused reserved memory to the system until the pool holds fewer than `bytesToKeep` reserved bytes, or
   * nothing more can be released; allocated memory is never released. Returns at once. A stream-ordered free counts
   * as outstanding until a synchronizing driver call has observed it (`stream.synchronizeSync()`,
   * `event.synchronizeSync()`); the non-blocking `synchronize()` is not one, so its frees may stay reserved.
   * @param bytesToKeep - an integer from 0 to `Number.MAX_SAFE_INTEGER`. @defaultValue 0
   * @throws `RangeError` ERR_OUT_OF_RANGE for a bad size. Wraps: cuMemPoolTrimTo. */
  trim(bytesToKeep = 0): void {
    if (typeof bytesToKeep !== 'number') throw invalidType('bytesToKeep', 'an integer', bytesToKeep);
    if (!Number.isSafeInteger(bytesToKeep) || bytesToKeep < 0)
      throw outOfRange('bytesToKeep', `an integer from 0 to ${Number.MAX_SAFE_INTEGER}`, bytesToKeep);
    native.memoryPoolTrim(this.device.ordinal, bytesToKeep);
  }
}

const pools = new WeakMap<Device, MemoryPool>();

/** The device's MemoryPool object, the same each time. @internal */
export function memoryPoolOf(device: Device): MemoryPool {
  let pool = pools.get(device);
  if (!pool) {
    pool = new MemoryPool(internalConstruction, device);
    pools.set(device, pool);
  }
  return pool;
}
