// The addon binding: loaded once per thread (main or worker), typed here so the rest of the TS layer sees plain
// functions. Mechanism only: arguments are validated by the callers (src/internal/DESIGN.md).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

import { CudaUnavailableError, makeNativeError } from './errors.js';
import type { PoolLayout } from '../pool/pool-words.js';

/**
 * The completion engine's diagnostic counters, for tests and tuning (see `completionStats()`).
 */
export interface CompletionStats {
  /** Wake-ups of this thread's event loop by the engine (each delivers one batch): the thread was blocked, or about
   * to block, waiting for its event loop's next event. A wait on this thread's per-thread default stream whose
   * ticket is late adds some: only this thread can ask the driver whether that stream is idle, so the poller wakes
   * it to ask, after 20 ms, 40 ms, 80 ms and so on, then about every 0.64 s while the wait is pending. */
  wakeups: number;
  /** Batches this thread took at a turn of its event loop while it was busy, or after a spin, without a wake-up. */
  turnBatches: number;
  /** Times this thread, about to block with waits pending and nothing ready, spun for a completion first (for up
   * to 40 µs, yielding the CPU between checks, and only while its event loop had nothing else to do). The length
   * adapts: halved by each spin that saw nothing (down to none but one wait in 64), back to 40 µs when a completion
   * comes within that. Always 0 with `CUDA_STREAM_POOL_WAIT_SPIN=off`, and where the process may use only one CPU
   * (affinity, or a cgroup v2 quota). */
  spins: number;
  /** Of those spins, how many saw a completion arrive, which was then delivered without a wake-up. */
  spinsCompleted: number;
  /** Waits on a stream that this thread settled by reading the stream's completion ticket itself (at a turn of its
   * event loop, during a spin, or at a wake-up), before the poller thread reported them. Counted in `delivered`. */
  ticketsRead: number;
  /** Waits settled by the engine's batches, both kinds (waits that settled at once are not counted). */
  delivered: number;
  /** The most waits one wake-up settled. */
  largestBatch: number;
  /** Staged device-to-host copies of this thread not landed yet. */
  landingsPending: number;
  /** Parts of large staged device-to-host copies landed by this thread while the rest of their copy was still
   * running (each landing moves everything that reached staging since the last). */
  partLandings: number;
  /** The longest time this thread spent landing one staged copy (or one part of it) into its JS array, in
   * nanoseconds: the longest pause a landing gave the event loop. */
  longestLandingNs: number;
  /** Waits of every thread that the poller still watches. */
  processPending: number;
  /** How often the poller thread parked (slept with nothing pending) since the process started. */
  pollerParks: number;
  /** Whether the poller thread is parked now. */
  pollerParked: boolean;
  /** Tickets that the driver never wrote although their stream finished its work, since the process started, each
   * counted once however many waits shared it: their waits settled when the poller found the stream idle (within
   * about 20 ms; on a per-thread default stream, when its thread was next asked). Non-zero only with a faulty
   * driver. */
  lostTickets: number;
  /** Completion markers enqueued in streams since the process started, by every thread: tickets written
   * (cuStreamWriteValue64) and events recorded (cuEventRecord). A wait that shares the stream's last ticket, or that
   * settles at once, adds none. */
  markersEnqueued: number;
}

/**
 * How this thread's stream-ordered calls reach the driver, and its submission threads' counters, summed (see
 * `cuda.submission()`). Counters only grow.
 */
