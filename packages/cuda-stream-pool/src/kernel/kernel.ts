// Kernels of a loaded module: launch options and dimensions, attributes, occupancy, and the launch itself, with
// every argument checked against the kernel's signature first. Mechanism in kernel/module.cc.
import { launchArguments, launchShape, native, operands, type NativeRef } from '../binding/binding.js';
import { adopt } from '../binding/native-ref-lifetime.js';
import { privateState, register, streams } from '../internal/handles.js';
import { UnsupportedError } from '../binding/errors.js';
import type { Device } from '../device/device.js';
import { currentStream } from '../stream/scope.js';
import { Stream, streamRef } from '../stream/stream.js';
import { noteCapturedLaunch } from '../stream/capture.js';
import type { Module } from './module.js';
import type { ParamType } from './signature.js';
import { ArgumentPacker } from './argument-packer.js';
import { checkConstruction, guardReceivers, invalidType, invalidValue, lockFields, outOfRange, validateInteger, validateOptions } from '../internal/validate.js';

/** Grid or block dimensions: a number, or `[x]`, `[x, y]`, `[x, y, z]`; missing dimensions are 1. */
export type Dim3 = number | [number] | [number, number] | [number, number, number];

/** Options for {@link Kernel.launch}. */
export interface LaunchOptions {
  /** Blocks in the grid: each dimension an integer from 1; the device's limits (2**31 - 1 in x, 65535 in y and z on
   * current GPUs) are checked by the driver. */
  grid: Dim3;
  /** Threads per block: each dimension an integer from 1. The driver checks the product against the kernel's
   * `attributes.maxThreadsPerBlock` (at most 1024) and each dimension against the device (1024, 1024, 64); with
   * deferred submission the library makes the same checks at the call, with the same error. */
  block: Dim3;
  /** Dynamic shared memory per block in bytes, from 0 to 2**32 - 1; above 48 KiB only after
   * {@link Kernel.setMaxDynamicSharedMemBytes}. @defaultValue 0 */
  dynamicSharedMemBytes?: number;
  /** The stream to launch on; must be on the kernel's device. @defaultValue {@link currentStream}(kernel's device) */
  stream?: Stream;
  /** Thread-block cluster dimensions, in blocks: the blocks of one cluster run at once on neighbouring
   * multiprocessors and share their shared memory (distributed shared memory). Each grid dimension must be a multiple
   * of the cluster's, and a cluster holds at most 8 blocks (the portable size). Needs a device with
   * {@link Device.clusterLaunch} (compute capability 9.0 and later). In the kernel: `cooperative_groups::this_cluster()`
   * or the PTX registers `%cluster_ctarank` and `%clusterid`. Set through CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION.
   * @defaultValue no clusters */
  cluster?: Dim3;
  /** Launch cooperatively: every block of the grid is resident at once, so blocks may wait for each other (a
   * grid-wide barrier such as `cooperative_groups::this_grid().sync()`). The grid may hold at most as many blocks as
   * fit on the device at once (`maxActiveBlocksPerMultiprocessor` times the multiprocessors), else
   * CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE. Needs a device with {@link Device.cooperativeLaunch}. Set through
   * CU_LAUNCH_ATTRIBUTE_COOPERATIVE. @defaultValue false */
  cooperative?: boolean;
  /** Programmatic dependent launch: this kernel may start while the kernel before it on the stream is still
   * running, once every block of that kernel has called `cudaTriggerProgrammaticLaunchCompletion()` (PTX
   * `griddepcontrol.launch_dependents`) or exited. This kernel must call `cudaGridDependencySynchronize()` (PTX
   * `griddepcontrol.wait`) before it reads what the earlier kernel writes: that call waits for the earlier kernel to
   * finish and its memory to be visible. Work before the call (setup, loads of other data) overlaps the earlier
   * kernel's tail. Only kernels gain: after a copy or an event the launch waits as usual. Needs compute capability
   * 9.0 or later. Set through CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION. @defaultValue false */
  programmaticDependentLaunch?: boolean;
}

/** Options for {@link Kernel.maxPotentialBlockSize}. */
export interface MaxPotentialBlockSizeOptions {
  /** Dynamic shared memory each block will use, in bytes. @defaultValue 0 */
  dynamicSharedMemBytes?: number;
  /** The largest block size to consider, in threads; 0 for no limit beyond the kernel's. @defaultValue 0 */
  blockSizeLimit?: number;
}

