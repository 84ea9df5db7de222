// The benchmark addon (cuda_stream_pool_bench.node, built from native/): the native baselines that the
// benchmarks print beside the library's figures. A binary of its own, so that the library's carries no benchmark
// code; loaded here by explicit path, never by the library's loader.
import { createRequire } from 'node:module';
import path from 'node:path';


import { CudaUnavailableError } from 'cuda-stream-pool';
import { addonPath, native } from 'cuda-stream-pool/internal';
import { packageRoot } from './package.js';

/** The benchmark addon's target in this package's binding.gyp. */
export const BENCH_ADDON_TARGET = 'cuda_stream_pool_bench';

/** A task slot as the native mode sees it: the raw device address and the pinned output's bytes. */
export interface NativeSlot {
  memory: bigint;
  output: Uint8Array;
}

/** What `runTasks` runs: the executor benchmark's tasks, described by raw pointers and plain values. */
export interface NativeTaskPlan {
  device: number;
  /** kernels/bench.ptx as text; the addon loads it once per device and runs its `fma_steps`. */
  ptx: string;
  elements: number;
  intensity: number;
  grid: number;
  block: number;
  a: number;
  b: number;
  /** Each partition's pinned bytes (a PinnedBuffer's `bytes`). */
  partitions: Uint8Array[];
  slots: NativeSlot[];
  sample: Uint32Array;
  /** references[p × sample.length + k]. */
  references: Float32Array;
  ulpTolerance: number;
  first: number;
  count: number;
  /** The corruption test hook's task, -1 for none. */
  corruptTask: number;
  corruptElement: number;
  marks: boolean;
}

/** What `runTasks` resolves with: per task (index = task - first) its slot, latency and marks. */
export interface NativeTaskOutcome {
  startEpochMs: number;
  endEpochMs: number;
  originEpochMs: number;
  slotOf: Uint32Array;
  latencyMs: Float64Array;
  /** 4 per task, ms from the origin event; empty without marks. */
  marks: Float64Array;
  /** Per slot: its thread's stream, as cuStreamGetId reports it. */
  streamIds: bigint[];
  /** Tasks completed (fewer than count after a mismatch). */
  completed: number;
  /** The first output element that failed verification, if any. */
  mismatch?: { task: number; element: number; value: number; expected: number };
}

/** The wake-latency observer's native state (native/wake-observer.cc); freed with its JS object. */
export type WakeObserver = { readonly wakeObserver: unique symbol };

/** The benchmark addon's functions (native/). Costs are ns per operation, timed by C++ loops that block the
 * calling thread; `runTasks` runs on threads of its own and returns a promise. Every function throws
 * {@link CudaUnavailableError} without a usable driver and the library's `CudaError` when the driver fails. */
export interface BenchBinding {
  setErrorFactory(factory: (kind: string, ...args: unknown[]) => Error): void;
  /** cuStreamCreateWithPriority(non-blocking, 0) + cuStreamDestroy, as Stream.create() + destroy(). */
  streamCreateDestroyLoop(device: number, iterations: number): number;
  /** cuStreamSynchronize on an idle stream. */
  streamSynchronizeIdleLoop(device: number, iterations: number): number;
  /** cuLaunchKernel(empty_kernel, 1 block of 1 thread) + cuStreamSynchronize. */
  kernelSynchronizeLoop(device: number, iterations: number, ptx: string): number;
  /** An observer of `count` waits for the wake-latency row, with its gate closed (native/wake-observer.cc). */
  wakeObserverStart(device: number, count: number): WakeObserver;
  /** cuStreamWaitValue64 on the observer's gate: the raw stream's later work waits until the release. */
  wakeObserverHold(observer: WakeObserver, stream: bigint): void;
  /** Wait `index` is done once the 8-byte word at host address `address` reaches `value` (a completion ticket). */
  wakeObserverWatch(observer: WakeObserver, index: number, address: bigint, value: number): void;
  /** Starts the observer thread spinning on the watched words, then opens the gate. */
  wakeObserverRelease(observer: WakeObserver): void;
  /** Stops the observer; per wait, when its word was first seen at its value, in ns of the steady clock
   * (CLOCK_MONOTONIC, as process.hrtime.bigint()), 0 when never. */
  wakeObserverFinish(observer: WakeObserver): Float64Array;
  /** cuEventRecord of a timing-disabled event on an idle stream. */
  eventRecordLoop(device: number, iterations: number): number;
  /** cuLaunchKernel (grid 1, block 1) of the benchmark kernel `name` on the raw stream `stream`, its arguments packed
   * in slots of `slotBytes` as kernel.launch() packs them; the stream is synchronized before and after. */
  launchLoop(device: number, iterations: number, ptx: string, name: string, stream: bigint, params: Uint8Array, slotBytes: number): number;
  /** `iterations` copies of `bytes` between `host` and device memory of its own: ns per copy for the calls alone,
   * and ns in all until the stream is idle. `host`: a PinnedBuffer's bytes, or a plain array (pageable memory, which
   * the driver stages itself, blocking the thread for each copy). */
  copyLoop(device: number, iterations: number, toDevice: boolean, host: Uint8Array, bytes: number): { enqueueNs: number; totalNs: number };
  /** cuMemAllocFromPoolAsync (default pool) + cuMemFreeAsync of `bytes`. */
  allocFreeLoop(device: number, iterations: number, bytes: number): number;
  /** cuGraphLaunch of a 3-node graph (copy `bytes` pinned -> device, empty_kernel, copy back), launched back to back;
   * the stream is synchronized before and after, untimed. */
  graphLaunchLoop(device: number, iterations: number, ptx: string, bytes: number): number;
  /** The `native` mode: tasks on C++ threads, one per slot. */
  runTasks(plan: NativeTaskPlan): Promise<NativeTaskOutcome>;
}

/** The errors of the benchmark addon are the library's: a CudaError named by the library's own table, or a
 * CudaUnavailableError with the loader's reason. */
function benchError(kind: string, ...args: unknown[]): Error {
  if (kind === 'cuda') {
    const [code, call, detail] = args as [number, string, string];
    return native.cudaError(code, call, detail);
  }
  if (kind === 'unavailable') return new CudaUnavailableError(args[0] as string);
  return new Error(`cuda-stream-pool bench internal: unknown error kind ${kind}`);
}

let loaded: BenchBinding | undefined;

/** The benchmark addon for this thread, loaded on first use. Loading never touches the driver.
 * @throws `Error` naming the places looked in and how to build the addon, when it is in neither. */
export function benchAddon(): BenchBinding {
  if (loaded) return loaded;
  const file = addonPath(BENCH_ADDON_TARGET, packageRoot);
  if (file === undefined)
    throw new Error(
      `cuda-stream-pool bench: the benchmark addon ${BENCH_ADDON_TARGET} is neither in ${path.join(packageRoot, 'build', 'Release')} ` +
        `nor in ${path.join(packageRoot, 'prebuilds', `${process.platform}-${process.arch}`)}. Rebuild it with npm rebuild cuda-stream-pool-bench ` +
        '(in a clone of the repository: npm run build).',
    );
  const binding = createRequire(import.meta.url)(file) as BenchBinding;
  binding.setErrorFactory(benchError);
  loaded = binding;
  return binding;
}