export interface SubmissionStats {
  /** `deferred`: operations on the library's own streams are recorded and issued by native submission threads
   * (`CUDA_STREAM_POOL_SUBMISSION=deferred`); `direct`: every call reaches the driver from the calling thread. */
  mode: 'direct' | 'deferred';
  /** The thread's submission threads (`CUDA_STREAM_POOL_SUBMISSION_THREADS`, 1 to 8, default 2); each stream's
   * operations go to one of them. 0 in direct mode. */
  threads: number;
  /** Operations this thread recorded. */
  recorded: number;
  /** Of those, how many its submission threads issued or dropped. */
  issued: number;
  /** Operations dropped because an earlier one on their stream had failed and no wait had reported it yet. */
  dropped: number;
  /** Operations that errored their stream: their driver call failed, or (a stream wait) the event they wait on
   * carries a failure. */
  failed: number;
  /** How often the submission threads parked with nothing to do. */
  parks: number;
  /** How often a submission thread that kept up with this thread let up to a microsecond pass before issuing a short
   * batch of operations, so that more of them were issued together (never for a batch with a wait's marker in it,
   * nor while this thread waits in `cuda.flush()` or a call that flushes). */
  gathers: number;
  /** Records that waited for room in a full queue. */
  waitsForRoom: number;
  /** Waits for a submission thread to issue what was recorded, by calls that need it first (a query, a blocking
   * wait, a free, `cuda.flush()`; one per submission thread that had work left). */
  flushWaits: number;
  /** Operations that this thread's submission threads held back until another JS thread's submission thread had
   * issued an earlier operation of their stream: each stream's operations are issued in the order they were recorded,
   * whichever thread recorded them. Comes from worker threads sharing streams (a shared pool's); always 0 in direct
   * mode and in a process with one JS thread. */
  orderWaits: number;
  /** Milliseconds those operations waited, in total (0 where `orderWaits` is); every operation queued behind them on
   * the same submission thread waited as long. */
  orderWaitMs: number;
}

/** A reference to a native object (the C++ owner or non-owning view of one stream, event, module, kernel, ...; see
 * `NativeObject` in src/internal/native-object.h) as JS holds it: a number naming a slot of this thread's handle table,
 * checked on every use (Note [handle table] in src/internal/handle-table.h). Opaque to TypeScript. */
export type NativeRef = number & { readonly __nativeRef: unique symbol };

/** One thread's handle on a pool's process-wide state (pool/pool.cc). `device` is -1 and `streams` empty for
 * shared words without streams; `owner` is the creating environment's id. */
export interface PoolDescription {
  handle: NativeRef; id: number; memory: SharedArrayBuffer; streams: NativeRef[]; device: number; size: number;
  nonBlocking: boolean; priority: number; isDefault: boolean; owner: number; partition: number;
}

/** A device's split into partitions: per partition the multiprocessors asked for (0 for the rest), those it got, and
 * its work-queue configuration (CUDA 13.1) or null. */
export interface PartitionSplit {
  requested: number[];
  counts: number[];
  workQueues: ({ concurrencyLimit: number; balanced: boolean } | null)[];
}

export interface NativeBinding {
  environmentId: number;
  setErrorFactory(factory: (kind: string, ...args: unknown[]) => Error): void;
  driverState(): { available: boolean; reason: string | undefined; driverVersion: number | undefined; deviceCount: number };
  deviceInfo(ordinal: number): {
    name: string; major: number; minor: number; multiprocessorCount: number; asyncEngineCount: number;
    memoryPoolsSupported: boolean; totalMemoryBytes: number; greatestPriority: number; leastPriority: number;
    cooperativeLaunch: boolean; clusterLaunch: boolean; pitchAlignment: number;
  };
  deviceFault(ordinal: number): number;
  // device/partition.cc, Note [partitions]: why the device cannot be partitioned, or its multiprocessors, the
  // driver's granularity and the split made so far (requested 0: the partition of those left over).
  partitionInfo(ordinal: number): {
    reason?: string; total?: number; minimum?: number; alignment?: number;
    split?: PartitionSplit | null;
  };
  partitionCreate(ordinal: number, multiprocessors: number[]): PartitionSplit;
  // device.cc, Note [peer access]: `ordinal` accessing `peer`'s memory.
  deviceCanAccessPeer(ordinal: number, peer: number): boolean;
  deviceEnablePeerAccess(ordinal: number, peer: number): void;
  devicePeerAccessEnabled(ordinal: number, peer: number): boolean;
  /** The device whose primary context is current on this thread, -1 when none of the library's is (tests). */
  currentDevice(): number;
  liveObjects(): { streams: number; events: number; modules: number; deviceBytes: number; leakedDeviceBytes: number; pinnedBytes: number; managedBytes: number; registeredBytes: number; graphs: number; graphExecs: number; contexts: number[] };
  callbackFailures(): { count: number; last: string | undefined };
  /** graph.cc: [device, open captures, calls deferred until they close, ...] for each device with either; diagnostics. */
  captureGuardState(): number[];
  cudaError(code: number, call: string, detail: string): Error;
  /** True for the first caller of the process (binding/environment.ts reports unknown values once). */
  claimEnvironmentWarning(): boolean;

