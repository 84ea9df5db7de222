// Shared helpers for GPU suites: the skip reasons, the tests the simulated driver cannot run, the test kernels,
// device-side timestamps.
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { cuda, Device, Module, Stream, type Kernel } from 'cuda-stream-pool';

import { repositoryRoot } from './paths.js';
import { SIMULATOR_SKIP_PREFIX } from './skips.js';

export { repositoryRoot, SIMULATOR_SKIP_PREFIX };

/** `{ skip }` for GPU tests: false with a GPU, else the visible reason (npm run test:gpu fails on any skip). */
export const gpu: { skip: string | false } = {
  // The full reason is printed once at the start of the run (test/support/run-tests.ts), not on every skip.
  skip: cuda.available ? false : 'needs a CUDA GPU, and this machine has none usable',
};

/** `{ skip }` for tests that need `count` GPUs: as {@link gpu} without a GPU, else `needs <count> GPUs` while fewer are
 * visible. `npm run test:gpu` accepts exactly that skip when `Device.count()` is below `count` (test/support/run-tests.ts)
 * and fails on every other. */
export function gpus(count: number): { skip: string | false } {
  if (gpu.skip) return gpu;
  return { skip: Device.count() < count ? multiDeviceSkip(count) : false };
}

/** The skip reason of a test that needs `count` GPUs; run-tests.ts recognises it. */
export function multiDeviceSkip(count: number): string {
  return `needs ${count} GPUs`;
}

// Note [tests the simulated driver cannot run]: `npm run test:sim` (run-tests.js --sim) runs every suite on
// scripts/simulated-driver.cc and fails on any skip but these. Each GPU test that cannot run there names one key of
// `notSimulated` through `gpuNotSimulated(key)`: on a real GPU it runs as a `gpu` test does; on the simulated driver
// it skips with SIMULATOR_SKIP_PREFIX and the key's reason. A key that names a feature the simulator lacks goes away
// when the simulator models that feature (the tests then run: delete the key and let tsc find them). The simulated
// driver is recognised by the name its devices report ("Simulated GPU <n>", from its cuDeviceGetName), so a suite run
// by hand with CUDA_STREAM_POOL_LIBCUDA pointing at it skips the same tests as the tier does.

/** Why a GPU test cannot run under the simulated driver, one entry per cause: the full list of the sim tier's
 * exceptions. See Note [tests the simulated driver cannot run]. */
export const notSimulated = {
  // Needs what the simulated tier's machines lack.
  nvrtc: 'needs NVRTC (Program.compile, the runtime compiler), which the machines of the simulated tier do not have',
  // Features the simulated driver does not model yet.
  ptxJit: 'the simulator does not JIT-compile PTX: cuModuleLoadDataEx accepts any image, so a bad one loads',
  // Host timing that the simulated tier's machines (2 loaded cores, shared with the simulator's threads) cannot give.
  pollerLinger:
    'needs the JS thread to queue its next wait within the poller\'s 100 µs linger after the last one settled, which a loaded 2-core machine running the simulator\'s threads often misses',
} as const;

/** A key of {@link notSimulated}: why a test cannot run under the simulated driver. */
export type NotSimulated = keyof typeof notSimulated;

/** True when the loaded driver is the simulated driver (scripts/simulated-driver.cc): its devices are named
 * "Simulated GPU <n>". */
export const onSimulatedDriver: boolean = cuda.available && Device.get(0).name.startsWith('Simulated GPU ');

/** The skip reason of a test that cannot run under the simulated driver for `reason`. */
export function simulatorSkip(reason: NotSimulated): string {
  return `${SIMULATOR_SKIP_PREFIX}${notSimulated[reason]}`;
}

/** `{ skip }` for a GPU test that cannot run under the simulated driver for `reason` (a key of {@link notSimulated}): as
 * {@link gpu} on a real GPU or none, and skipped with {@link simulatorSkip} on the simulated driver. */
export function gpuNotSimulated(reason: NotSimulated): { skip: string | false } {
  if (gpu.skip) return gpu;
  return { skip: onSimulatedDriver ? simulatorSkip(reason) : false };
}

const loaded = new Map<number, Promise<Module>>();

// Note [prebuilt test kernels]: the kernels that the stream, event, memory and pool suites and the benchmarks need
// stay prebuilt PTX (test/kernels/*.ptx, kernels/bench.ptx) loaded with Module.load, rather than compiled with NVRTC
// at run time. Those suites test their own concept, so they need only the driver, as the library does: a machine
// without NVRTC (which is optional, used only by Program.compile) still runs them, and an NVRTC problem fails the
// program/kernel suites alone instead of every GPU suite. Each test file is its own process, so NVRTC would also add
// a compile to each. compute_80 PTX is JIT-compiled by the driver for the GPU at hand and cached by it. Drift between
// a .cu and its PTX is caught by test/gpu/kernel/program.test.ts, which compiles every such .cu with NVRTC and compares the
// kernels and parameter types with the committed PTX. The kernel and program suites compile their own sources.

/** The test kernels (test/kernels/test-kernels.cu), loaded once per thread and device (default 0). See Note
 * [prebuilt test kernels]. */
export async function testKernels(device = 0): Promise<{
  module: Module;
  spin: Kernel; // (ns: u64, stamps: ptr or 0n)
  empty: Kernel;
  writeInvalid: Kernel; // (address: u64)
  fillU32: Kernel; // (out: ptr, value: u32, n: u32)
}> {
  let pending = loaded.get(device);
  if (pending === undefined) {
    pending = Module.load(readFileSync(path.join(repositoryRoot, 'test', 'kernels', 'test-kernels.ptx'), 'utf8'), { device });
    loaded.set(device, pending);
  }
  const module = await pending;
  return {
    module,
    spin: module.getFunction('spin', ['u64', 'ptr']),
    empty: module.getFunction('empty', []),
    writeInvalid: module.getFunction('write_invalid', ['u64']),
    fillU32: module.getFunction('fill_u32', ['ptr', 'u32', 'u32']),
  };
}

/** True when the closed intervals [a0, a1] and [b0, b1] overlap. */
export function overlaps(a: readonly [bigint, bigint], b: readonly [bigint, bigint]): boolean {
  return a[0] < b[1] && b[0] < a[1];
}

/** Launches a spin of `ns` on each of `streams`, all behind one gate (a 200 ms spin on a stream of its own), so that
 * they start and end together however long the launches take (on a loaded machine they spread over tens of
 * milliseconds). Returns what to destroy afterwards: the gate's stream and event. */
export function spinBehindGate(spin: Kernel, streams: readonly Stream[], ns: bigint): { destroy(): void } {
  const gate = Stream.create({ device: streams[0]?.device });
  spin.launch({ grid: 1, block: 1, stream: gate }, 200n * MS, 0n);
  const opened = gate.recordEvent();
  for (const stream of streams) {
    stream.waitEvent(opened);
    spin.launch({ grid: 1, block: 1, stream }, ns, 0n);
  }
  return {
    destroy() {
      opened.destroy();
      gate.destroy();
    },
  };
}

/** Spin lengths, in nanoseconds of device time. */
export const MS = 1_000_000n;
