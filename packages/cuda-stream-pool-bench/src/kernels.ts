// The benchmarks' kernels: kernels/bench.cu, loaded from the PTX committed beside it.
//
// Why prebuilt PTX and not Program.compile (NVRTC): `npx cuda-stream-pool bench` is what a user runs first, and it
// should run wherever the driver runs: PTX needs only libcuda (the driver JIT-compiles it for the GPU at hand and caches
// the result), while NVRTC is part of the toolkit, which a machine that only runs GPU code often lacks. The PTX also
// shows the exact instruction the CPU reference emulates (fma.rn.f32, see Note [exact fmaf] in fmaf.ts), and loading it
// costs no compile time in the benchmark's start-up. The cost: after editing kernels/bench.cu, regenerate the PTX
// with the command at the top of that file (and the driver must accept the PTX ISA version nvcc wrote).
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { Module, type Device, type Kernel } from 'cuda-stream-pool';
import { packageRoot } from './package.js';

/** The directory of kernels/bench.ptx, at the package root. */
const kernelsDirectory = path.join(packageRoot, 'kernels');

/** The path of the PTX the benchmarks load. */
export const BENCH_PTX_PATH = path.join(kernelsDirectory, 'bench.ptx');

/** Threads per block of fma_steps launches (one thread per element). */
export const FMA_BLOCK = 256;

/** The PTX text of kernels/bench.cu. @throws `Error` naming the file and how to regenerate it when it is missing. */
export function benchPtx(): string {
  try {
    return readFileSync(BENCH_PTX_PATH, 'utf8');
  } catch (error) {
    throw new Error(
      `cuda-stream-pool bench: cannot read the benchmark kernels at ${BENCH_PTX_PATH} (${(error as Error).message}). ` +
        'Reinstall the package, or regenerate the PTX: bash scripts/build-ptx.sh',
    );
  }
}

/** The loaded benchmark kernels of one device in this thread. */
export interface BenchKernels {
  module: Module;
  /** fma_steps(data: ptr, n: u32, steps: u32, a: f32, b: f32): data[i] = steps × fmaf for i < n, in place. */
  fmaSteps: Kernel;
  /** empty_kernel(): does nothing (launch and synchronize overhead). */
  empty: Kernel;
  /** hold(ns: u64): one thread spins `ns` nanoseconds of device time, holding its stream. */
  hold: Kernel;
}

const loaded = new Map<Device, Promise<BenchKernels>>();

/** Loads kernels/bench.ptx on `device` once per thread (modules are per thread; workers load their own). */
export function benchKernels(device: Device): Promise<BenchKernels> {
  let kernels = loaded.get(device);
  if (!kernels) {
    kernels = Module.load(benchPtx(), { device }).then((module) => ({
      module,
      fmaSteps: module.getFunction('fma_steps', ['ptr', 'u32', 'u32', 'f32', 'f32']),
      empty: module.getFunction('empty_kernel', []),
      hold: module.getFunction('hold', ['u64']),
    }));
    kernels.catch(() => loaded.delete(device));
    loaded.set(device, kernels);
  }
  return kernels;
}

/** The grid of an fma_steps launch over `elements` elements. */
export function fmaGrid(elements: number): number {
  return Math.ceil(elements / FMA_BLOCK);
}
