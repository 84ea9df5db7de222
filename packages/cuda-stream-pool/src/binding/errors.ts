// The public error classes: what users test with instanceof, and the builder the native layer throws through.

/** A CUDA driver call failed.
 *
 * `name` is `'CudaError'`; `code` is the CUresult's name as a string (for example `'CUDA_ERROR_ILLEGAL_ADDRESS'`),
 * like the `code` of Node's system errors; `result` its number (700); `call` the driver function that returned it
 * (`'cuStreamSynchronize'`); `sticky` is true for errors that leave the device's context unusable for the rest of
 * the process (illegal address, launch failure, ...): then `device.healthy` is false and every later wait on that
 * device rejects with such an error. Work of another device that waited on the faulted device's work rejects with
 * the same error, its message saying `(waiting on device N, which faulted)`; its own device stays healthy.
 * `CUDA_ERROR_NOT_READY` is never thrown as an error, except by {@link Event.elapsedMs}. */
export class CudaError extends Error {
  /** Always `'CudaError'`: the class's name, which `String(error)` and the first line of `error.stack` begin with. */
  override readonly name = 'CudaError';
  /** The CUresult name, for example `'CUDA_ERROR_OUT_OF_MEMORY'`, as `cuGetErrorName` gives it; `'CUresult <number>'`
   * for a code the driver cannot name. */
  readonly code: string;
  /** The CUresult number, for example 2 for `CUDA_ERROR_OUT_OF_MEMORY`. */
  readonly result: number;
  /** The driver function that failed, for example `'cuMemAllocAsync'`. */
  readonly call: string;
  /** The driver's own description of the error. */
  readonly description: string;
  /** True when the error is sticky: the device's context is unusable in this process. */
  readonly sticky: boolean;

  constructor(result: number, code: string, description: string, call: string, detail: string, sticky: boolean) {
    const where = detail ? ` on ${detail}` : '';
    const hint = sticky ? ' (sticky: the device is unusable in this process; restart it)' : '';
    super(`${code}: ${call} failed${where}: ${description}${hint}`);
    this.code = code;
    this.result = result;
    this.call = call;
    this.description = description;
    this.sticky = sticky;
  }
}

/** The CUDA driver cannot be used here: no driver library, a driver older than CUDA 12.0, no device, or (for
 * `Program.compile`) no NVRTC. The message says what was tried, what failed and what to do: it starts "CUDA is not
 * available" for the driver, "NVRTC (libnvrtc) is missing" for the compiler (the driver may be fine then). */
export class CudaUnavailableError extends Error {
  /** Always `'CudaUnavailableError'`: the class's name, which `String(error)` and the first line of `error.stack` begin with. */
  override readonly name = 'CudaUnavailableError';
  /** Always `'ERR_CUDA_UNAVAILABLE'`, so callers can branch on `code` as they do for Node's errors. */
  readonly code = 'ERR_CUDA_UNAVAILABLE';
  /** What is missing, in words; the same text as `cuda.unavailableReason` for the driver. */
  readonly reason: string;
  /** What cannot be used: `'CUDA'` (the driver or a device) or `'NVRTC'` (the runtime compiler). */
  readonly component: 'CUDA' | 'NVRTC';
  constructor(reason: string, component: 'CUDA' | 'NVRTC' = 'CUDA') {
    super(component === 'NVRTC' ? `NVRTC (libnvrtc) is missing: ${reason}` : `CUDA is not available: ${reason}`);
    this.reason = reason;
    this.component = component;
  }
}

/** A method was called on an object that was destroyed (or whose pool or lease ended). Never reaches the driver. */
export class DestroyedError extends Error {
  /** Always `'DestroyedError'`: the class's name, which `String(error)` and the first line of `error.stack` begin with. */
  override readonly name = 'DestroyedError';
  /** The kind of object: `'Stream'`, `'Event'`, `'StreamPool'`, `'StreamLease'`, `'DeviceBuffer'`, ... */
  readonly resource: string;
  /** The method that was called, without its object (`'copy'` for `stream.copy()`). */
  readonly method: string;
  /** `method` is the method's name on `resource` (`'query'`: "Stream.query()"), or the call the user made when
   * that is a method of another object (`'stream.copy'`, `'DeviceBuffer.alloc'`): the message names that call. */
  constructor(resource: string, method: string, why = 'was destroyed') {
    const call = method.includes('.') ? method : `${resource}.${method}`;
    super(`${call}(): the ${resource} ${why}`);
    this.resource = resource;
    this.method = call.slice(call.lastIndexOf('.') + 1);
  }
}