  // synchronizer.cc: device-wide waits on a native thread per device.
  /** Resolve and return 0, or a fault of another device that the work waited on (waitError in stream/completion.ts
   * reads it); the device's own failures reject and throw. */
  deviceSynchronize(ordinal: number): Promise<number>;
  deviceSynchronizeSync(ordinal: number): number;
  deviceMemoryInfo(ordinal: number): { freeBytes: number; totalBytes: number };

  // managed-buffer.cc: managed (unified) memory.
  managedAlloc(device: number, bytes: number): { ref: NativeRef; ptr: bigint; buffer: ArrayBuffer };
  managedFree(managed: NativeRef, buffer: ArrayBuffer): void;
  managedPrefetch(managed: NativeRef, offset: number, bytes: number, target: number, stream: NativeRef): void;
  managedAdvise(managed: NativeRef, offset: number, bytes: number, advice: number, device: number): void;
  managedCopy(stream: NativeRef, managed: NativeRef, managedOffset: number, other: NativeRef, otherOffset: number, toManaged: boolean, bytes: number): void;

  streamCreate(device: number, nonBlocking: boolean, priority: number, partition: number): NativeRef;
  streamBorrow(device: number, handle: bigint): NativeRef;
  /** The device of the live library stream with this handle, or -1. */
  streamOwnerDevice(handle: bigint): number;
  streamShareHandle(ref: NativeRef): void;
  /** The start of a stream's wait, in one call. Returns 0: the work is done, nothing registered; NOT_READY: a marker
   * is queued and `token` is reported once the work is done; -1 or -2: the stream is capturing, nothing queued (the
   * negated CAPTURE_STATUS.active or .invalidated, so that no CUresult, none of which is negative, reads as one);
   * another value: the CUresult of the failed work. `number` cannot say which values occur; test/cpu/contract.test.ts
   * checks the convention on both sides. */
  streamWait(ref: NativeRef, token: number): number;
  /** The stream's ticket word (host address) and the value of its last marker; null without a ticket. */
  streamLastTicket(ref: NativeRef): { address: bigint; value: number } | null;
  /** [handle, id, priority, nonBlocking] as the driver reports them. */
  streamInfo(stream: NativeRef): [handle: bigint, id: bigint, priority: number, nonBlocking: boolean, partition: number];
  streamStatus(stream: NativeRef): number;
  streamLenderAlive(stream: NativeRef): boolean;
  /** 0, or a fault of another device that the work waited on (as deviceSynchronizeSync). */
  streamSynchronize(stream: NativeRef): number;
  /** Throws the CudaError of recorded work on the stream that failed (deferred submission), marking it reported; else
   * nothing. */
  streamThrowFailure(stream: NativeRef): void;
  streamWaitEvent(stream: NativeRef, event: NativeRef): void;
  /** Later work on `stream` waits for `other`'s work so far, through this thread's reused event for the device. */
  streamWaitStream(stream: NativeRef, other: NativeRef): void;
  /** How many waitStream events this thread holds: one per device it used waitStream on. */
  streamWaitEventCount(): number;
  streamDestroy(stream: NativeRef): void;

  // pool.cc: the pool's process-wide state; `layout` is poolLayout() from pool/pool-words.ts, read by name.
  poolCreate(device: number, size: number, nonBlocking: boolean, priority: number, layout: PoolLayout, partition: number): PoolDescription;
  poolCreateShared(size: number, layout: PoolLayout): PoolDescription;
  poolDefault(device: number, size: number, nonBlocking: boolean, priority: number, layout: PoolLayout): PoolDescription;
  /** Undefined for an id that no pool ever had. */
  poolAttach(id: number): PoolDescription | undefined;
  poolDestroy(handle: NativeRef): void;
  /** Releases this handle's count now (Note [pool attachments]); the last one destroys a non-default pool. */
  poolDetach(handle: NativeRef): void;
  /** The exit of `environment` (Note [pool shared words]), as its cleanup hook makes it. */
  poolThreadExit(handle: NativeRef, environment: number): void;

