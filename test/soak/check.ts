// What counts as a correct error in the soak: the library's typed errors only, each of the kind the call deserves.
import { CaptureError, CompileError, CudaError, DestroyedError } from 'cuda-stream-pool';

/** A broken invariant: the run fails with the seed, the step and this message. */
export class SoakFailure extends Error {
  override readonly name = 'SoakFailure';
}

/** The kinds of typed error an invalid call may get:
 * - `type`: TypeError ERR_INVALID_ARG_TYPE; `value`: TypeError ERR_INVALID_ARG_VALUE; `range`: RangeError
 *   ERR_OUT_OF_RANGE (Node's argument errors);
 * - `destroyed`: DestroyedError (use after destroy, free, unload, release or pool end);
 * - `cuda`: CudaError (the driver refused);
 * - `capture`: CaptureError ERR_STREAM_CAPTURING (an operation illegal while its stream captures a graph);
 * - `compile`: CompileError with NVRTC's log (a program NVRTC rejects). */
export type ErrorKind = 'type' | 'value' | 'range' | 'destroyed' | 'cuda' | 'capture' | 'compile';

const NODE_CODES: Record<'type' | 'value' | 'range', { cls: ErrorConstructor | RangeErrorConstructor | TypeErrorConstructor; code: string }> = {
  type: { cls: TypeError, code: 'ERR_INVALID_ARG_TYPE' },
  value: { cls: TypeError, code: 'ERR_INVALID_ARG_VALUE' },
  range: { cls: RangeError, code: 'ERR_OUT_OF_RANGE' },
};

function describe(error: unknown): string {
  if (!(error instanceof Error)) return `a thrown ${error === null ? 'null' : typeof error} (${String(error)})`;
  const code = (error as { code?: unknown }).code;
  return `${error.constructor.name} ${code === undefined ? '(no code)' : `[${String(code)}]`}: ${error.message}`;
}

/** The kind of a typed library error, or undefined for anything else (a plain Error, a missing code, a wrong class
 * for the code, a non-Error). */
export function errorKind(error: unknown): ErrorKind | undefined {
  if (error instanceof DestroyedError) return typeof error.resource === 'string' && typeof error.method === 'string' ? 'destroyed' : undefined;
  if (error instanceof CaptureError) return error.code === 'ERR_STREAM_CAPTURING' ? 'capture' : undefined;
  if (error instanceof CompileError) return typeof error.log === 'string' && error.log.length > 0 ? 'compile' : undefined;
  if (error instanceof CudaError) {
    // The code is the CUresult: its name (a string) in newer versions, its number in older ones.
    const code = (error as { code: unknown }).code;
    return typeof error.call === 'string' && (typeof code === 'string' || typeof code === 'number') ? 'cuda' : undefined;
  }
  for (const [kind, { cls, code }] of Object.entries(NODE_CODES) as Array<[keyof typeof NODE_CODES, (typeof NODE_CODES)['type']]>)
    if (error instanceof Error && error.constructor === cls && (error as { code?: unknown }).code === code) return kind;
  return undefined;
}

/** Undefined when `error` is a typed error of one of the `expected` kinds; otherwise what is wrong with it. */
export function errorProblem(error: unknown, expected: readonly ErrorKind[]): string | undefined {
  const kind = errorKind(error);
  if (kind === undefined) return `an untyped error: ${describe(error)}`;
  if (!expected.includes(kind)) return `a ${kind} error where ${expected.join(' or ')} was expected: ${describe(error)}`;
  return undefined;
}

/** A one-line description of an error, for step lines and failures. */
export function describeError(error: unknown): string {
  return describe(error);
}
