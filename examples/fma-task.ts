// The GPU task of the examples: a job's input to the device, `steps` fused multiply-adds per element (the benchmark's
// `fma_steps` kernel), the output back, summed. Shared by the job-queue executors and the Piscina workers.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { DeviceBuffer, Module, type Device, type Kernel, type StreamPool } from 'cuda-stream-pool';

/** The kernel: the benchmark's `fma_steps`, as PTX that the driver compiles for the GPU at hand. */
export const KERNEL_PTX = fileURLToPath(new URL('../../packages/cuda-stream-pool-bench/kernels/bench.ptx', import.meta.url));

/** A task: `elements` float32 values made from `seed`, each put through `steps` of v = fmaf(v, a, b). */
export interface FmaJob {
  seed: number;
  elements: number;
  steps: number;
  a: number;
  b: number;
}

/** The input of task `seed`: values in [-1, 1), different for every seed. */
export function inputOf(seed: number, elements: number): Float32Array {
  const values = new Float32Array(elements);
  for (let i = 0; i < elements; i++) values[i] = (((seed * 7919 + i * 104729) % 2000) - 1000) / 1000;
  return values;
}

/** A command-line option's value as a whole number of at least `least`; else exits with a message naming it (code 64,
 * a usage error). */
export function wholeNumber(option: string, text: string | undefined, least: number): number {
  const value = text !== undefined && /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < least) {
    console.error(`${option} must be a whole number of at least ${least}; received ${JSON.stringify(text)}.`);
    process.exit(64);
  }
  return value;
}

/** Loads the kernel on `device`, in this thread (a module belongs to the thread that loaded it). */
export async function loadFmaKernel(device: Device): Promise<{ module: Module; kernel: Kernel }> {
  const module = await Module.load(readFileSync(KERNEL_PTX, 'utf8'), { device });
  return { module, kernel: module.getFunction('fma_steps', ['ptr', 'u32', 'u32', 'f32', 'f32']) };
}

/** Runs `job` on a stream leased from `pool`, its input's size admitted as its memory budget; resolves with the
 * float64 sum of its output, in element order. */
export function runFmaTask(pool: StreamPool, kernel: Kernel, job: FmaJob): Promise<number> {
  const { seed, elements, steps, a, b } = job;
  return pool.run(async (stream) => {
    using buffer = DeviceBuffer.from(inputOf(seed, elements), { stream });
    kernel.launch({ grid: Math.ceil(elements / 256), block: 256, stream }, buffer, elements, steps, a, b);
    let sum = 0;
    for (const value of await buffer.toArray(Float32Array, { stream })) sum += value;
    return sum;
  }, { memoryBytes: elements * 4 });
}