  eventCreate(device: number, timing: boolean, blockingSync: boolean, interprocess: boolean): NativeRef;
  /** Records the event on the stream; returns the stream's capture status after it (0 none, 1 active, 2 invalidated). */
  // Operands (Note [operand scratch] in src/binding/binding.h): event, stream.
  eventRecord(): number;
  eventStatus(event: NativeRef): number;
  /** 0, or a fault of another device that the work waited on (as deviceSynchronizeSync). */
  eventSynchronize(event: NativeRef): number;
  eventElapsed(start: NativeRef, end: NativeRef): number;
  eventDestroy(event: NativeRef): void;

  /** results[i]: 0, a CUresult (or a wait_result), or the CudaError of recorded work that failed. */
  completionInit(dispatch: (tokens: number[], results: (number | Error)[]) => void): void;
  /** Issues everything this thread recorded (deferred submission); nothing in direct mode. */
  submissionFlush(): void;
  submissionStats(): SubmissionStats;
  completionFlush(): number;
  completionStats(): CompletionStats;
  completionMarker(device: number): 'ticket' | 'event';
  completionSetMarker(device: number, kind: 'ticket' | 'event'): 'ticket' | 'event';
  completionRef(): void;
  completionUnref(): void;
  streamNotify(stream: NativeRef, token: number): void;
  eventNotify(event: NativeRef, token: number): void;

  moduleLoad(device: number, image: Uint8Array): Promise<NativeRef>;
  moduleUnload(module: NativeRef): void;
  moduleFunctionNames(module: NativeRef): string[];
  moduleGetFunction(module: NativeRef, name: string): NativeRef;
  kernelParamSizes(kernel: NativeRef): number[] | null;
  kernelAttributes(kernel: NativeRef): {
    registers: number; maxThreadsPerBlock: number; staticSharedMemBytes: number; localMemBytes: number; maxDynamicSharedMemBytes: number;
  };
  kernelMaxPotentialBlockSize(kernel: NativeRef, dynamicSharedMemBytes: number, blockSizeLimit: number): { minGridSize: number; blockSize: number };
  kernelSetMaxDynamicSharedMemBytes(kernel: NativeRef, bytes: number): void;
  // The launch's shape is in launchShape (Note [launch scratch] in src/binding/binding.h), and its argument slots in the
  // argument scratch (launchArguments), written right before the call. Operands (Note [operand scratch] in
  // src/binding/binding.h): kernel, stream.
  kernelLaunch(): void;
  // cuLaunchKernelEx: launchShape also holds the cluster dimensions (0 for none) and the flags (1 cooperative, 2
  // programmatic dependent launch).
  kernelLaunchWithAttributes(): void;

  nvrtcLoad(): Promise<
    | { available: false; reason: string }
    | { available: true; path: string; major: number; minor: number; supportedArchs: number[] }
  >;
  nvrtcCompile(source: string, name: string, options: string[], wantCubin: boolean): Promise<{
    result: number; resultName: string; call: string; log: string; cubin?: Uint8Array; ptx?: string;
  }>;

  // device-buffer.cc, pinned-buffer.cc, copy.cc, staging.cc, memory-pool.cc: stream-ordered device buffers, the pinned-block
  // cache, copies, fills, staged pageable copies, the default memory pool.
  // binding.cc: the handle table (Note [handle table]) and the fact scratch (Note [fact scratch]).
  handleRelease(ref: number, collected: boolean): boolean;
  handleTrackAll(handles: Float64Array, count: number): void;
  handleCount(): number;
  // The thread's scratch arrays, made by the addon on the first call and the same ones after.
  factScratch(): BigUint64Array;
  launchScratch(): Uint32Array;
  argumentScratch(): Uint8Array;
  operandScratch(): Float64Array;
  // One plain object per thread, the same for every evaluation of the library's modules in it (a bundler's or a test
  // runner's second copy): JS state that pairs with the addon's per-thread state lives there.
  threadShared(): Record<string, unknown>;

