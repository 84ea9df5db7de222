// An executor process for GPU jobs from a BullMQ queue (jobs kept in Redis): run one per GPU, on as many machines as
// you like, all against the same Redis. Each executor takes several jobs at once (--concurrency), and each job runs
// on a stream leased from the process's pool, with its memory budget admitted first. Run by
// test/gpu/job-queue.test.ts; see examples/job-queue/README.md.
//
//   node dist/examples/job-queue/executor.js --redis redis://127.0.0.1:6379 --device 0 --concurrency 8
import { parseArgs } from 'node:util';

import { Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';

import { Device, StreamPool } from 'cuda-stream-pool';
import { loadFmaKernel, runFmaTask, wholeNumber } from '../fma-task.js';
import { JOB_QUEUE, RESULTS_KEY, RUNNING_KEY, RUNS_KEY, STARTS_KEY, type JobData, type JobResult } from './jobs.js';

const { values: options } = parseArgs({
  options: {
    redis: { type: 'string', default: 'redis://127.0.0.1:6379' },
    device: { type: 'string', default: '0' },
    concurrency: { type: 'string', default: '8' },
    // How long a job's lock lives without renewal (ms): a job of an executor that died runs again after about this.
    'lock-ms': { type: 'string', default: '30000' },
  },
});

const device = Device.get(wholeNumber('--device', options.device, 0));
const pool = new StreamPool({ device, size: 32 });
const { module, kernel } = await loadFmaKernel(device);
const store = new Redis(options.redis, { maxRetriesPerRequest: null });

/** One job: a task of ../fma-task.ts on a leased stream; its result is stored once per job id. */
async function runJob(job: Job<JobData>): Promise<JobResult> {
  await store.multi().hincrby(STARTS_KEY, job.id!, 1).hset(RUNNING_KEY, job.id!, process.pid).exec();
  let sum: number;
  try {
    sum = await runFmaTask(pool, kernel, job.data);
  } catch (error) {
    await store.hdel(RUNNING_KEY, job.id!); // it finished, failing: BullMQ records the failure
    throw error;
  }
  // BullMQ delivers at least once: a job whose executor died runs again. The result is stored once per job id (the
  // first run to finish wins); runs are counted as they start and as they finish, so reruns can be reported.
  const result: JobResult = { sum, executor: process.pid };
  await store.multi().hsetnx(RESULTS_KEY, job.id!, JSON.stringify(result)).hincrby(RUNS_KEY, job.id!, 1).hdel(RUNNING_KEY, job.id!).exec();
  return result;
}

const lockDuration = wholeNumber('--lock-ms', options['lock-ms'], 1);
const worker = new Worker<JobData, JobResult>(JOB_QUEUE, runJob, {
  connection: { url: options.redis, maxRetriesPerRequest: null },
  concurrency: wholeNumber('--concurrency', options.concurrency, 1),
  lockDuration,
  stalledInterval: Math.max(500, lockDuration / 2),
  // A job whose executor died is moved back to wait each time its lock expires; it must not fail for that.
  maxStalledCount: 1000,
});
worker.on('failed', (job, error) => console.error(`executor ${process.pid}: job ${job?.id} failed: ${error.stack ?? error.message}`));
await worker.waitUntilReady();
console.log(`executor ${process.pid} ready on ${device.name} (device ${device.ordinal})`);

// SIGTERM: finish the jobs in hand, then let the pool go.
process.once('SIGTERM', () => {
  void (async () => {
    await worker.close();
    await store.quit();
    await pool.close();
    module.unload();
    process.exit(0);
  })();
});
