// Modules (PTX, CUBIN or fatbin loaded into a device's context) and their kernels.
import { native, type Box } from './native.js';
import { Device, resolveDevice } from './device.js';
import { CudaError, DestroyedError } from './errors.js';
import { requireCuda } from './cuda.js';
import { currentStream } from './scope.js';
import { Stream, streamBox } from './stream.js';
import { asKernelPointer, isKernelPointer } from './kernel-argument.js';
import { invalidType, invalidValue, outOfRange, validateInteger, validateOptions } from './validate.js';

/** A kernel parameter type, as the kernel's `extern "C"` signature declares it: `'ptr'` for any pointer
 * (a `DeviceBuffer` or a bigint device address), `'i32'`/`'u32'` for 32-bit integers, `'i64'`/`'u64'` for 64-bit
 * integers (a bigint or a safe integer), `'f32'`/`'f64'` for `float`/`double`. */
export type ParamType = 'ptr' | 'i32' | 'u32' | 'i64' | 'u64' | 'f32' | 'f64';
const PARAM_TYPES: readonly ParamType[] = ['ptr', 'i32', 'u32', 'i64', 'u64', 'f32', 'f64'];

/** Grid or block dimensions: a number, or `[x]`, `[x, y]`, `[x, y, z]`; missing dimensions are 1. */
export type Dim3 = number | [number] | [number, number] | [number, number, number];

/** Options for {@link Module.load}. */
export interface ModuleLoadOptions {
  /** The device whose context loads the module. @defaultValue 0 */
  device?: Device | number;
}

/** Options for {@link Kernel.launch}. */
export interface LaunchOptions {
  /** Blocks in the grid; each dimension from 1 to the device limit (2**31 - 1 in x, 65535 in y and z). */
  grid: Dim3;
  /** Threads per block; the product at most 1024 (and at most `kernel.attributes.maxThreadsPerBlock`). */
  block: Dim3;
  /** Dynamic shared memory per block in bytes. @defaultValue 0 */
  sharedMemBytes?: number;
  /** The stream to launch on. @defaultValue {@link currentStream}(kernel's device) */
  stream?: Stream;
}

/** Attributes of a compiled kernel (cuFuncGetAttribute). */
export interface KernelAttributes {
  /** Registers per thread. */
  registers: number;
  /** The most threads per block this kernel can be launched with. */
  maxThreadsPerBlock: number;
  /** Statically allocated shared memory per block, bytes. */
  staticSharedMemBytes: number;
  /** Local memory per thread, bytes. */
  localMemBytes: number;
}

let moduleBoxOf: (module: Module, method: string) => Box;

/** A module loaded into a device's primary context. Owns it: `unload()`, `[Symbol.dispose]`, or a finalizer when
 * forgotten (cuModuleUnload). Kernels of an unloaded module throw {@link DestroyedError}.
 * Thread-safety: any thread that has it; not shared with workers (load the same image there). */
export class Module {
  #box: Box;
  #unloaded = false;
  /** The device the module is loaded on. */
  readonly device: Device;
  /** The PTX text it was loaded from (or compiled to), when there was one; keep it to cache a compile. */
  readonly ptx: string | undefined;
  /** The CUBIN it was loaded from (or compiled to), when there was one. */
  readonly cubin: Uint8Array | undefined;

  private constructor(box: Box, device: Device, ptx: string | undefined, cubin: Uint8Array | undefined) {
    this.#box = box;
    this.device = device;
    this.ptx = ptx;
    this.cubin = cubin;
  }

  static {
    moduleBoxOf = (module, method) => module.#use(method);
  }

  #use(method: string): Box {
    if (this.#unloaded) throw new DestroyedError('Module', method, 'was unloaded');
    return this.#box;
  }

  /** Loads a module from PTX text (JIT-compiled by the driver for this device), a CUBIN or a fatbin, off the JS
   * thread. @throws (rejects) {@link CudaError} with the JIT log for a bad image; {@link CudaUnavailableError}
   * without a GPU; `TypeError` for a wrong image type. Wraps: cuModuleLoadDataEx. */
  static async load(image: string | Uint8Array, options?: ModuleLoadOptions): Promise<Module> {
    const o = validateOptions<ModuleLoadOptions>(options, 'options', 'Module.load', ['device']);
    let bytes: Uint8Array;
    let ptx: string | undefined;
    let cubin: Uint8Array | undefined;
    if (typeof image === 'string') {
      ptx = image;
      bytes = new TextEncoder().encode(`${image}\0`); // the driver reads PTX up to its NUL
    } else if (image instanceof Uint8Array) {
      if (image.byteLength === 0) throw invalidValue('image', 'is empty; pass PTX text, a CUBIN or a fatbin.');
      cubin = new Uint8Array(image);
      bytes = cubin;
    } else {
      throw invalidType('image', 'a string (PTX) or a Uint8Array (CUBIN or fatbin)', image);
    }
    requireCuda();
    const device = resolveDevice(o.device);
    return new Module(await native.moduleLoad(device.ordinal, bytes), device, ptx, cubin);
  }