  deviceBufferAlloc(stream: NativeRef, bytes: number, exportable: boolean): NativeRef | -1 | -2;
  deviceBufferExportIpc(buffer: NativeRef): Uint8Array;
  deviceBufferOpenIpc(stream: NativeRef, handle: Uint8Array, bytes: number): NativeRef;
  eventExportIpc(event: NativeRef): Uint8Array;
  eventOpenIpc(device: number, handle: Uint8Array): NativeRef;
  deviceBufferPointer(buffer: NativeRef): bigint;
  /** The completion marker (wantMarker), else undefined; or, refused because a stream that used the buffer is
   * capturing, that stream's capture status negated (-1, -2), with its id in `facts[1]`. */
  deviceBufferFree(buffer: NativeRef, stream: NativeRef | undefined, wantMarker: boolean): NativeRef | -1 | -2 | undefined;
  // use: 0 a kernel launch's argument, 1 recordStream(), 2 the note after a launch on the per-thread stream.
  deviceBufferUse(buffer: NativeRef, stream: NativeRef, use: number): void;
  deviceBufferShare(buffer: NativeRef): bigint;
  /** Undefined for an id that share() never gave. */
  deviceBufferAttach(id: bigint): { ref: NativeRef; ptr: bigint; bytes: number; device: number } | undefined;
  pinnedAlloc(bytes: number): { ref: NativeRef; buffer: ArrayBuffer };
  pinnedFree(pinned: NativeRef, buffer: ArrayBuffer): void;
  pinnedTrimCache(): number;
  pinnedCacheInfo(): { idleBytes: number; totalBytes: number };
  stagingInfo(): { capBytes: number; allocatedBytes: number; highWaterBytes: number; copyThreads: number; evictedBytes: number };
  // Operands in the operand scratch (Note [operand scratch] in src/binding/binding.h): use copyOperands().
  copyDeviceToDevice(): void;
  copyPinnedToDevice(): void;
  copyDeviceToPinned(): void;
  copyPageableToDevice(stream: NativeRef, dst: NativeRef, dstOffset: number, source: Uint8Array): void;
  copyDeviceToPageable(stream: NativeRef, destination: Uint8Array, src: NativeRef, srcOffset: number): NativeRef;
  copyLanded(flag: NativeRef): boolean;
  // stream/copy.cc, Note [batched copies]: per copy, operands [dst, src] (a buffer ref or a pageable source's
  // Uint8Array), kinds [dst, src] (0 device, 1 pinned, 2 pageable), layout [dstOffset, srcOffset, bytes]; false when
  // the driver or the stream cannot batch (nothing queued).
  // memory/host-registration.cc, Note [registered host memory]: { ref, registered: bytes locked } or the pages of
  // another registration that share one of its pages.
  hostRegister(buffer: ArrayBufferLike): { ref?: NativeRef; registered?: number; overlaps?: [number, number] };
  hostUnregister(ref: NativeRef): void;
  // stream/copy.cc: kinds 0 DeviceBuffer, 1 pinned (a PinnedBuffer or registered host memory).
  copy2D(
    stream: NativeRef, dst: NativeRef, dstKind: number, dstOffset: number, dstPitch: number,
    src: NativeRef, srcKind: number, srcOffset: number, srcPitch: number, widthBytes: number, height: number,
  ): void;
  copyBatch(stream: NativeRef, operands: NativeRef[], kinds: Uint8Array, layout: Float64Array): boolean;
  memoryFill(stream: NativeRef, dst: NativeRef, offset: number, value: number, count: number, elementSize: 1 | 4): void;
  memoryPoolInfo(device: number): { usedBytes: number; reservedBytes: number; releaseThresholdBytes: number };
  memoryPoolSetReleaseThreshold(device: number, bytes: number): void;
  memoryPoolTrim(device: number, bytesToKeep: number): void;
  // graph.cc: stream capture, graphs, executable graphs.
  streamBeginCapture(stream: NativeRef, mode: number): void;
  streamEndCapture(stream: NativeRef): NativeRef;
  /** 0 not capturing, 1 capturing, 2 capture invalidated; no driver call unless a capture flag is set. */
  streamCaptureStatus(stream: NativeRef): number;
  /** As streamCaptureStatus, always asking the driver (after the stream may have joined a capture). */
  streamCaptureRefresh(stream: NativeRef): number;
  /** The single node the stream's next captured work depends on (right after a launch: its kernel node), else 0n. */
  streamCaptureLastNode(stream: NativeRef): bigint;
  /** The driver graph holds the modules of these kernels until it is destroyed (unloaded ones are skipped). */
  graphKeepModules(graph: NativeRef, kernels: NativeRef[]): void;
  graphNodeCount(graph: NativeRef): number;
  graphInstantiate(graph: NativeRef): NativeRef;
  graphDestroy(graph: NativeRef): void;
  graphExecLaunch(exec: NativeRef, stream: NativeRef): void;
  /** True when updated in place; false when instantiated anew from `graph` after the driver refused the update. */
  graphExecUpdate(exec: NativeRef, graph: NativeRef): boolean;
  graphExecSetKernelParams(exec: NativeRef, node: bigint, current: bigint, slots: Uint8Array): void;
  graphExecDestroy(exec: NativeRef): void;
}

