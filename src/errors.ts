// The public error classes. See DESIGN.md "Errors users can instanceof".

/** A CUDA driver call failed.
 *
 * `name` is `'CudaError'`; `code` is the CUresult's name as a string (for example `'CUDA_ERROR_ILLEGAL_ADDRESS'`),
 * like the `code` of Node's system errors; `result` its number (700); `call` the driver function that returned it
 * (`'cuStreamSynchronize'`); `sticky` is true for errors that leave the device's context unusable for the rest of
 * the process (illegal address, launch failure, ...): then `device.healthy` is false and every later wait on that
 * device rejects with such an error. `CUDA_ERROR_NOT_READY` is never thrown as an error, except by
 * {@link Event.elapsedMs}. */
export class CudaError extends Error {
  override readonly name = 'CudaError';
  /** The CUresult name, for example `'CUDA_ERROR_OUT_OF_MEMORY'`. */
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
 * `Program.compile`) no NVRTC. The message says what was tried, what failed and what to do. */
export class CudaUnavailableError extends Error {
  override readonly name = 'CudaUnavailableError';
  /** Always `'ERR_CUDA_UNAVAILABLE'`, so callers can branch on `code` as they do for Node's errors. */
  readonly code = 'ERR_CUDA_UNAVAILABLE';
  /** What is missing, in words; the same text as `cuda.unavailableReason` for the driver. */
  readonly reason: string;
  constructor(reason: string) {
    super(`CUDA is not available: ${reason}`);
    this.reason = reason;
  }
}

/** A method was called on an object that was destroyed (or whose pool or lease ended). Never reaches the driver. */
export class DestroyedError extends Error {
  override readonly name = 'DestroyedError';
  /** The kind of object: `'Stream'`, `'Event'`, `'StreamPool'`, `'StreamLease'`, `'DeviceBuffer'`, ... */
  readonly resource: string;
  /** The method that was called. */
  readonly method: string;
  constructor(resource: string, method: string, why = 'was destroyed') {
    super(`${resource}.${method}(): the ${resource} ${why}`);
    this.resource = resource;
    this.method = method;
  }
}

/** NVRTC rejected a program. `log` holds NVRTC's whole log, with file names and line numbers. */
export class CompileError extends Error {
  override readonly name = 'CompileError';
  /** NVRTC's complete compile log. */
  readonly log: string;
  constructor(programName: string, log: string) {
    super(`NVRTC could not compile ${programName}:\n${log}`);
    this.log = log;
  }
}

/** Builds the errors the native layer raises; handed to the addon at load (see STYLE.md section 5). */
export function makeNativeError(kind: string, ...args: unknown[]): Error {
  switch (kind) {
    case 'cuda': {
      const [result, code, description, call, detail, sticky] = args as [number, string, string, string, string, boolean];
      return new CudaError(result, code, description, call, detail, sticky);
    }
    case 'destroyed':
      return new DestroyedError(args[0] as string, args[1] as string);
    case 'unavailable':
      return new CudaUnavailableError(args[0] as string);
    default:
      return new Error(`cuda-stream-pool internal: unknown error kind ${kind}`);
  }
}
