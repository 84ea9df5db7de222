// Programs: CUDA C++ source compiled at run time by NVRTC (opened with dlopen, see kernel/program.cc) and loaded as
// a Module. The policy lives here: which architecture to compile for, which output to keep, which error to raise.
import { native } from '../binding/binding.js';
import { Device, resolveDevice } from '../device/device.js';
import { CompileError, CudaUnavailableError } from '../binding/errors.js';
import { driverState } from '../binding/cuda.js';
import { CACHE_DIRECTORY_VARIABLE, compileKey, lookupCompiled, namesIncludes, storeCompiled } from './compile-cache.js';
import { loadModule, type Module } from './module.js';
import { illegalConstructor, invalidType, invalidValue, validateBoolean, validateOptions } from '../internal/validate.js';

/** Options for {@link Program.compile}. */
export interface CompileOptions {
  /** The program's file name as NVRTC's diagnostics show it: `program.cu(7): error: ...`. @defaultValue 'program.cu' */
  name?: string;
  /** NVRTC options, passed as they are, one option per string (`'-std=c++17'`, `'--use_fast_math'`,
   * `'-DN=256'`, `'-lineinfo'`). Without an `-arch`/`--gpu-architecture` option the program is compiled for the
   * device's own architecture (`--gpu-architecture=sm_XY` from its compute capability) to a CUBIN; with one, that
   * option is respected: `sm_XY` gives a CUBIN, `compute_XY` gives PTX that the driver compiles at load.
   * @defaultValue [] */
  options?: readonly string[];
  /** The device to compile for and load the module on. @defaultValue 0 */
  device?: Device | number;
  /** Whether to use the compile cache (see {@link Program.compile}); false always compiles and stores nothing.
   * @defaultValue true */
  cache?: boolean;
  /** A directory for the on-disk compile cache, created when missing; entries there serve later processes too.
   * @defaultValue the `CUDA_STREAM_POOL_CACHE_DIR` environment variable; without it the cache is in memory only */
  cacheDirectory?: string;
}

/** NVRTC as this process opened it. @internal */
type NvrtcInfo =
  | { available: false; reason: string }
  | { available: true; path: string; major: number; minor: number; supportedArchs: number[] };

let nvrtc: Promise<NvrtcInfo> | undefined;

/** Opens NVRTC on first use (off the JS thread; once per process, remembered per thread). Never rejects. @internal */
export function nvrtcInfo(): Promise<NvrtcInfo> {
  nvrtc ??= native.nvrtcLoad();
  return nvrtc;
}

const ARCH_OPTION = /^(?:-arch|--gpu-architecture)(?:=(.*))?$/;

/** The NVRTC options for a compile: the caller's, plus `--gpu-architecture=sm_XY` for `computeCapability` when the
 * caller named no architecture. When this NVRTC lists the architectures it supports and the device's is newer than
 * all of them, the newest supported virtual architecture (`compute_XY`) is used instead, so the driver compiles the
 * PTX for the device. `output` says what to keep: a CUBIN for a real architecture (`sm_`), else PTX. @internal */
export function compilerOptions(
  userOptions: readonly string[],
  computeCapability: { major: number; minor: number },
  supportedArchs: readonly number[],
): { options: string[]; output: 'cubin' | 'ptx' } {
  let arch: string | undefined;
  userOptions.forEach((option, i) => {
    const match = ARCH_OPTION.exec(option);
    if (match) arch = match[1] ?? userOptions[i + 1] ?? '';
  });
  if (arch !== undefined) return { options: [...userOptions], output: arch.startsWith('sm_') ? 'cubin' : 'ptx' };
  const own = computeCapability.major * 10 + computeCapability.minor;
  const newest = supportedArchs.length ? Math.max(...supportedArchs) : own;
  const chosen = own > newest ? `compute_${newest}` : `sm_${own}`;
  return { options: [...userOptions, `--gpu-architecture=${chosen}`], output: chosen.startsWith('sm_') ? 'cubin' : 'ptx' };
}

function validateText(value: unknown, name: string, what: string, allowEmpty: boolean): string {
  if (typeof value !== 'string') throw invalidType(name, what, value);
  if (!allowEmpty && value === '') throw invalidValue(name, `must not be empty; pass ${what}.`);
  if (value.includes('\0')) throw invalidValue(name, `must not contain NUL characters (NVRTC reads C strings); ${what} without them.`);
  return value;
}

/** CUDA C++ compiled at run time with NVRTC. */
export class Program {
  private constructor() {
    throw illegalConstructor('Program', 'Program.compile(source): Program has only static methods');
  }

