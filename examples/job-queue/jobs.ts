// What the executors and whoever enqueues agree on: the queue, the Redis keys, a job's data and result, its input.
import { fileURLToPath } from 'node:url';

/** The BullMQ queue of GPU jobs. */
export const JOB_QUEUE = 'gpu-jobs';
/** A Redis hash: job id → the JSON of its first finished run's result. */
export const RESULTS_KEY = 'gpu-jobs:results';
/** A Redis hash: job id → the process id of the executor running it now (removed when its run finishes). */
export const RUNNING_KEY = 'gpu-jobs:running';
/** A Redis hash: job id → how many runs started (more than 1: a run was cut short, or ran twice). */
export const STARTS_KEY = 'gpu-jobs:starts';
/** A Redis hash: job id → how many runs finished (more than 1: BullMQ ran it again after its executor died). */
export const RUNS_KEY = 'gpu-jobs:runs';
/** The kernel the jobs run: the benchmark's `fma_steps`, as PTX that the driver compiles for the GPU at hand. */
export const KERNEL_PTX = fileURLToPath(new URL('../../../packages/cuda-stream-pool-bench/kernels/bench.ptx', import.meta.url));

/** A job: `elements` float32 values made from `seed`, each put through `steps` of v = fmaf(v, a, b). */
export interface JobData {
  seed: number;
  elements: number;
  steps: number;
  a: number;
  b: number;
}

/** A job's result: the float64 sum of its output in element order, and the process id of the executor that ran it. */
export interface JobResult {
  sum: number;
  executor: number;
}

/** The input of job `seed`: values in [-1, 1), different for every seed. */
export function inputOf(seed: number, elements: number): Float32Array {
  const values = new Float32Array(elements);
  for (let i = 0; i < elements; i++) values[i] = (((seed * 7919 + i * 104729) % 2000) - 1000) / 1000;
  return values;
}