/** The package root (two levels above dist/binding). */
export const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The library's build target in binding.gyp. */
const LIBRARY_TARGET = 'cuda_stream_pool';

/** The platform folder of prebuilt binaries (`linux-x64`, `linux-arm64`), as node-gyp-build names it. */
const platformFolder = `${process.platform}-${process.arch}`;

/** Where a package's addon binary is: a local build (`npm rebuild`, `--build-from-source`, a clone) first, then the
 * prebuilt one shipped in the package, where node-gyp-build looks at install time
 * (`prebuilds/<platform>-<arch>/node.napi.glibc.node`). Each package of this repository has one addon. Returns
 * undefined when neither exists.
 * @param target - the target_name in the package's binding.gyp, for example `cuda_stream_pool_bench`.
 * @param root - the package root to look in. @defaultValue this package's root */
export function addonPath(target: string, root: string = packageRoot): string | undefined {
  const candidates = [path.join(root, 'build', 'Release', `${target}.node`), path.join(root, 'prebuilds', platformFolder, 'node.napi.glibc.node')];
  return candidates.find((candidate) => existsSync(candidate));
}

/** Why the addon could not be loaded, with what to do; undefined when it loaded. */
export let addonFailure: string | undefined;

const require = createRequire(import.meta.url);

function loadLibrary(): NativeBinding | undefined {
  const file = addonPath(LIBRARY_TARGET);
  if (file === undefined) {
    const shipped = ['linux-x64', 'linux-arm64'].includes(platformFolder) && !existsSync('/etc/alpine-release');
    addonFailure =
      `the native addon of cuda-stream-pool is missing: there is no build/Release/${LIBRARY_TARGET}.node and no ` +
      `prebuilt binary for ${platformFolder} in ${path.join(packageRoot, 'prebuilds')}. ` +
      (shipped
        ? 'The package ships one for this platform, so it was installed without it or its install script did not run ' +
          '(npm --ignore-scripts, pnpm without approving build scripts). Run `npm rebuild cuda-stream-pool`.'
        : 'Prebuilt binaries exist for linux-x64 and linux-arm64 with glibc only; on this platform run ' +
          '`npm rebuild cuda-stream-pool --build-from-source` (needs a C++17 compiler and Python for node-gyp).');
    return undefined;
  }
  try {
    // A copy: the addon's exports object, filled one property at a time, is in V8's dictionary mode, where every
    // `native.call` is a hash lookup; an object literal with the same properties is fast, and its loads are inlined.
    return { ...(require(file) as NativeBinding) };
  } catch (error) {
    addonFailure =
      `the native addon of cuda-stream-pool at ${file} failed to load: ${(error as Error).message.split('\n')[0]}. ` +
      'Run `npm rebuild cuda-stream-pool --build-from-source` to compile it for this machine (needs a C++17 compiler ' +
      'and Python for node-gyp).';
    return undefined;
  }
}

/** A binding whose every GPU call throws CudaUnavailableError with `reason`; the driver reports unavailable and no
 * live objects. It stands in for a missing or broken addon, so that importing the package never throws: the calls
 * that modules make while they load (registering the error factory and the completion callback) do nothing. */
