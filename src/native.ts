// The addon binding: loaded once per thread (main or worker), typed here so the rest of the TS layer sees plain
// functions. Mechanism only: arguments are validated by the callers. See DESIGN.md "Layers".
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

import { makeNativeError } from './errors.js';

/** An opaque, type-tagged native handle box (stream, event, module, kernel, ...). */
export type Box = { readonly __box: unique symbol };

/** One thread's handle on a pool's process-wide state (src/native/pool.cc). `device` is -1 and `streams` empty for
 * shared words without streams; `owner` is the creating environment's id. */
export interface PoolDescription {
  handle: Box; id: number; memory: SharedArrayBuffer; streams: Box[]; device: number; size: number;
  nonBlocking: boolean; priority: number; isDefault: boolean; owner: number;
}

export interface NativeBinding {
  environmentId: number;
  setErrorFactory(factory: (kind: string, ...args: unknown[]) => Error): void;
  driverState(): { available: boolean; reason: string | undefined; driverVersion: number | undefined; deviceCount: number };
  deviceInfo(ordinal: number): {
    name: string; major: number; minor: number; multiprocessorCount: number; asyncEngineCount: number;
    memoryPoolsSupported: boolean; totalMemoryBytes: number; greatestPriority: number; leastPriority: number;
  };
  deviceFault(ordinal: number): number;
  liveObjects(): { streams: number; events: number; modules: number; deviceBytes: number; pinnedBytes: number; managedBytes: number };
  cudaError(code: number, call: string, detail: string): Error;

  // synchronizer.cc: device-wide waits on a native thread per device.
  deviceSynchronize(ordinal: number): Promise<void>;
  deviceSynchronizeSync(ordinal: number): void;
  deviceMemoryInfo(ordinal: number): { freeBytes: number; totalBytes: number };

  // managed.cc: managed (unified) memory.
  managedAlloc(device: number, bytes: number): { box: Box; ptr: bigint; buffer: ArrayBuffer };
  managedFree(managed: Box, buffer: ArrayBuffer): void;
  managedPrefetch(managed: Box, offset: number, bytes: number, target: number, stream: Box): void;
  managedAdvise(managed: Box, offset: number, bytes: number, advice: number, device: number): void;
  managedCopy(stream: Box, managed: Box, managedOffset: number, other: bigint, toManaged: boolean, bytes: number): void;

  streamCreate(device: number, nonBlocking: boolean, priority: number): Box;
  streamBorrow(device: number, handle: bigint): Box;
  streamInfo(stream: Box): { handle: bigint; id: bigint; priority: number; nonBlocking: boolean };
  streamStatus(stream: Box): number;
  streamSynchronize(stream: Box): void;
  streamWaitEvent(stream: Box, event: Box): void;
  streamDestroy(stream: Box): void;

  // pool.cc: the pool's process-wide state; `layout` is poolLayoutWords() from src/pool-policy.ts.
  poolCreate(device: number, size: number, nonBlocking: boolean, priority: number, layout: number[]): PoolDescription;
  poolCreateShared(size: number, layout: number[]): PoolDescription;
  poolDefault(device: number, size: number, nonBlocking: boolean, priority: number, layout: number[]): PoolDescription;
  poolAttach(id: number): PoolDescription;
  poolDestroy(handle: Box): void;

  eventCreate(device: number, timing: boolean, blockingSync: boolean): Box;
  eventRecord(event: Box, stream: Box): void;
  eventStatus(event: Box): number;
  eventSynchronize(event: Box): void;
  eventElapsed(start: Box, end: Box): number;
  eventDestroy(event: Box): void;

  completionInit(dispatch: (tokens: number[], results: number[]) => void): void;
  completionFlush(): number;
  completionStats(): import('./completion.js').CompletionStats;
  completionMarker(device: number): 'ticket' | 'event';
  completionSetMarker(device: number, kind: 'ticket' | 'event'): 'ticket' | 'event';
  completionRef(): void;
  completionUnref(): void;
  streamNotify(stream: Box, token: number): void;
  eventNotify(event: Box, token: number): void;

