// A Piscina worker: attaches the main thread's StreamPool (its share() record comes as Piscina's workerData), loads
// the kernel once, and runs each task it is given on a stream leased from that one pool. See main.ts.
import { workerData } from 'node:worker_threads';

import { Device, StreamPool, type SharedStreamPool } from 'cuda-stream-pool';
import { loadFmaKernel, runFmaTask, type FmaJob } from '../fma-task.js';

const pool = StreamPool.attach((workerData as { pool: SharedStreamPool }).pool);
const { kernel } = await loadFmaKernel(Device.get(pool.device.ordinal));

/** One task: resolves with its output's sum (see ../fma-task.ts). */
export default function run(job: FmaJob): Promise<number> {
  return runFmaTask(pool, kernel, job);
}