function unavailableBinding(reason: string): NativeBinding {
  const known: Partial<NativeBinding> = {
    environmentId: 0,
    setErrorFactory: () => {},
    factScratch: () => new BigUint64Array(4),
    launchScratch: () => new Uint32Array(12),
    argumentScratch: () => new Uint8Array(65536),
    operandScratch: () => new Float64Array(6),
    threadShared: () => ({}),
    handleCount: () => 0,
    completionInit: () => {},
    completionRef: () => {},
    completionUnref: () => {},
    driverState: () => ({ available: false, reason, driverVersion: undefined, deviceCount: 0 }),
    liveObjects: () => ({ streams: 0, events: 0, modules: 0, deviceBytes: 0, leakedDeviceBytes: 0, pinnedBytes: 0, managedBytes: 0, registeredBytes: 0, graphs: 0, graphExecs: 0, contexts: [] }),
    callbackFailures: () => ({ count: 0, last: undefined }),
    claimEnvironmentWarning: () => false,
    pinnedCacheInfo: () => ({ idleBytes: 0, totalBytes: 0 }),
    stagingInfo: () => ({ capBytes: 0, allocatedBytes: 0, highWaterBytes: 0, copyThreads: 0, evictedBytes: 0 }),
    submissionFlush: () => {},
    submissionStats: () => ({ mode: 'direct', threads: 0, recorded: 0, issued: 0, dropped: 0, failed: 0, parks: 0, gathers: 0, waitsForRoom: 0, flushWaits: 0, orderWaits: 0, orderWaitMs: 0 }),
    completionStats: () => ({ wakeups: 0, turnBatches: 0, spins: 0, spinsCompleted: 0, ticketsRead: 0, delivered: 0, largestBatch: 0, landingsPending: 0, partLandings: 0, longestLandingNs: 0, processPending: 0, pollerParks: 0, pollerParked: true, lostTickets: 0, markersEnqueued: 0 }),
  };
  return new Proxy(known as NativeBinding, {
    get(target, name: string) {
      if (name in target) return target[name as keyof NativeBinding];
      return () => {
        throw new CudaUnavailableError(reason);
      };
    },
  });
}

/** The addon for this thread, or a stand-in that reports why there is none (see addonFailure). Loading never
 * touches the driver; the driver opens on first use. */
export const native: NativeBinding = loadLibrary() ?? unavailableBinding(addonFailure!);
native.setErrorFactory(makeNativeError);

/** Facts a call leaves for this thread (Note [fact scratch] in src/binding/binding.h): after `deviceBufferAlloc`
 * and `deviceBufferFree`, [0] is the address, and for a free refused during a capture [1] the capturing stream's id (0
 * where unknown) and [2] 1 when it is not the free's own stream but one that used the buffer; after `streamDestroy`,
 * [handle, id, priority as int64, flags]. */
export const facts = native.factScratch();
/** The same scratch as 32-bit words (low word first): a fact copied as two numbers allocates no BigInt. */
export const factWords = new Uint32Array(facts.buffer, facts.byteOffset, facts.length * 2);

/** A launch's shape for kernelLaunch and kernelLaunchWithAttributes (Note [launch scratch] in src/binding/binding.h):
 * grid x, y, z, block x, y, z, dynamic shared memory bytes, cluster x, y, z (0 for none), flags (1 cooperative, 2
 * programmatic dependent launch), and the byte count of the argument slots in {@link launchArguments}. Written right
 * before the call, with no JS code of the user's in between. */
export const launchShape = native.launchScratch();

/** Where a launch's argument slots go right before kernelLaunch (Note [launch scratch] in src/binding/binding.h): 64 KiB,
 * the slots of any kernel the driver can launch; the same array for every copy of this module in the thread. */
export const launchArguments = native.argumentScratch();

/** Operands of the calls that take no arguments (Note [operand scratch] in src/binding/binding.h): written right
 * before the call, with no JS code of the user's in between. */
export const operands = native.operandScratch();

/** Writes a copy's six operands (stream, destination, its offset, source, its offset, bytes) for copyDeviceToDevice,
 * copyPinnedToDevice or copyDeviceToPinned, which read them in that order. */
export function copyOperands(stream: NativeRef, dst: NativeRef, dstOffset: number, src: NativeRef, srcOffset: number, bytes: number): void {
  operands[0] = stream;
  operands[1] = dst;
  operands[2] = dstOffset;
  operands[3] = src;
  operands[4] = srcOffset;
  operands[5] = bytes;
}

// Values shared with the C++ side, each checked against it by test/cpu/contract.test.ts.

/** CUDA_ERROR_NOT_READY: a status ("still working"), never an error. */
export const NOT_READY = 600;

/** The calling thread's per-thread default stream, as the driver's special handle value. */
export const CU_STREAM_PER_THREAD = 2n;

/** CUstreamCaptureStatus values, as streamCaptureStatus returns them; streamWait returns their negatives. */
export const CAPTURE_STATUS = { none: 0, active: 1, invalidated: 2 } as const;

/** Bytes of one kernel argument slot in the params of kernelLaunch and graphExecSetKernelParams. */
export const KERNEL_ARG_SLOT_BYTES = 8;