  moduleLoad(device: number, image: Uint8Array): Promise<Box>;
  moduleUnload(module: Box): void;
  moduleFunctionNames(module: Box): string[];
  moduleGetFunction(module: Box, name: string): Box;
  kernelParamSizes(kernel: Box): number[] | null;
  kernelAttributes(kernel: Box): {
    registers: number; maxThreadsPerBlock: number; staticSharedMemBytes: number; localMemBytes: number; maxDynamicSharedMemBytes: number;
  };
  kernelMaxPotentialBlockSize(kernel: Box, dynamicSharedMemBytes: number, blockSizeLimit: number): { minGridSize: number; blockSize: number };
  kernelSetMaxDynamicSharedMemBytes(kernel: Box, bytes: number): void;
  kernelLaunch(
    kernel: Box, stream: Box, gridX: number, gridY: number, gridZ: number, blockX: number, blockY: number, blockZ: number,
    dynamicSharedMemBytes: number, params: Uint8Array,
  ): void;

  nvrtcLoad(): Promise<
    | { available: false; reason: string }
    | { available: true; path: string; major: number; minor: number; supportedArchs: number[] }
  >;
  nvrtcCompile(source: string, name: string, options: string[], wantCubin: boolean): Promise<{
    result: number; resultName: string; call: string; log: string; cubin?: Uint8Array; ptx?: string;
  }>;

  // memory.cc: stream-ordered device buffers, the pinned-block cache, copies, fills, the default memory pool.
  deviceBufferAlloc(stream: Box, bytes: number): { box: Box; ptr: bigint };
  deviceBufferFree(buffer: Box, stream: Box | undefined, wantMarker: boolean): Box | undefined;
  deviceBufferUse(buffer: Box, stream: Box, afterWork: boolean, method: string): void;
  deviceBufferShare(buffer: Box): bigint;
  deviceBufferAttach(id: bigint): { box: Box; ptr: bigint; bytes: number; device: number };
  pinnedAlloc(bytes: number): { box: Box; buffer: ArrayBuffer };
  pinnedFree(pinned: Box, buffer: ArrayBuffer): void;
  pinnedTrimCache(): number;
  pinnedCacheInfo(): { idleBytes: number; totalBytes: number };
  stagingInfo(): { capBytes: number; allocatedBytes: number; highWaterBytes: number };
  copyDeviceToDevice(stream: Box, dst: Box, dstOffset: number, src: Box, srcOffset: number, bytes: number): void;
  copyPinnedToDevice(stream: Box, dst: Box, dstOffset: number, pinned: Box, pinnedOffset: number, bytes: number): void;
  copyDeviceToPinned(stream: Box, pinned: Box, pinnedOffset: number, src: Box, srcOffset: number, bytes: number): void;
  copyPageableToDevice(stream: Box, dst: Box, dstOffset: number, source: Uint8Array): void;
  copyDeviceToPageable(stream: Box, destination: Uint8Array, src: Box, srcOffset: number): Box;
  copyLanded(flag: Box): boolean;
  memoryFill(stream: Box, dst: Box, offset: number, value: number, count: number, elementSize: 1 | 4): void;
  memoryPoolInfo(device: number): { usedBytes: number; reservedBytes: number; releaseThresholdBytes: number };
  memoryPoolSetReleaseThreshold(device: number, bytes: number): void;
  memoryPoolTrim(device: number, bytesToKeep: number): void;
}

/** The package root (two levels above dist/src). */
export const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const require = createRequire(import.meta.url);
const nodeGypBuild = require('node-gyp-build') as (dir: string) => NativeBinding;

/** The addon for this thread. Loading never touches the driver; the driver opens on first use. */
export const native: NativeBinding = nodeGypBuild(packageRoot);
native.setErrorFactory(makeNativeError);

/** CUDA_ERROR_NOT_READY: a status ("still working"), never an error. */
export const NOT_READY = 600;
