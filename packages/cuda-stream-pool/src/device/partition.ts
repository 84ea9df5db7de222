// Partitions of a device's multiprocessors (green contexts): the split, made once per device and process, and the
// DevicePartition objects that pools and streams are created in. Mechanism and the driver's rules: Note [partitions]
// in device/partition.cc.
import { native, type PartitionSplit } from '../binding/binding.js';
import { UnsupportedError } from '../binding/errors.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidState, invalidType, invalidValue, lockFields, outOfRange, validateInteger } from '../internal/validate.js';
import type { Device } from './device.js';

/** A partition's work-queue configuration (CUdevWorkqueueConfigResource, CUDA 13.1): see
 * {@link DevicePartition.workQueues}. */
export interface WorkQueueConfiguration {
  /** The number of stream-ordered workloads the partition is expected to run at once (by default the device's
   * connection count, `CUDA_DEVICE_MAX_CONNECTIONS`); more may run, without the promise of queues of their own. */
  readonly concurrencyLimit: number;
  /** True when the partition's work keeps to hardware queues of its own where it can
   * (CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED); false when it shares every queue of the device with every context
   * (CU_WORKQUEUE_SCOPE_DEVICE_CTX, the driver's default, which the library keeps). */
  readonly balanced: boolean;
}

/** Every DevicePartition made by the library: the brand that receivers are checked against. */
const instances = new WeakSet<object>();

/** A share of a device's streaming multiprocessors (a green context): kernels queued on a stream created in it
 * ({@link Stream.create} or `new StreamPool()` with `partition`) run only on its multiprocessors, so work on other
 * partitions cannot take them. Made by {@link Device.partition}, once per device and process; every thread sees the
 * same partitions (`device.partitions`). Everything but where kernels run is as on the whole device: memory, events,
 * copies, graphs, leases, workers, and `device.synchronize()`, which waits for every partition's work.
 * Copies are not partitioned: the copy engines serve every partition. */
export class DevicePartition {
  /** The device it is a share of. */
  readonly device: Device;
  /** Its place in the device's split, from 0; the multiprocessors left over, if any, are the last partition. */
  readonly index: number;
  /** The multiprocessors it got: what was asked for, rounded up by the driver to its granularity (on an H100/H200
   * multiples of 8), as cuGreenCtxGetDevResource reports them. */
  readonly multiprocessorCount: number;
  /** The multiprocessors asked for, or `undefined` for the partition of those left over. */
  readonly requestedMultiprocessors: number | undefined;
  /** How its work reaches the device's hardware work queues, as the driver configured the partition (CUDA 13.1 and
   * later); `undefined` with an older driver, or where the driver does not say. Read once, at the split
   * (cuGreenCtxGetDevResource with CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG). A frozen object. */
  readonly workQueues: WorkQueueConfiguration | undefined;

  /** @internal */
  constructor(token: symbol, device: Device, index: number, multiprocessorCount: number, requested: number | undefined, workQueues: PartitionSplit['workQueues'][number]) {
    checkConstruction(token, 'DevicePartition', 'device.partition(multiprocessors)');
    this.device = device;
    this.index = index;
    this.multiprocessorCount = multiprocessorCount;
    this.requestedMultiprocessors = requested;
    this.workQueues = workQueues ? Object.freeze({ concurrencyLimit: workQueues.concurrencyLimit, balanced: workQueues.balanced }) : undefined;
    lockFields(this, ['device', 'index', 'multiprocessorCount', 'requestedMultiprocessors', 'workQueues']);
    instances.add(this);
  }

  static {
    guardReceivers(DevicePartition, (value) => instances.has(value));
  }
}

/** This thread's partitions of each device, once the split is known here. */
const known = new Map<number, readonly DevicePartition[]>();