/** What the compiled kernel uses and allows (cuFuncGetAttribute). */
export interface KernelAttributes {
  /** Registers per thread. */
  registers: number;
  /** The most threads per block this kernel can be launched with (its registers and `__launch_bounds__` count). */
  maxThreadsPerBlock: number;
  /** Statically allocated shared memory per block, in bytes. */
  staticSharedMemBytes: number;
  /** Local memory per thread, in bytes. */
  localMemBytes: number;
  /** The most dynamic shared memory per block a launch may ask for now, in bytes: 48 KiB minus the static shared
   * memory until {@link Kernel.setMaxDynamicSharedMemBytes} raises it (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). */
  maxDynamicSharedMemBytes: number;
}

/** Reads a `Dim3` into out[at..at+2]; each dimension an integer from 1 to 2**32 - 1. @internal */
export function readDims(value: unknown, name: string, out: number[], at: number): void {
  if (typeof value === 'number') {
    out[at] = validateInteger(value, name, 1, 2 ** 32 - 1);
    out[at + 1] = 1;
    out[at + 2] = 1;
    return;
  }
  if (!Array.isArray(value) || value.length < 1 || value.length > 3)
    throw invalidType(name, 'a positive integer or an array [x], [x, y] or [x, y, z]', value);
  for (let i = 0; i < 3; i++) out[at + i] = i < value.length ? validateInteger(value[i], `${name}[${i}]`, 1, 2 ** 32 - 1) : 1;
}

const LAUNCH_KEYS: readonly string[] = ['grid', 'block', 'dynamicSharedMemBytes', 'stream', 'cluster', 'cooperative', 'programmaticDependentLaunch'];

/** The most blocks in a cluster that every device with clusters launches (the portable cluster size). */
const PORTABLE_CLUSTER_BLOCKS = 8;

function readFlag(value: unknown, name: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw invalidType(name, 'a boolean', value);
  return value;
}

/** The launch attributes of `options` as the launch scratch's words 7 to 10 hold them: cluster x, y, z (0 for none) into
 * out[0..2], and the flags (1 cooperative, 2 programmatic dependent launch) returned; each checked against the device.
 * `grid` is the launch's grid, already read. @internal */
export function readLaunchAttributes(options: Pick<LaunchOptions, 'cluster' | 'cooperative' | 'programmaticDependentLaunch'>, device: Device, grid: readonly number[], out: number[]): number {
  const cooperative = readFlag(options.cooperative, 'options.cooperative');
  const programmatic = readFlag(options.programmaticDependentLaunch, 'options.programmaticDependentLaunch');
  const cluster = options.cluster;
  out[0] = out[1] = out[2] = 0;
  if (cluster !== undefined) {
    readDims(cluster, 'options.cluster', out, 0);
    const blocks = out[0]! * out[1]! * out[2]!;
    if (blocks > PORTABLE_CLUSTER_BLOCKS)
      throw outOfRange('options.cluster', `at most ${PORTABLE_CLUSTER_BLOCKS} blocks in all (the portable cluster size)`, [out[0], out[1], out[2]]);
    for (let i = 0; i < 3; i++)
      if (grid[i]! % out[i]! !== 0)
        throw invalidValue('options.grid', `must be a multiple of "options.cluster" in each dimension; grid [${grid.join(', ')}] and cluster [${out.join(', ')}] differ in dimension ${'xyz'[i]}.`);
    if (!device.clusterLaunch)
      throw new UnsupportedError('thread-block clusters', device.ordinal, `it has compute capability ${device.computeCapability.major}.${device.computeCapability.minor}; clusters need 9.0 or later (CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH is 0).`);
  }
  if (cooperative && !device.cooperativeLaunch)
    throw new UnsupportedError('cooperative launch', device.ordinal, 'CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0.');
  if (programmatic && device.computeCapability.major < 9)
    throw new UnsupportedError('programmatic dependent launch', device.ordinal, `it has compute capability ${device.computeCapability.major}.${device.computeCapability.minor}; programmatic dependent launch needs 9.0 or later.`);
  return (cooperative ? 1 : 0) | (programmatic ? 2 : 0);
}

/** The native ref of a kernel, also after its module was unloaded (for graphs to hold the module). @internal */
export const kernels = privateState<{ ref(kernel: Kernel<readonly unknown[]>): NativeRef }>('Kernel', ['ref']);

/** A module's ref, for its kernels to check that it is still loaded; registered by kernel/module.ts. Here, not there,
 * because module.ts makes Kernels and so sits above this file. @internal */
export const modules = privateState<{ ref(module: Module, method: string): NativeRef }>('Module', ['ref']);

