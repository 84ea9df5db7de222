// Modules (PTX, CUBIN or fatbin loaded into a device's primary context) and their kernels: lookup by name, launch
// with arguments checked against a signature. Mechanism in kernel/module.cc.
import { types } from 'node:util';

import { KERNEL_ARG_SLOT_BYTES, native, type Box } from '../binding/binding.js';
import { privateState, register, streams } from '../internal/handles.js';
import { Device, resolveDevice } from '../device/device.js';
import { CudaError, DestroyedError } from '../binding/errors.js';
import { requireCuda } from '../binding/cuda.js';
import { currentStream } from '../stream/scope.js';
import { Stream, streamBox } from '../stream/stream.js';
import { noteCapturedLaunch } from '../stream/capture.js';
import { asKernelPointer, isKernelPointer, type KernelPointer } from './kernel-argument.js';
import type { DeviceBuffer } from '../memory/device-buffer.js';
import type { ManagedBuffer } from '../memory/managed-buffer.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, invalidValue, lockFields, outOfRange, validateInteger, validateOptions } from '../internal/validate.js';
import { detachedError, viewBytes } from '../memory/host-views.js';

/** A kernel parameter type, as the kernel's `extern "C"` signature declares it: `'ptr'` for any pointer
 * (a `DeviceBuffer`, a `ManagedBuffer` or a bigint device address), `'i32'`/`'u32'` for 32-bit integers (`int`, `unsigned int`, and
 * narrower integers and `bool`), `'i64'`/`'u64'` for 64-bit integers (a bigint or a safe integer), `'f32'`/`'f64'`
 * for `float`/`double`. */
export type ParamType = 'ptr' | 'i32' | 'u32' | 'i64' | 'u64' | 'f32' | 'f64';
const PARAM_TYPES: readonly ParamType[] = ['ptr', 'i32', 'u32', 'i64', 'u64', 'f32', 'f64'];

/** The JavaScript value a kernel parameter of type `T` takes: a `DeviceBuffer`, `ManagedBuffer` or bigint device
 * address for `'ptr'`; a bigint or a safe integer for `'i64'`/`'u64'`; a number otherwise. */
export type KernelArgument<T extends ParamType> = T extends 'ptr'
  ? DeviceBuffer | ManagedBuffer | bigint
  : T extends 'i64' | 'u64'
    ? bigint | number
    : number;

/** The argument list of a kernel whose signature is `S`, one {@link KernelArgument} per entry, so that
 * `module.getFunction('scale', ['ptr', 'f32', 'u32'])` gives a kernel whose `launch` takes
 * `(options, DeviceBuffer | ManagedBuffer | bigint, number, number)` and a wrong argument fails in the compiler. */
export type KernelArguments<S extends readonly ParamType[]> = { -readonly [K in keyof S]: KernelArgument<S[K]> } extends infer A extends unknown[] ? A : never;

/** Grid or block dimensions: a number, or `[x]`, `[x, y]`, `[x, y, z]`; missing dimensions are 1. */
export type Dim3 = number | [number] | [number, number] | [number, number, number];

/** Options for {@link Module.load}. */
export interface ModuleLoadOptions {
  /** The device whose primary context loads the module. @defaultValue 0 */
  device?: Device | number;
}