  /** The kernel named `name` (its `extern "C"` name, or the mangled C++ name), launched with arguments of the types
   * in `signature`. @throws {@link CudaError} CUDA_ERROR_NOT_FOUND naming the kernel and the module's kernels;
   * `TypeError` for a bad signature. Wraps: cuModuleGetFunction. */
  getFunction(name: string, signature: readonly ParamType[]): Kernel {
    if (typeof name !== 'string' || name === '') throw invalidType('name', 'a non-empty string', name);
    if (!Array.isArray(signature)) throw invalidType('signature', `an array of ${PARAM_TYPES.map((t) => `'${t}'`).join(', ')}`, signature);
    signature.forEach((type, i) => {
      if (!PARAM_TYPES.includes(type)) throw invalidValue(`signature[${i}]`, `must be one of ${PARAM_TYPES.map((t) => `'${t}'`).join(', ')}; received ${JSON.stringify(type)}.`);
    });
    const box = this.#use('getFunction');
    try {
      return new Kernel(native.moduleGetFunction(box, name), this, name, [...signature]);
    } catch (error) {
      if (error instanceof CudaError && error.name === 'CUDA_ERROR_NOT_FOUND') {
        const names = native.moduleFunctionNames(box);
        error.message += names.length
          ? `; the module's kernels are: ${names.join(', ')}`
          : '; check the extern "C" name of the kernel';
      }
      throw error;
    }
  }

  /** True after `unload()`. */
  get unloaded(): boolean {
    return this.#unloaded;
  }