/** A kernel of a loaded module, with the parameter types it is launched with. Borrows its module (and keeps it
 * reachable); after the module is unloaded every method throws {@link DestroyedError}.
 * Thread-safety: usable from the thread that loaded its module. */
export class Kernel<Args extends readonly unknown[] = unknown[]> {
  #ref: NativeRef;
  #module: Module;
  #packer: ArgumentPacker;
  // Reused by every launch, so that a launch allocates nothing; a launch made while another of this kernel is being
  // read (from a getter of its options) takes arrays of its own, or it would overwrite the outer launch's shape.
  #shape = [1, 1, 1, 1, 1, 1];
  #cluster = [0, 0, 0];
  #launching = false;
  /** The kernel's `extern "C"` name in the module. */
  readonly name: string;
  /** The parameter types, in order. */
  readonly signature: readonly ParamType[];

  /** @internal (from {@link Module.getFunction}) */
  constructor(token: symbol, ref: NativeRef, module: Module, name: string, signature: readonly ParamType[]) {
    checkConstruction(token, 'Kernel', 'module.getFunction(name, signature)');
    adopt(this, ref);
    this.#ref = ref;
    this.#module = module;
    this.name = name;
    this.signature = signature;
    lockFields(this, ['name', 'signature']);
    this.#packer = new ArgumentPacker(signature, name);
  }