/** `error` again, naming `call` (the method the user called) instead of the inner call that found the destroyed
 * object. @internal */
export function renameDestroyed(error: unknown, call: string): unknown {
  if (!(error instanceof DestroyedError) || error.message.startsWith(`${call}(`)) return error;
  const why = error.message.slice(error.message.indexOf(`(): the ${error.resource} `) + `(): the ${error.resource} `.length);
  return new DestroyedError(error.resource, call, why);
}

/** NVRTC rejected a program. `log` holds NVRTC's whole log, with file names and line numbers. */
export class CompileError extends Error {
  /** Always `'CompileError'`: the class's name, which `String(error)` and the first line of `error.stack` begin with. */
  override readonly name = 'CompileError';
  /** NVRTC's complete compile log. */
  readonly log: string;
  constructor(programName: string, log: string) {
    super(`NVRTC could not compile ${programName}:\n${log}`);
    this.log = log;
  }
}

/** An operation that is illegal while a stream captures a graph was refused before it reached the driver, so the
 * capture goes on unharmed (the driver would have invalidated it). `operation` names what was refused
 * (`'stream.synchronize()'`), `streamId` the capturing stream (cuStreamGetId). See {@link Stream.beginCapture}. */
export class CaptureError extends Error {
  /** Always `'CaptureError'`: the class's name, which `String(error)` and the first line of `error.stack` begin with. */
  override readonly name = 'CaptureError';
  /** Always `'ERR_STREAM_CAPTURING'`. */
  readonly code = 'ERR_STREAM_CAPTURING';
  /** The refused operation, for example `'stream.synchronize()'`. */
  readonly operation: string;
  /** The id of the stream whose capture made it illegal. */
  readonly streamId: bigint;
  constructor(operation: string, streamId: bigint, why: string) {
    super(`${operation}: ${why} (stream ${streamId})`);
    this.operation = operation;
    this.streamId = streamId;
  }
}

/** The device or the driver lacks a feature that the call asked for, found before anything reached the driver: for
 * example thread-block clusters or programmatic dependent launch on a device below compute capability 9.0, or a
 * cooperative launch where the device has none. Nothing was queued; everything else keeps working. */
export class UnsupportedError extends Error {
  /** Always `'UnsupportedError'`: the class's name, which `String(error)` and the first line of `error.stack` begin with. */
  override readonly name = 'UnsupportedError';
  /** Always `'ERR_CUDA_UNSUPPORTED'`. */
  readonly code = 'ERR_CUDA_UNSUPPORTED';
  /** What is missing, in words: `'thread-block clusters'`, `'cooperative launch'`, `'programmatic dependent launch'`. */
  readonly feature: string;
  /** The ordinal of the device that lacks it. */
  readonly device: number;
  constructor(feature: string, device: number, why: string) {
    super(`${feature} is not supported on device ${device}: ${why}`);
    this.feature = feature;
    this.device = device;
  }
}

/** The kinds of error the addon asks makeNativeError for, each with how many arguments follow the kind
 * (src/binding/errors.cc; checked by test/cpu/contract.test.ts). */
export const NATIVE_ERROR_KINDS = { cuda: 6, destroyed: 2, unavailable: 2 } as const;

/** Builds the errors the native layer raises; handed to the addon at load, so that C++ throws the same classes. */
export function makeNativeError(kind: string, ...args: unknown[]): Error {
  switch (kind) {
    case 'cuda': {
      const [result, code, description, call, detail, sticky] = args as [number, string, string, string, string, boolean];
      return new CudaError(result, code, description, call, detail, sticky);
    }
    case 'destroyed':
      return new DestroyedError(args[0] as string, args[1] as string);
    case 'unavailable':
      return new CudaUnavailableError(args[0] as string, args[1] === 'NVRTC' ? 'NVRTC' : 'CUDA');
    default:
      return new Error(`cuda-stream-pool internal: unknown error kind ${kind}`);
  }
}
