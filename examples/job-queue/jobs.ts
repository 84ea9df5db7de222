// What the executors and whoever enqueues agree on: the queue, the Redis keys, a job's data and result, its input.
import type { FmaJob } from '../fma-task.js';

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
/** A job's data: a task of ../fma-task.ts. */
export type JobData = FmaJob;

/** A job's result: the float64 sum of its output in element order, and the process id of the executor that ran it. */
export interface JobResult {
  sum: number;
  executor: number;
}