/** Options for {@link Kernel.launch}. */
export interface LaunchOptions {
  /** Blocks in the grid: each dimension an integer from 1; the device's limits (2**31 - 1 in x, 65535 in y and z on
   * current GPUs) are checked by the driver. */
  grid: Dim3;
  /** Threads per block: each dimension an integer from 1. The driver checks the product against the kernel's
   * `attributes.maxThreadsPerBlock` (at most 1024) and each dimension against the device (1024, 1024, 64). */
  block: Dim3;
  /** Dynamic shared memory per block in bytes, from 0 to 2**32 - 1; above 48 KiB only after
   * {@link Kernel.setMaxDynamicSharedMemBytes}. @defaultValue 0 */
  dynamicSharedMemBytes?: number;
  /** The stream to launch on; must be on the kernel's device. @defaultValue {@link currentStream}(kernel's device) */
  stream?: Stream;
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

const ELF_MAGIC = [0x7f, 0x45, 0x4c, 0x46]; // a CUBIN is an ELF file
const FATBIN_MAGIC = [0x50, 0xed, 0x55, 0xba]; // 0xBA55ED50, little-endian

function startsWith(bytes: Uint8Array, magic: readonly number[]): boolean {
  return bytes.byteLength >= magic.length && magic.every((b, i) => bytes[i] === b);
}

/** Why a binary image cannot be handed to the driver, or undefined when its tables lie inside it.
 * Note [image bounds]: cuModuleLoadDataEx takes no length; it trusts the offsets inside a CUBIN (ELF) or fatbin
 * header, so a truncated file would make the driver read past the end of the copy. Checking that the ELF program
 * and section tables, and every section's bytes, lie inside the image (for a fatbin: header plus payload) keeps
 * a bad file an argument error instead of a read out of bounds. @internal */
export function binaryImageProblem(bytes: Uint8Array): string | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const size = BigInt(bytes.byteLength);
  if (startsWith(bytes, FATBIN_MAGIC)) {
    if (bytes.byteLength < 16) return `is a fatbin of ${bytes.byteLength} bytes, shorter than its 16-byte header.`;
    const end = BigInt(view.getUint16(6, true)) + view.getBigUint64(8, true);
    return end > size ? `is a truncated fatbin: its header says ${end} bytes, but the image has ${size}.` : undefined;
  }
  if (bytes.byteLength < 64 || bytes[4] !== 2 || bytes[5] !== 1)
    return `is not a 64-bit little-endian ELF image (a CUBIN) of at least 64 bytes (${bytes.byteLength} bytes).`;
  const table = (offsetAt: number, sizeAt: number, countAt: number) =>
    view.getBigUint64(offsetAt, true) + BigInt(view.getUint16(sizeAt, true)) * BigInt(view.getUint16(countAt, true));
  const programEnd = table(0x20, 0x36, 0x38);
  const sectionEnd = table(0x28, 0x3a, 0x3c);
  const tablesEnd = programEnd > sectionEnd ? programEnd : sectionEnd;
  if (tablesEnd > size) return `is a truncated CUBIN: its ELF tables end at byte ${tablesEnd}, but the image has ${size} bytes.`;
  const sections = Number(view.getBigUint64(0x28, true));
  const entrySize = view.getUint16(0x3a, true);
  if (entrySize < 0x28) return entrySize === 0 && view.getUint16(0x3c, true) === 0 ? undefined : `is a malformed CUBIN: ELF section entries of ${entrySize} bytes.`;
  for (let i = 0; i < view.getUint16(0x3c, true); i++) {
    const at = sections + i * entrySize;
    const NOBITS = 8; // a section with no bytes in the file (.bss)
    if (view.getUint32(at + 4, true) === NOBITS) continue;
    const end = view.getBigUint64(at + 0x18, true) + view.getBigUint64(at + 0x20, true);
    if (end > size) return `is a truncated CUBIN: ELF section ${i} ends at byte ${end}, but the image has ${size} bytes.`;
  }
  return undefined;
}

// A module's box (for its kernels) and its construction from a loaded box (for loadModule).
const modules = privateState<{
  box(module: Module, method: string): Box;
  make(box: Box, device: Device, ptx: string | undefined, cubin: Uint8Array | undefined): Module;
}>('Module', ['box', 'make']);

/** A module loaded into a device's primary context: owns it (cuModuleUnload on `unload()`, `[Symbol.dispose]`, or by a
 * finalizer when forgotten). Kernels are looked up by their `extern "C"` names with {@link Module.getFunction}.
 *
 * Lifetime: owned; kernels keep the module object reachable; after `unload()` every kernel method throws
 * {@link DestroyedError} and the handle never reaches the driver again. While a graph capture is open on the device
 * (in any thread), the driver's unload waits until the last capture there closes: cuModuleUnload would invalidate it.
 * Thread-safety: usable from the thread that loaded it; not shared with workers (a worker loads the same
 * `ptx`/`cubin` again, which is cheap).
 *
 * @example
 * ```ts
 * using kernels = await Module.load(readFileSync('kernels.ptx', 'utf8'));
 * const fill = kernels.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
 * fill.launch({ grid: Math.ceil(n / 256), block: 256, stream }, buffer, 7, n);
 * ```
 */
