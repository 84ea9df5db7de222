// Modules (PTX, CUBIN or fatbin loaded into a device's primary context) and the lookup of their kernels by name.
// Mechanism in kernel/module.cc.
import { types } from 'node:util';

import { native, type NativeRef } from '../binding/binding.js';
import { adopt } from '../binding/native-ref-lifetime.js';
import { privateState, register } from '../internal/handles.js';
import { Device, resolveDevice } from '../device/device.js';
import { CudaError, DestroyedError } from '../binding/errors.js';
import { requireCuda } from '../binding/cuda.js';
import { Kernel, modules } from './kernel.js';
import { isBinaryImage, binaryImageProblem } from './module-image.js';
import { checkParamSizes, validateSignature, type KernelArguments, type ParamType } from './signature.js';
import { checkConstruction, guardReceivers, internalConstruction, invalidType, invalidValue, lockFields, validateOptions } from '../internal/validate.js';
import { detachedError, viewBytes } from '../memory/host-views.js';

/** Options for {@link Module.load}. */
export interface ModuleLoadOptions {
  /** The device whose primary context loads the module. @defaultValue 0 */
  device?: Device | number;
}

// A module's construction from a loaded ref, for loadModule (its ref, for its kernels, is `modules` in kernel.ts).
const construction = privateState<{
  make(ref: NativeRef, device: Device, ptx: string | undefined, cubin: Uint8Array | undefined): Module;
}>('Module', ['make']);

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
  #ref: NativeRef;
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

  private constructor(token: symbol, ref: NativeRef, device: Device, ptx: string | undefined, cubin: Uint8Array | undefined) {
    checkConstruction(token, 'Module', 'Module.load() or Program.compile()');
    adopt(this, ref);
    this.#ref = ref;
    this.device = device;
    this.ptx = ptx;
    this.cubin = cubin;
    lockFields(this, ['device', 'ptx', 'cubin']);
  }

  static {
    guardReceivers(Module, (value) => #ref in value);
    register(modules, { ref: (module, method) => module.#use(method) });
    register(construction, { make: (ref, device, ptx, cubin) => new Module(internalConstruction, ref, device, ptx, cubin) });
  }

  #use(method: string): NativeRef {
    if (this.#unloaded) throw new DestroyedError('Module', method, 'was unloaded');
    return this.#ref;
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
      if (isBinaryImage(bytes)) {
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
    const ref = this.#use('getFunction');
    let kernelRef: NativeRef;
    try {
      kernelRef = native.moduleGetFunction(ref, name);
    } catch (error) {
      if (!(error instanceof CudaError) || error.code !== 'CUDA_ERROR_NOT_FOUND') throw error;
      const names = native.moduleFunctionNames(ref);
      const known = names.length
        ? `; the module's kernels are ${names.map((n) => `"${n}"`).join(', ')}`
        : '; check that the kernel is declared extern "C" (C++ names are mangled)';
      throw new CudaError(error.result, error.code, error.description, error.call, `kernel "${name}" of a module on device ${this.device.ordinal}${known}`, error.sticky);
    }
    // An empty list is not trusted: it is also what a driver that cannot describe the kernel would report.
    const sizes = native.kernelParamSizes(kernelRef);
    if (sizes && sizes.length > 0) checkParamSizes(sizes, types, name);
    return new Kernel(internalConstruction, kernelRef, this, name, types);
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
    native.moduleUnload(this.#ref);
  }

  /** Same as {@link Module.unload}. */
  [Symbol.dispose](): void {
    this.unload();
  }
}

/** Loads checked bytes into `device`'s context and wraps them (Module.load, Program.compile). @internal */
export async function loadModule(bytes: Uint8Array, device: Device, ptx: string | undefined, cubin: Uint8Array | undefined): Promise<Module> {
  return construction.make(await native.moduleLoad(device.ordinal, bytes), device, ptx, cubin);
}