  /** Compiles CUDA C++ `source` with NVRTC off the JS thread and loads the result on the device as a {@link Module}.
   * By default the code is compiled for the device's own architecture to a CUBIN, so nothing is JIT-compiled at load.
   * Kernels are then found by their `extern "C"` names (`module.getFunction('saxpy', [...])`): declare every kernel
   * you launch `extern "C"`, since C++ names are mangled. NVRTC has no standard library headers.
   *
   * Compiles are cached: a call with the same source, name, options, device architecture, NVRTC version and driver
   * version as an earlier one loads the earlier result instead of compiling (a compile costs about 14-30 ms, loading a
   * cached CUBIN well under 1 ms). The cache is in memory per thread (the 256 most recently used programs) and, when
   * `options.cacheDirectory` or the `CUDA_STREAM_POOL_CACHE_DIR` environment variable names a directory, on disk
   * too, for later processes and other threads. A compile whose options name include paths or files (`-I`,
   * `--include-path`, `-include`, `--pre-include`) is never cached, since the key cannot see those files. A corrupt
   * or truncated disk entry is ignored and rewritten; a cache directory that cannot be written only warns once.
   * Each call still returns its own module (loaded with cuModuleLoadDataEx), which the caller unloads.
   *
   * @param source - the program text, for example `extern "C" __global__ void k(float* x) { ... }`; no NUL characters.
   * @throws (rejects) {@link CompileError} when NVRTC rejects the program or an option, with NVRTC's whole log in
   * `.log` (`program.cu(7): error: ...`); {@link CudaUnavailableError} with `component` 'NVRTC' and a message starting
   * "NVRTC (libnvrtc) is missing" when NVRTC cannot be opened (naming the
   * library names and the places searched: the loader's path, `$CUDA_PATH/lib64`, `$CUDA_HOME/lib64`,
   * `/usr/local/cuda/lib64`, or only `CUDA_STREAM_POOL_LIBNVRTC` when set) or without a usable driver or GPU (when
   * both are missing, the message names the driver first, then NVRTC);
   * `TypeError` ERR_INVALID_ARG_TYPE / ERR_INVALID_ARG_VALUE for bad arguments or options; {@link CudaError} when the
   * driver cannot load the result.
   * Wraps: nvrtcCreateProgram, nvrtcCompileProgram, nvrtcGetCUBIN/nvrtcGetPTX, nvrtcGetProgramLog, then
   * cuModuleLoadDataEx. Thread-safety: any thread or worker; compiles run in parallel on libuv's thread pool.
   * Lifetime: the caller owns the module (`unload()` or `using`).
   *
   * @example
   * ```ts
   * const program = await Program.compile(`
   *   extern "C" __global__ void saxpy(unsigned n, float a, const float* x, float* y) {
   *     unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
   *     if (i < n) y[i] = a * x[i] + y[i];
   *   }`);
   * const saxpy = program.getFunction('saxpy', ['u32', 'f32', 'ptr', 'ptr']);
   * saxpy.launch({ grid: Math.ceil(n / 256), block: 256, stream }, n, 2, x, y);
   * writeFileSync('saxpy.cubin', program.cubin!); // Module.load(readFileSync('saxpy.cubin')) next time
   * ```
   */
  static async compile(source: string, options?: CompileOptions): Promise<Module> {
    // Phase 1: arguments and options, before anything is opened.
    validateText(source, 'source', 'CUDA C++ source text (a string)', true);
    const o = validateOptions<CompileOptions>(options, 'options', 'Program.compile', ['name', 'options', 'device', 'cache', 'cacheDirectory']);
    const name = o.name === undefined ? 'program.cu' : validateText(o.name, 'options.name', 'a file name such as "saxpy.cu"', false);
    const given = o.options === undefined ? [] : o.options;
    if (!Array.isArray(given)) throw invalidType('options.options', 'an array of NVRTC option strings', given);
    given.forEach((option, i) => validateText(option, `options.options[${i}]`, 'an NVRTC option string such as "-std=c++17"', false));
    const deviceOption = o.device; // read once
    if (deviceOption !== undefined && !(deviceOption instanceof Device) && typeof deviceOption !== 'number')
      throw invalidType('options.device', 'a Device or a device ordinal (number)', deviceOption);
    if (o.cache !== undefined) validateBoolean(o.cache, 'options.cache');
    const cacheDirectory =
      o.cacheDirectory !== undefined
        ? validateText(o.cacheDirectory, 'options.cacheDirectory', 'a directory path', false)
        : process.env[CACHE_DIRECTORY_VARIABLE] || undefined;
    // Phase 2: the driver, then the device it compiles for (a bad ordinal is the caller's error, whatever else is
    // missing), then the compiler.
    const compiler = await nvrtcInfo();
    const driver = driverState();
    if (!driver.available)
      throw new CudaUnavailableError(compiler.available ? `${driver.reason}` : `${driver.reason} Also, ${compiler.reason}`);
    const device = resolveDevice(deviceOption);
    if (!compiler.available) throw new CudaUnavailableError(compiler.reason, 'NVRTC');
    const { options: args, output } = compilerOptions(given, device.computeCapability, compiler.supportedArchs);
    // Phase 3: the cache (See Note [compile cache] in kernel/compile-cache.ts), else compile off the JS thread; then load.
    const cached = o.cache !== false && !namesIncludes(given);
    const key = cached
      ? compileKey({
          source,
          name,
          options: given,
          computeCapability: device.computeCapability,
          nvrtcVersion: `${compiler.major}.${compiler.minor}`,
          driverVersion: driver.driverVersion ?? 0,
        })
      : '';
    const hit = cached ? await lookupCompiled(key, cacheDirectory) : undefined;
    if (hit) {
      const cubin = hit.cubin && new Uint8Array(hit.cubin); // the module's own copy: callers may change theirs
      return loadModule(cubin ?? new TextEncoder().encode(hit.ptx ?? ''), device, hit.ptx, cubin);
    }
    const result = await native.nvrtcCompile(source, name, args, output === 'cubin');
    if (result.result !== 0) {
      // A program with errors: NVRTC's log says it all. Anything else (a bad option, no memory, no builtins): the log,
      // if any, follows the failed call and its result.
      const failed = `${result.call} failed with ${result.resultName}`;
      const log = result.resultName === 'NVRTC_ERROR_COMPILATION' && result.log ? result.log : `${failed}${result.log ? `\n${result.log}` : ''}`;
      throw new CompileError(name, log);
    }
    const bytes = result.cubin ?? new TextEncoder().encode(result.ptx ?? '');
    const module = await loadModule(bytes, device, result.ptx, result.cubin);
    if (cached) await storeCompiled(key, result.cubin ? { cubin: new Uint8Array(result.cubin) } : { ptx: result.ptx ?? '' }, cacheDirectory);
    return module;
  }
}