function build(device: Device, split: PartitionSplit): readonly DevicePartition[] {
  const partitions = Object.freeze(
    split.counts.map((count, i) => new DevicePartition(internalConstruction, device, i, count, split.requested[i] === 0 ? undefined : split.requested[i], split.workQueues[i] ?? null)),
  );
  known.set(device.ordinal, partitions);
  return partitions;
}

/** The device's partitions, made by any thread, or `undefined` before the split. @internal */
export function partitionsOf(device: Device): readonly DevicePartition[] | undefined {
  const cached = known.get(device.ordinal);
  if (cached) return cached;
  const info = native.partitionInfo(device.ordinal);
  return info.split ? build(device, info.split) : undefined;
}

/** Splits `device` as {@link Device.partition} documents. @internal */
export function partitionDevice(device: Device, multiprocessors: unknown): readonly DevicePartition[] {
  if (!Array.isArray(multiprocessors) || multiprocessors.length === 0)
    throw invalidType('multiprocessors', 'a non-empty array of multiprocessor counts, one per partition', multiprocessors);
  const asked = multiprocessors.map((count, i) => validateInteger(count, `multiprocessors[${i}]`, 1, device.multiprocessorCount));
  // A split this thread knows is answered without the driver; one made by another thread is read once.
  const cached = known.get(device.ordinal);
  const info = cached ? undefined : native.partitionInfo(device.ordinal);
  if (info?.reason !== undefined) throw new UnsupportedError('partitions', device.ordinal, `${info.reason}.`);
  const existing = cached ?? (info!.split ? build(device, info!.split) : undefined);
  if (existing) {
    const same = existing.flatMap((p) => (p.requestedMultiprocessors === undefined ? [] : [p.requestedMultiprocessors]));
    if (same.length !== asked.length || same.some((r, i) => r !== asked[i]))
      throw invalidState(`device ${device.ordinal} was split already into partitions of [${existing.map((p) => p.multiprocessorCount).join(', ')}] multiprocessors (asked [${same.join(', ')}]), and "multiprocessors" asks for [${asked.join(', ')}]; a device is split once per process so that partitions never overlap. Use device.partitions.`);
    return existing;
  }
  // The driver's rounding: at least `minimum`, in steps of `alignment`.
  const { minimum, alignment, total: available } = info!;
  const rounded = asked.map((count) => Math.max(minimum!, Math.ceil(count / alignment!) * alignment!));
  const total = rounded.reduce((a, b) => a + b, 0);
  if (total > available!)
    throw outOfRange('multiprocessors', `partitions that fit the device's ${available} multiprocessors once each is rounded up to at least ${minimum} and a multiple of ${alignment} ([${asked.join(', ')}] rounds up to [${rounded.join(', ')}], ${total} in all)`, multiprocessors);
  return build(device, native.partitionCreate(device.ordinal, asked));
}

/** The device of `value` when it is a DevicePartition, else `undefined` (the option is checked later). @internal */
export function partitionDeviceOf(value: unknown): Device | undefined {
  return typeof value === 'object' && value !== null && instances.has(value) ? (value as DevicePartition).device : undefined;
}

/** The partition option of `Stream.create()` and `new StreamPool()`: its index, checked against `nonBlocking` and a
 * `device` given beside it; -1 without one. @internal */
export function partitionIndex(partition: unknown, device: Device | undefined, nonBlocking: boolean | undefined): number {
  if (partition === undefined) return -1;
  if (partitionDeviceOf(partition) === undefined) throw invalidType('options.partition', 'a DevicePartition (from device.partition())', partition);
  const { device: own, index } = partition as DevicePartition;
  if (device !== undefined && device !== own)
    throw invalidValue('options.device', `is device ${device.ordinal}, but "options.partition" is a partition of device ${own.ordinal}; give one of the two.`);
  if (nonBlocking === false)
    throw invalidValue('options.nonBlocking', 'must not be false with "options.partition": the streams of a partition are non-blocking (the driver refuses others).');
  return index;
}