  static {
    guardReceivers(Kernel, (value) => #ref in value);
    register(kernels, { ref: (kernel) => kernel.#ref });
  }

  /** `call` names the kernel's method the user called (`'kernel.launch'`), not the module's; a whole literal, so that
   * a launch builds no string. */
  #use(call: string): NativeRef {
    modules.ref(this.#module, call);
    return this.#ref;
  }

  /** The module the kernel belongs to. */
  get module(): Module {
    return this.#module;
  }

  /** What the compiled kernel uses and allows, read from the driver on each access.
   * @throws {@link DestroyedError} after the module was unloaded. Wraps: cuFuncGetAttribute. */
  get attributes(): KernelAttributes {
    return native.kernelAttributes(this.#use('kernel.attributes'));
  }

  /** The block size (threads) that gives this kernel the highest occupancy on its device, and the smallest grid
   * (blocks) that reaches that occupancy on every multiprocessor.
   * @throws `RangeError` ERR_OUT_OF_RANGE for negative or non-integer options; {@link DestroyedError} after unload.
   * Wraps: cuOccupancyMaxPotentialBlockSize. */
  maxPotentialBlockSize(options?: MaxPotentialBlockSizeOptions): {
    /** The fewest blocks that reach the highest occupancy on every multiprocessor of the device (the `minGridSize`
     * output of cuOccupancyMaxPotentialBlockSize). */
    minGridSize: number;
    /** Threads per block that give the highest occupancy, within `options.blockSizeLimit` when one is set (the
     * `blockSize` output of cuOccupancyMaxPotentialBlockSize). */
    blockSize: number;
  } {
    const o = validateOptions<MaxPotentialBlockSizeOptions>(options, 'options', 'maxPotentialBlockSize', ['dynamicSharedMemBytes', 'blockSizeLimit']);
    const shared = o.dynamicSharedMemBytes === undefined ? 0 : validateInteger(o.dynamicSharedMemBytes, 'options.dynamicSharedMemBytes', 0, 2 ** 31 - 1);
    const limit = o.blockSizeLimit === undefined ? 0 : validateInteger(o.blockSizeLimit, 'options.blockSizeLimit', 0, 2 ** 31 - 1);
    return native.kernelMaxPotentialBlockSize(this.#use('kernel.maxPotentialBlockSize'), shared, limit);
  }

  /** Allows launches of this kernel with up to `bytes` of dynamic shared memory per block. Needed above 48 KiB
   * (less the kernel's static shared memory): without it such a launch fails with CUDA_ERROR_INVALID_VALUE.
   * @param bytes - from 0 to the device's opt-in limit (227 KiB on an H100/H200) less the static shared memory.
   * @throws `RangeError` ERR_OUT_OF_RANGE for a negative or non-integer `bytes`; {@link CudaError}
   * CUDA_ERROR_INVALID_VALUE above the device's limit, naming the limit; {@link DestroyedError} after unload.
   * Wraps: cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). Thread-safety: affects this kernel
   * in every thread of the process (the attribute belongs to the driver's function). */
  setMaxDynamicSharedMemBytes(bytes: number): void {
    validateInteger(bytes, 'bytes', 0, 2 ** 31 - 1);
    native.kernelSetMaxDynamicSharedMemBytes(this.#use('kernel.setMaxDynamicSharedMemBytes'), bytes);
  }

  /** Queues the kernel on `options.stream` (default {@link currentStream} of the kernel's device) and returns at
   * once. Every argument is checked against the signature before anything is launched: the count, each type and
   * each range (an `'u32'` given -1 or 2**32 is a `RangeError` naming `"args[i]"` and the type). Only then does each
   * `DeviceBuffer` argument pass its device pointer and record that it is used on the stream (so it is not freed
   * before the kernel runs). A bigint pointer is passed as it is, unchecked.
   * @param args - one value per signature entry: see {@link ParamType}.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE, `TypeError` ERR_INVALID_ARG_VALUE (wrong count, unknown option, a
   * stream of another device) or `RangeError` ERR_OUT_OF_RANGE, all before launching; {@link DestroyedError} after
   * the module or the stream was destroyed; {@link CudaError} from cuLaunchKernel naming the kernel, the grid, the
   * block, the shared memory, the stream and the kernel's limits when the driver refuses the launch (too many threads
   * per block, too much shared memory). None of these leaves the stream unusable.
   * With `cluster`, `cooperative` or `programmaticDependentLaunch` the launch goes through cuLaunchKernelEx, and a
   * device without the feature is an {@link UnsupportedError} before anything is queued; a cooperative grid larger
   * than the device holds at once is a {@link CudaError} CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE naming the limit.
   * Wraps: cuLaunchKernel, or cuLaunchKernelEx with launch attributes. Thread-safety: the thread that loaded the
   * module; any stream of the kernel's device.
   * @example
   * ```ts
   * saxpy.launch({ grid: Math.ceil(n / 256), block: 256, stream }, n, 2.0, x, y);
   * ```
   */
  launch(options: LaunchOptions, ...args: Args): void {
    if (typeof options !== 'object' || options === null || Array.isArray(options))
      throw invalidType('options', 'a LaunchOptions object ({ grid, block, dynamicSharedMemBytes, stream })', options);
    const outer = !this.#launching;
    this.#launching = true;
    try {
      for (const key in options) if (!LAUNCH_KEYS.includes(key)) validateOptions(options, 'options', 'launch', LAUNCH_KEYS);
      const shape = outer ? this.#shape : [1, 1, 1, 1, 1, 1];
      // Each option is read once, so that a getter runs once.
      readDims(options.grid, 'options.grid', shape, 0);
      readDims(options.block, 'options.block', shape, 3);
      const sharedOption = options.dynamicSharedMemBytes;
      const shared = sharedOption === undefined ? 0 : validateInteger(sharedOption, 'options.dynamicSharedMemBytes', 0, 2 ** 32 - 1);
      const ref = this.#use('kernel.launch');
      const device = this.#module.device;
      const streamOption = options.stream;
      const stream = streamOption === undefined ? currentStream(device) : streamOption;
      if (!streams.is(stream)) throw invalidType('options.stream', 'a Stream', stream);
      if (streams.device(stream) !== device)
        throw invalidValue('options.stream', `is on device ${stream.device.ordinal}, but kernel "${this.name}" is loaded on device ${device.ordinal}.`);
      const clusterOption = options.cluster;
      const cooperative = options.cooperative;
      const programmaticDependentLaunch = options.programmaticDependentLaunch;
      const plain = clusterOption === undefined && cooperative === undefined && programmaticDependentLaunch === undefined;
      const cluster = outer ? this.#cluster : [0, 0, 0];
      const flags = plain ? 0 : readLaunchAttributes({ cluster: clusterOption, cooperative, programmaticDependentLaunch }, device, [shape[0]!, shape[1]!, shape[2]!], cluster);
      this.#packer.pack(args);
      const streamHandle = streamRef(stream, 'kernel.launch');
      this.#packer.bindPointers(args, stream);
      const launch = launchShape;
      for (let i = 0; i < 6; i++) launch[i] = shape[i]!;
      launch[6] = shared;
      const slots = this.#packer.bytes;
      launchArguments.set(slots);
      launch[11] = slots.length;
      operands[0] = ref;
      operands[1] = streamHandle;
      if (plain) {
        native.kernelLaunch();
      } else {
        launch[7] = cluster[0]!;
        launch[8] = cluster[1]!;
        launch[9] = cluster[2]!;
        launch[10] = flags;
        native.kernelLaunchWithAttributes();
      }
      noteCapturedLaunch(streamHandle, this);
    } finally {
      if (outer) this.#launching = false;
    }
  }
}
