// What a fault-sweep workload is, and the checks its steps share. A workload is one async function over the public
// API; the sweep (sweep.ts) counts its driver calls per thread, then fails them one at a time (child.ts runs it).

/** One workload of the fault sweep. */
export interface Workload {
  /** The name the sweep and its report use: the file's name in workloads/. */
  readonly name: string;
  /** SIMULATED_DRIVER_DEVICES for its processes. @defaultValue 1 */
  readonly devices?: number;
  /** More environment for its processes (for example a small staging cap, so that copies go in pieces). */
  readonly env?: Readonly<Record<string, string>>;
  /** Does its work once and checks the results, throwing {@link WrongResult} for wrong bytes. It releases everything
   * it made, also when a call throws (`using`, `finally`), so that `cuda.liveObjects()` is back to its start after
   * it; it leaves no thread, timer or handle that keeps the process alive. It must make the same driver calls on
   * each thread every time, as far as the library allows. */
  run(): Promise<void>;
}

/** Results that differ from what the workload wrote: only a driver that lost an operation may cause it. */
export class WrongResult extends Error {
  override readonly name = 'WrongResult';
}

/** Throws {@link WrongResult} unless `actual` holds exactly `expected`'s elements. */
export function expectElements(what: string, actual: ArrayLike<number | bigint>, expected: ArrayLike<number | bigint>): void {
  const same = actual.length === expected.length && Array.prototype.every.call(actual, (v, i) => v === expected[i]);
  if (!same) throw new WrongResult(`${what}: wrong elements`);
}

/** Throws {@link WrongResult} unless every element of `actual` is `value`. */
export function expectAll(what: string, actual: ArrayLike<number>, value: number): void {
  if (!Array.prototype.every.call(actual, (v) => v === value)) throw new WrongResult(`${what}: not every element is ${value}`);
}

/** Runs every cleanup in order, even after one throws, then throws the first error (of the work or a cleanup). */
export async function cleanUp(work: () => Promise<void>, ...cleanups: (() => unknown)[]): Promise<void> {
  let first: { error: unknown } | undefined;
  try {
    await work();
  } catch (error) {
    first = { error };
  }
  for (const cleanup of cleanups) {
    try {
      await cleanup();
    } catch (error) {
      first ??= { error };
    }
  }
  if (first) throw first.error;
}

/** What the sweep records of an error: enough to tell a typed error of the library from anything else. */
export interface ErrorDescription {
  /** The class's name (`CudaError`, `TypeError`, ...). */
  name: string;
  /** Its `code`, where it has one. */
  code?: string;
  /** `CudaError.call`. */
  call?: string;
  /** `CudaError.sticky`. */
  sticky?: boolean;
  message: string;
  /** True for the library's error classes and for Node's errors with a code (`ERR_...`, `EAGAIN`). */
  typed: boolean;
}

const LIBRARY_ERRORS = new Set(['CudaError', 'CudaUnavailableError', 'DestroyedError', 'CompileError', 'CaptureError']);

/** Describes `error` for the sweep's records (and for a worker's message, which loses the class). */
export function describeError(error: unknown): ErrorDescription {
  if (error instanceof RemoteError) return error.remote;
  const e = (error ?? {}) as { name?: unknown; code?: unknown; call?: unknown; sticky?: unknown; message?: unknown; stack?: unknown };
  const name = typeof e.name === 'string' ? e.name : typeof error;
  const code = typeof e.code === 'string' ? e.code : undefined;
  const typed = error instanceof Error && (LIBRARY_ERRORS.has(name) || (code !== undefined && /^(ERR_|E[A-Z]+$)/.test(code)));
  return {
    name,
    code,
    call: typeof e.call === 'string' ? e.call : undefined,
    sticky: typeof e.sticky === 'boolean' ? e.sticky : undefined,
    message: typed ? String(e.message) : String(e.stack ?? e.message ?? error),
    typed,
  };
}

/** An error met on another thread, carried back by its description. */
export class RemoteError extends Error {
  override readonly name = 'RemoteError';
  constructor(
    where: string,
    readonly remote: ErrorDescription,
  ) {
    super(`${where}: ${remote.name}: ${remote.message}`);
  }
}
