// Process-wide facts about the CUDA driver: whether it can be used, why not, its version, live-object counts.
import { native, type SubmissionStats } from './binding.js';
import { CudaUnavailableError } from './errors.js';

let state: ReturnType<typeof native.driverState> | undefined;

/** Opens the driver on first use (cuInit, about 200 ms), then answers from memory. */
export function driverState() {
  state ??= native.driverState();
  return state;
}

/** Throws {@link CudaUnavailableError} unless the driver loaded and has a device. */
export function requireCuda(): void {
  const s = driverState();
  if (!s.available) throw new CudaUnavailableError(s.reason ?? 'unknown reason');
}

/** Live-object counts, process-wide (all threads), counted at the native wrappers. */
export interface LiveObjects {
  /** Streams created by this library and not yet destroyed (owned streams and pool streams). A destroyed stream
   * counts until its driver handle is destroyed: at once, unless a wait on it is still pending (then when the last
   * such wait settles) or a copy into a JS array queued on it has not landed yet (then when it lands, which needs its
   * thread's event loop to turn). */
  streams: number;
  /** Events created by this library and not yet destroyed. */
  events: number;
  /** Loaded modules not yet unloaded. */
  modules: number;
  /** Bytes of device memory allocated through `DeviceBuffer` and not yet freed. */
  deviceBytes: number;
  /** Bytes of device memory that frees gave up on, since the process started: the driver refused the free
   * (cuMemFreeAsync, cuMemFree or cuIpcCloseMemHandle failed, as after a sticky fault), or the free could not be ordered after
   * the work of every stream that used the buffer (a cuEventRecord or cuStreamWaitEvent failed). Such memory is
   * never freed, since queued work may still use it; it no longer counts in `deviceBytes`. 0 in a healthy process. */
  leakedDeviceBytes: number;
  /** Bytes held by live `PinnedBuffer`s (not the library's idle pinned cache). */
  pinnedBytes: number;
  /** Bytes of managed memory allocated through `ManagedBuffer` and not yet released (a freed buffer's memory counts
   * until the device's queued work is done and cuMemFree ran). */
  managedBytes: number;
  /** Bytes of host memory page-locked by live `HostRegistration`s (whole pages; after `unregister()` the pages are
   * unlocked once the copies queued with them are done). */
  registeredBytes: number;
  /** Driver graphs (CUgraph) not yet destroyed: one per `Graph`, which counts until it is destroyed and every
   * `GraphExec` instantiated from it or updated with it is destroyed (or collected) too. */
  graphs: number;
  /** Executable graphs (CUgraphExec) not yet destroyed: one per `GraphExec` until its destroy() or collection. */
  graphExecs: number;
  /** Ordinals of the devices whose primary context this process has retained (cuDevicePrimaryCtxRetain), in
   * ascending order. The library retains a device's context on that device's first use and keeps it until the
   * process exits; work that needs no particular device (pinned memory) uses a context already retained, so it
   * never brings another device's context into existence. */
  contexts: number[];
}

/** Facts about the CUDA driver in this process. Reading any of them opens the driver on first use; none throws.
 *
 * @example
 * ```ts
 * import { cuda } from 'cuda-stream-pool';
 * if (!cuda.available) console.error(cuda.unavailableReason);
 * ```
 */
export const cuda = {
  /** True when libcuda (CUDA 12.0 or newer) loaded, cuInit succeeded and at least one device is visible. */
  get available(): boolean {
    return driverState().available;
  },
  /** Why CUDA cannot be used: what was tried, what failed, what to do. `undefined` when available. */
  get unavailableReason(): string | undefined {
    return driverState().reason;
  },
  /** The driver's CUDA version as the integer cuDriverGetVersion reports (1000 × major + 10 × minor: 13000 for CUDA
   * 13.0, 12040 for 12.4), for comparisons; `undefined` when the driver library could not be opened. See
   * {@link cuda.driverVersionString} for display. */
  get driverVersion(): number | undefined {
    return driverState().driverVersion;
  },
  /** The driver's CUDA version as text, `"13.0"` for 13000, as nvidia-smi and the benchmark print it; `undefined`
   * when the driver library could not be opened. */
  get driverVersionString(): string | undefined {
    const version = driverState().driverVersion;
    return version === undefined ? undefined : `${Math.floor(version / 1000)}.${Math.floor((version % 1000) / 10)}`;
  },
  /**
   * Issues to the driver every operation this thread recorded, and returns once they are issued (not done: await a
   * stream or event for that). Only deferred submission (`CUDA_STREAM_POOL_SUBMISSION=deferred`) records; there, a
   * copy, fill, launch, event record or stream wait on a stream the library created is queued for one of the
   * thread's submission threads (`CUDA_STREAM_POOL_SUBMISSION_THREADS`, default 2). Call it before handing a raw
   * handle or a buffer's address to code that calls the driver itself (another library), so that its calls come
   * after yours, and before `process.exit()`, which drops what the submission threads have not issued yet (a worker's
   * exit and the end of the main script issue it). Every other call of this library that reads or changes driver
   * state does this first by itself. In direct mode it does nothing. Never throws once the native addon loaded.
   * Source: the library's deferred submission (a queue per submission thread; each stream's operations issued in
   * the order they were recorded).
   */
  flush(): void {
    native.submissionFlush();
  },
  /** This thread's submission mode and the counters of its submission threads, summed ({@link SubmissionStats}).
   * Never opens the driver; never throws. */
  submission(): SubmissionStats {
    return native.submissionStats();
  },
  /** Counts of live objects, process-wide across threads. Never opens the driver. */
  liveObjects(): LiveObjects {
    return native.liveObjects();
  },
  /** Failures inside callbacks that the runtime, the driver or the library's own threads call, where nothing can be
   * thrown to anyone: finalizers (a buffer, pool or stream garbage-collected), environment cleanup hooks (a thread
   * exiting or a worker terminated), deliveries of finished waits, the poller and synchronizer threads. Each is
   * caught instead of aborting the process (what it was doing is left undone: a handle or a block of memory may leak),
   * and counted here, process-wide. So is a free that the driver refused for a `DeviceBuffer` whose owner was
   * garbage-collected (its bytes count in `liveObjects().leakedDeviceBytes`), unless its device has a sticky fault. A
   * healthy process reports `{ count: 0, last: undefined }`; a worker terminated while a delivery to it was running
   * can count one. Never opens the driver; never throws.
   * @returns `count`: failures since the process started; `last`: the latest one's message (which callback, then
   * the exception's message, at most 255 characters), `undefined` when there was none. */
  callbackFailures(): {
    /** Failures caught since the process started, in every thread. */
    count: number;
    /** The latest failure's message (which callback, then the exception's message, at most 255 characters);
     * `undefined` when `count` is 0. */
    last: string | undefined;
  } {
    return native.callbackFailures();
  },
};