  /** Unloads the module (cuModuleUnload) once no call of this thread uses it; idempotent; never throws after a
   * device fault. Kernels launched before keep running. */
  unload(): void {
    if (this.#unloaded) return;
    this.#unloaded = true;
    native.moduleUnload(this.#box);
  }

  /** Same as {@link Module.unload}. */
  [Symbol.dispose](): void {
    this.unload();
  }
}

const MAX_GRID = [2 ** 31 - 1, 65535, 65535];
const MAX_BLOCK = [1024, 1024, 64];

function dims(value: unknown, name: string, limits: number[]): number[] {
  const list = typeof value === 'number' ? [value] : value;
  if (!Array.isArray(list) || list.length < 1 || list.length > 3)
    throw invalidType(name, 'a number or an array [x], [x, y] or [x, y, z]', value);
  const out = [1, 1, 1];
  list.forEach((d, i) => {
    out[i] = validateInteger(d, list === value ? `${name}[${i}]` : name, 1, limits[i]!);
  });
  return out;
}

const I32 = [-(2 ** 31), 2 ** 31 - 1] as const;
const U32 = [0, 2 ** 32 - 1] as const;
const I64 = [-(2n ** 63n), 2n ** 63n - 1n] as const;
const U64 = [0n, 2n ** 64n - 1n] as const;

/** A kernel of a loaded module, with the parameter types it is launched with. Keeps its module alive; after the
 * module is unloaded every method throws {@link DestroyedError}. */
export class Kernel {
  #box: Box;
  #module: Module;
  /** The kernel's name in the module. */
  readonly name: string;
  /** The parameter types, in order. */
  readonly signature: readonly ParamType[];

  /** @internal */
  constructor(box: Box, module: Module, name: string, signature: ParamType[]) {
    this.#box = box;
    this.#module = module;
    this.name = name;
    this.signature = Object.freeze(signature);
  }

  #use(method: string): Box {
    moduleBoxOf(this.#module, method);
    return this.#box;
  }

  /** The module the kernel belongs to. */
  get module(): Module {
    return this.#module;
  }

  /** Registers, threads and memory the compiled kernel uses (cuFuncGetAttribute). */
  get attributes(): KernelAttributes {
    return native.kernelAttributes(this.#use('attributes'));
  }

  /** The block size that maximizes occupancy and the smallest grid that reaches it
   * (cuOccupancyMaxPotentialBlockSize), for `dynamicSharedMemBytes` of dynamic shared memory per block. */
  maxPotentialBlockSize(dynamicSharedMemBytes = 0): { minGridSize: number; blockSize: number } {
    validateInteger(dynamicSharedMemBytes, 'dynamicSharedMemBytes', 0, 2 ** 31 - 1);
    return native.kernelMaxPotentialBlockSize(this.#use('maxPotentialBlockSize'), dynamicSharedMemBytes);
  }

  /** Allows launches with up to `bytes` of dynamic shared memory per block; needed above 48 KiB.
   * @throws {@link CudaError} CUDA_ERROR_INVALID_VALUE above the device's limit.
   * Wraps: cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). */
  setMaxDynamicSharedMemory(bytes: number): void {
    validateInteger(bytes, 'bytes', 0, 2 ** 31 - 1);
    native.kernelSetMaxDynamicSharedMemory(this.#use('setMaxDynamicSharedMemory'), bytes);
  }

  /** Launches the kernel on `options.stream` (default {@link currentStream}) and returns at once. Every argument is
   * checked against the signature before anything is launched: count, type and range.
   * A `DeviceBuffer` argument passes its device pointer and counts as used on the stream.
   * @throws `TypeError` ERR_INVALID_ARG_TYPE / `RangeError` ERR_OUT_OF_RANGE naming the argument's position and
   * type; {@link CudaError} naming the kernel and the launch shape when the driver refuses the launch (too many
   * threads per block, too much shared memory). Wraps: cuLaunchKernel. */
  launch(options: LaunchOptions, ...args: unknown[]): void {
    const o = validateOptions<LaunchOptions>(options, 'options', 'launch', ['grid', 'block', 'sharedMemBytes', 'stream']);
    if (options === undefined) throw invalidType('options', 'an object with grid and block', options);
    const grid = dims(o.grid, 'options.grid', MAX_GRID);
    const block = dims(o.block, 'options.block', MAX_BLOCK);
    const shared = o.sharedMemBytes === undefined ? 0 : validateInteger(o.sharedMemBytes, 'options.sharedMemBytes', 0, 2 ** 32 - 1);
    const box = this.#use('launch');
    const stream = o.stream ?? currentStream(this.#module.device);
    if (!(stream instanceof Stream)) throw invalidType('options.stream', 'a Stream', stream);
    if (stream.device !== this.#module.device)
      throw invalidValue('options.stream', `is on device ${stream.device.ordinal}, but the kernel is loaded on device ${this.#module.device.ordinal}.`);
    if (args.length !== this.signature.length)
      throw invalidValue('args', `must be ${this.signature.length} argument(s) for kernel "${this.name}" (${this.signature.join(', ')}); received ${args.length}.`);
    const params = new ArrayBuffer(8 * args.length);
    const view = new DataView(params);
    const pointerArgs: number[] = [];
    this.signature.forEach((type, i) => {
      const at = 8 * i;
      const value = args[i];
      const name = `args[${i}] (${type})`;
      switch (type) {
        case 'ptr':
          if (typeof value === 'bigint') {
            if (value < U64[0] || value > U64[1]) throw outOfRange(name, 'a device address from 0n to 2n ** 64n - 1n', value);
            view.setBigUint64(at, value, true);
          } else if (isKernelPointer(value)) {
            pointerArgs.push(i);
          } else throw invalidType(name, 'a DeviceBuffer or a bigint device address', value);
          break;
        case 'i32':
        case 'u32': {
          const [min, max] = type === 'i32' ? I32 : U32;
          if (typeof value !== 'number') throw invalidType(name, 'an integer (number)', value);
          if (!Number.isInteger(value) || value < min || value > max) throw outOfRange(name, `an integer from ${min} to ${max}`, value);
          if (type === 'i32') view.setInt32(at, value, true);
          else view.setUint32(at, value, true);
          break;
        }
        case 'i64':
        case 'u64': {
          const [min, max] = type === 'i64' ? I64 : U64;
          let big: bigint;
          if (typeof value === 'bigint') big = value;
          else if (typeof value === 'number' && Number.isSafeInteger(value)) big = BigInt(value);
          else if (typeof value === 'number') throw outOfRange(name, 'a safe integer or a bigint', value);
          else throw invalidType(name, 'a bigint or a safe integer', value);
          if (big < min || big > max) throw outOfRange(name, `an integer from ${min} to ${max}`, value);
          if (type === 'i64') view.setBigInt64(at, big, true);
          else view.setBigUint64(at, big, true);
          break;
        }
        case 'f32':
        case 'f64':
          if (typeof value !== 'number') throw invalidType(name, 'a number', value);
          if (type === 'f32') view.setFloat32(at, value, true);
          else view.setFloat64(at, value, true);
          break;
      }
    });
    const streamHandle = streamBox(stream, 'launch');
    // Pointers of buffers last: each records its use on the stream, so only once every argument is valid.
    for (const i of pointerArgs) view.setBigUint64(8 * i, (args[i] as { [asKernelPointer](s: Stream): bigint })[asKernelPointer](stream), true);
    const shape = `grid [${grid.join(', ')}], block [${block.join(', ')}], ${shared} bytes of dynamic shared memory on device ${stream.device.ordinal}`;
    native.kernelLaunch(box, streamHandle, grid, block, shared, new Uint8Array(params), args.length, shape);
  }
}