export class Module {
  #box: Box;
  #unloaded = false;
  /** The device the module is loaded on. */
  readonly device: Device;
  /** The PTX text the module was loaded from or compiled to, when there was one. Keep it (or `cubin`) to cache a
   * compile: `Module.load(module.ptx)` in a later run or another thread skips NVRTC. */
  readonly ptx: string | undefined;
  /** The binary image the module was loaded from or compiled to: a CUBIN (from `Program.compile` for the device's
   * own architecture), or a fatbin given to `Module.load`. Loading it again skips every compiler. A copy: changing
   * the caller's array after `Module.load` changes nothing here. */
  readonly cubin: Uint8Array | undefined;

  private constructor(token: symbol, box: Box, device: Device, ptx: string | undefined, cubin: Uint8Array | undefined) {
    checkConstruction(token, 'Module', 'Module.load() or Program.compile()');
    this.#box = box;
    this.device = device;
    this.ptx = ptx;
    this.cubin = cubin;
    lockFields(this, ['device', 'ptx', 'cubin']);
  }

  static {
    guardReceivers(Module, (value) => #box in value);
    register(modules, {
      box: (module, method) => module.#use(method),
      make: (box, device, ptx, cubin) => new Module(internalConstruction, box, device, ptx, cubin),
    });
  }

  #use(method: string): Box {
    if (this.#unloaded) throw new DestroyedError('Module', method, 'was unloaded');
    return this.#box;
  }

  /** Loads a module off the JS thread from PTX text (JIT-compiled by the driver for the device, cached by the driver
   * across runs), a CUBIN, or a fatbin. A `Uint8Array` that is neither a CUBIN (ELF) nor a fatbin is read as PTX
   * text (UTF-8).
   * @param image - PTX as a string, or the bytes of a CUBIN, fatbin or PTX file; copied, so it may change afterwards.
   * @throws (rejects) `TypeError` ERR_INVALID_ARG_TYPE for another type of image; ERR_INVALID_ARG_VALUE for an empty
   * one or a truncated CUBIN or fatbin (See Note [image bounds]); {@link CudaUnavailableError} without a usable
   * driver or GPU; {@link CudaError} from cuModuleLoadDataEx for an image the driver rejects
   * (`CUDA_ERROR_INVALID_PTX`, `CUDA_ERROR_NO_BINARY_FOR_GPU`, ...), with the JIT log.
   * Wraps: cuModuleLoadDataEx. Thread-safety: any thread. Lifetime: the caller owns the module. */
  static async load(image: string | Uint8Array, options?: ModuleLoadOptions): Promise<Module> {
    const o = validateOptions<ModuleLoadOptions>(options, 'options', 'Module.load', ['device']);
    let bytes: Uint8Array;
    let ptx: string | undefined;
    let cubin: Uint8Array | undefined;
    if (typeof image === 'string') {
      if (image.length === 0) throw invalidValue('image', 'is an empty string; pass PTX text, a CUBIN or a fatbin.');
      ptx = image;
      bytes = new TextEncoder().encode(image);
    } else if (types.isUint8Array(image)) {
      const given = viewBytes(image); // the intrinsic slots, not properties the caller may have shadowed
      if (given.detached) throw detachedError('image', true);
      if (given.byteLength === 0) throw invalidValue('image', 'is empty; pass PTX text, a CUBIN or a fatbin.');
      // A copy: the caller may reuse its array while the load runs.
      bytes = new Uint8Array(given.byteLength);
      bytes.set(new Uint8Array(given.buffer, given.byteOffset, given.byteLength));
      if (startsWith(bytes, ELF_MAGIC) || startsWith(bytes, FATBIN_MAGIC)) {
        const problem = binaryImageProblem(bytes); // See Note [image bounds]
        if (problem) throw invalidValue('image', `${problem} Pass a complete CUBIN, fatbin or PTX file.`);
        cubin = bytes;
      } else {
        ptx = new TextDecoder().decode(bytes).replace(/\0+$/, '');
      }
    } else {
      throw invalidType('image', 'a string (PTX) or a Uint8Array (CUBIN, fatbin or PTX)', image);
    }
    requireCuda();
    return loadModule(bytes, resolveDevice(o.device), ptx, cubin);
  }

  /** The kernel whose `extern "C"` name is `name` (a C++ kernel without `extern "C"` has a mangled name: declare
   * kernels `extern "C"`), launched with arguments of the types in `signature`. Creates nothing on the device.
   * Where the driver can tell (CUDA 12.4 or newer), `signature` is checked against the kernel's parameters: their
   * number, and each size (`'ptr'`, `'f32'` and `'f64'` exactly, integers at most the type's width); a kernel the
   * driver reports without parameters is not checked.
   * The kernel is typed from the signature: a literal array (or one declared `as const`) gives `launch` the
   * argument types of {@link KernelArguments}, so a wrong argument fails in the compiler. Where the signature is not
   * a literal, name the argument types instead: `getFunction<[DeviceBuffer, number, number]>(name, signature)`.
   * @param signature - the parameter types in order, for example `['ptr', 'f32', 'u32']`.
   * @throws {@link CudaError} CUDA_ERROR_NOT_FOUND naming the kernel and listing the module's kernels;
   * `TypeError` ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE for a bad name or signature, or a signature that does
   * not match the kernel's parameters; {@link DestroyedError} after `unload()`.
   * Wraps: cuModuleGetFunction, cuFuncGetParamInfo. */
  getFunction<const S extends readonly ParamType[]>(name: string, signature: S): Kernel<KernelArguments<S>>;
  getFunction<Args extends readonly unknown[]>(name: string, signature: readonly ParamType[]): Kernel<Args>;
  getFunction(name: string, signature: readonly ParamType[]): Kernel {
    if (typeof name !== 'string') throw invalidType('name', 'a string (the kernel\'s extern "C" name)', name);
    if (name === '' || name.includes('\0')) throw invalidValue('name', `must be a kernel name without NUL characters; received ${JSON.stringify(name)}.`);
    const types = validateSignature(signature);
    const box = this.#use('getFunction');
    let kernelBox: Box;
    try {
      kernelBox = native.moduleGetFunction(box, name);
    } catch (error) {
      if (!(error instanceof CudaError) || error.code !== 'CUDA_ERROR_NOT_FOUND') throw error;
      const names = native.moduleFunctionNames(box);
      const known = names.length
        ? `; the module's kernels are ${names.map((n) => `"${n}"`).join(', ')}`
        : '; check that the kernel is declared extern "C" (C++ names are mangled)';
      throw new CudaError(error.result, error.code, error.description, error.call, `kernel "${name}" of a module on device ${this.device.ordinal}${known}`, error.sticky);
    }
    // An empty list is not trusted: it is also what a driver that cannot describe the kernel would report.
    const sizes = native.kernelParamSizes(kernelBox);
    if (sizes && sizes.length > 0) checkParamSizes(sizes, types, name);
    return new Kernel(internalConstruction, kernelBox, this, name, types);
  }

  /** True after `unload()`. */
  get unloaded(): boolean {
    return this.#unloaded;
  }

  /** Unloads the module (cuModuleUnload) and retires its kernels; idempotent; never throws after a device fault.
   * The driver may wait for work on the device before it frees the code, so unload once the module's launches are
   * done, not on a hot path. Wraps: cuModuleUnload. */
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

/** Loads checked bytes into `device`'s context and wraps them (Module.load, Program.compile). @internal */
export async function loadModule(bytes: Uint8Array, device: Device, ptx: string | undefined, cubin: Uint8Array | undefined): Promise<Module> {
  return modules.make(await native.moduleLoad(device.ordinal, bytes), device, ptx, cubin);
}

/** Checks a kernel signature; returns a frozen copy. @internal */
export function validateSignature(signature: unknown): readonly ParamType[] {
  const allowed = PARAM_TYPES.map((t) => `'${t}'`).join(', ');
  if (!Array.isArray(signature)) throw invalidType('signature', `an array of parameter types (${allowed})`, signature);
  signature.forEach((type, i) => {
    if (!PARAM_TYPES.includes(type as ParamType))
      throw invalidValue(`signature[${i}]`, `must be one of ${allowed}; received ${typeof type === 'string' ? JSON.stringify(type) : String(type)}.`);
  });
  return Object.freeze([...(signature as ParamType[])]);
}

const PARAM_BYTES: Record<ParamType, number> = { ptr: 8, i32: 4, u32: 4, i64: 8, u64: 8, f32: 4, f64: 8 };

/** Checks `signature` against the parameter sizes the driver reports for kernel `name` (cuFuncGetParamInfo):
 * the same count; `'ptr'`, `'f32'`, `'f64'` exactly their size; integer types at least as wide as the parameter
 * (a `bool` or `short` parameter takes `'i32'`/`'u32'`, whose low bytes the driver copies). @internal */
export function checkParamSizes(sizes: readonly number[], signature: readonly ParamType[], name: string): void {
  const fits = (type: ParamType, bytes: number) =>
    type === 'ptr' || type === 'f32' || type === 'f64' ? bytes === PARAM_BYTES[type] : bytes <= PARAM_BYTES[type];
  const bad = sizes.length === signature.length ? signature.findIndex((type, i) => !fits(type, sizes[i]!)) : -2;
  if (bad === -1) return;
  const theirs = sizes.length ? `${sizes.length} parameter(s) of ${sizes.join(', ')} bytes` : 'no parameters';
  const where = bad >= 0 ? ` (parameter ${bad} is ${sizes[bad]} bytes, which does not fit '${signature[bad]}')` : '';
  throw invalidValue(
    'signature',
    `does not match kernel "${name}": it lists ${signature.length} parameter type(s) [${signature.join(', ')}], but the kernel takes ${theirs}${where}.`,
  );
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

const I32_MIN = -(2 ** 31);
const I32_MAX = 2 ** 31 - 1;
const U32_MAX = 2 ** 32 - 1;
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const U64_MAX = 2n ** 64n - 1n;

/** Packs kernel arguments into one 8-byte slot each, checking each against its parameter type; the slots are
 * reused by every launch of the kernel (cuLaunchKernel copies them before it returns). Two phases, so that nothing
 * is marked used on a stream unless every argument is valid: {@link ArgumentPacker.pack} checks and writes every
 * value, {@link ArgumentPacker.bindPointers} then asks each `DeviceBuffer` for its pointer (which records its use
 * on the stream). @internal */
export class ArgumentPacker {
  /** The slots, as passed to the native launch. */
  readonly bytes: Uint8Array;
  readonly #view: DataView;
  readonly #signature: readonly ParamType[];
  readonly #kernel: string;
  readonly #pending: Int32Array; // positions of arguments that are KernelPointers, found by pack()
  #pendingCount = 0;

  constructor(signature: readonly ParamType[], kernel: string) {
    this.#signature = signature;
    this.#kernel = kernel;
    this.bytes = new Uint8Array(KERNEL_ARG_SLOT_BYTES * signature.length);
    this.#view = new DataView(this.bytes.buffer);
    this.#pending = new Int32Array(signature.length);
  }

  #hint(): string {
    return `Kernel "${this.#kernel}" takes (${this.#signature.join(', ')}).`;
  }

  /** Checks count, type and range of every argument and writes all but the `DeviceBuffer` pointers.
   * @throws `TypeError` ERR_INVALID_ARG_VALUE for a wrong count; `TypeError` ERR_INVALID_ARG_TYPE or `RangeError`
   * ERR_OUT_OF_RANGE naming the argument (`"args[i]"`) and its parameter type. */
  pack(args: readonly unknown[]): void {
    const signature = this.#signature;
    if (args.length !== signature.length)
      throw invalidValue('args', `must be ${signature.length} argument(s) for kernel "${this.#kernel}" (${signature.join(', ')}); received ${args.length}.`);
    const view = this.#view;
    this.#pendingCount = 0;
    for (let i = 0; i < signature.length; i++) {
      const type = signature[i]!;
      const value = args[i];
      const at = KERNEL_ARG_SLOT_BYTES * i;
      switch (type) {
        case 'ptr':
          if (typeof value === 'bigint') {
            if (value < 0n || value > U64_MAX) throw outOfRange(`args[${i}]`, 'a ptr: a device address from 0n to 2n ** 64n - 1n', value, this.#hint());
            view.setBigUint64(at, value, true);
          } else if (isKernelPointer(value)) {
            this.#pending[this.#pendingCount++] = i;
          } else {
            throw invalidType(`args[${i}]`, 'a ptr: a DeviceBuffer, a ManagedBuffer or a bigint device address', value, this.#hint());
          }
          break;
        case 'i32':
          if (typeof value !== 'number') throw invalidType(`args[${i}]`, 'an i32 (an integer number)', value, this.#hint());
          if (!Number.isInteger(value) || value < I32_MIN || value > I32_MAX)
            throw outOfRange(`args[${i}]`, `an i32: an integer from ${I32_MIN} to ${I32_MAX}`, value, this.#hint());
          view.setInt32(at, value, true);
          break;
        case 'u32':
          if (typeof value !== 'number') throw invalidType(`args[${i}]`, 'a u32 (an integer number)', value, this.#hint());
          if (!Number.isInteger(value) || value < 0 || value > U32_MAX)
            throw outOfRange(`args[${i}]`, `a u32: an integer from 0 to ${U32_MAX}`, value, this.#hint());
          view.setUint32(at, value, true);
          break;
        case 'i64':
        case 'u64': {
          const [min, max] = type === 'i64' ? [I64_MIN, I64_MAX] : [0n, U64_MAX];
          let big: bigint;
          if (typeof value === 'bigint') big = value;
          else if (typeof value === 'number' && Number.isSafeInteger(value)) big = BigInt(value);
          else if (typeof value === 'number')
            throw outOfRange(`args[${i}]`, `an ${type}: a bigint or a safe integer from ${min} to ${max}`, value, `Pass a bigint for values beyond 2 ** 53. ${this.#hint()}`);
          else throw invalidType(`args[${i}]`, `an ${type} (a bigint or a safe integer)`, value, this.#hint());
          if (big < min || big > max) throw outOfRange(`args[${i}]`, `an ${type}: an integer from ${min} to ${max}`, value, this.#hint());
          if (type === 'i64') view.setBigInt64(at, big, true);
          else view.setBigUint64(at, big, true);
          break;
        }
        case 'f32':
          if (typeof value !== 'number') throw invalidType(`args[${i}]`, 'an f32 (a number)', value, this.#hint());
          if (Number.isFinite(value) && !Number.isFinite(Math.fround(value)))
            throw outOfRange(`args[${i}]`, 'an f32: a number within the float32 range (magnitude at most 3.4028234663852886e38), Infinity, -Infinity or NaN', value, this.#hint());
          view.setFloat32(at, value, true);
          break;
        case 'f64':
          if (typeof value !== 'number') throw invalidType(`args[${i}]`, 'an f64 (a number)', value, this.#hint());
          view.setFloat64(at, value, true);
          break;
      }
    }
  }

  /** Writes the pointers of the `DeviceBuffer` arguments found by the last {@link ArgumentPacker.pack}, each of
   * which records that it is used on `stream`. Call only after everything else that can fail has been checked. */
  bindPointers(args: readonly unknown[], stream: Stream): void {
    for (let k = 0; k < this.#pendingCount; k++) {
      const i = this.#pending[k]!;
      this.#view.setBigUint64(KERNEL_ARG_SLOT_BYTES * i, (args[i] as KernelPointer)[asKernelPointer](stream), true);
    }
    this.#pendingCount = 0;
  }
}

const LAUNCH_KEYS: readonly string[] = ['grid', 'block', 'dynamicSharedMemBytes', 'stream'];

/** The native box of a kernel, also after its module was unloaded (for graphs to hold the module). @internal */
export const kernels = privateState<{ box(kernel: Kernel<readonly unknown[]>): Box }>('Kernel', ['box']);

/** A kernel of a loaded module, with the parameter types it is launched with. Borrows its module (and keeps it
 * reachable); after the module is unloaded every method throws {@link DestroyedError}.
 * Thread-safety: usable from the thread that loaded its module. */
export class Kernel<Args extends readonly unknown[] = unknown[]> {
  #box: Box;
  #module: Module;
  #packer: ArgumentPacker;
  #shape = [1, 1, 1, 1, 1, 1];
  /** The kernel's `extern "C"` name in the module. */
  readonly name: string;
  /** The parameter types, in order. */
  readonly signature: readonly ParamType[];

  /** @internal (from {@link Module.getFunction}) */
  constructor(token: symbol, box: Box, module: Module, name: string, signature: readonly ParamType[]) {
    checkConstruction(token, 'Kernel', 'module.getFunction(name, signature)');
    this.#box = box;
    this.#module = module;
    this.name = name;
    this.signature = signature;
    lockFields(this, ['name', 'signature']);
    this.#packer = new ArgumentPacker(signature, name);
  }

  static {
    guardReceivers(Kernel, (value) => #box in value);
    register(kernels, { box: (kernel) => kernel.#box });
  }

  #use(method: string): Box {
    modules.box(this.#module, `kernel.${method}`); // the user called a kernel's method, not the module's
    return this.#box;
  }

  /** The module the kernel belongs to. */
  get module(): Module {
    return this.#module;
  }

  /** What the compiled kernel uses and allows, read from the driver on each access.
   * @throws {@link DestroyedError} after the module was unloaded. Wraps: cuFuncGetAttribute. */
  get attributes(): KernelAttributes {
    return native.kernelAttributes(this.#use('attributes'));
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
    return native.kernelMaxPotentialBlockSize(this.#use('maxPotentialBlockSize'), shared, limit);
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
    native.kernelSetMaxDynamicSharedMemBytes(this.#use('setMaxDynamicSharedMemBytes'), bytes);
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
   * Wraps: cuLaunchKernel. Thread-safety: the thread that loaded the module; any stream of the kernel's device.
   * @example
   * ```ts
   * saxpy.launch({ grid: Math.ceil(n / 256), block: 256, stream }, n, 2.0, x, y);
   * ```
   */
  launch(options: LaunchOptions, ...args: Args): void {
    if (typeof options !== 'object' || options === null || Array.isArray(options))
      throw invalidType('options', 'a LaunchOptions object ({ grid, block, dynamicSharedMemBytes, stream })', options);
    for (const key in options) if (!LAUNCH_KEYS.includes(key)) validateOptions(options, 'options', 'launch', LAUNCH_KEYS);
    const shape = this.#shape;
    readDims(options.grid, 'options.grid', shape, 0);
    readDims(options.block, 'options.block', shape, 3);
    const shared = options.dynamicSharedMemBytes === undefined ? 0 : validateInteger(options.dynamicSharedMemBytes, 'options.dynamicSharedMemBytes', 0, 2 ** 32 - 1);
    const box = this.#use('launch');
    const device = this.#module.device;
    const stream = options.stream === undefined ? currentStream(device) : options.stream;
    if (!streams.is(stream)) throw invalidType('options.stream', 'a Stream', stream);
    if (stream.device !== device)
      throw invalidValue('options.stream', `is on device ${stream.device.ordinal}, but kernel "${this.name}" is loaded on device ${device.ordinal}.`);
    this.#packer.pack(args);
    const streamHandle = streamBox(stream, 'kernel.launch');
    this.#packer.bindPointers(args, stream);
    native.kernelLaunch(box, streamHandle, shape[0]!, shape[1]!, shape[2]!, shape[3]!, shape[4]!, shape[5]!, shared, this.#packer.bytes);
    noteCapturedLaunch(streamHandle, this);
  }
}
