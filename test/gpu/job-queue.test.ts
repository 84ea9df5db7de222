// The job-queue example (examples/job-queue): a real Redis server, two executor processes taking GPU jobs from a
// BullMQ queue, one killed with SIGKILL mid-run and a new one started; every job's result must be right and stored
// once. On the simulated driver its CPU kernels give the real results. Needs `redis-server` on PATH (Debian's
// redis-server package; CI installs it).
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { test } from 'node:test';

import { Queue } from 'bullmq';
import { Redis } from 'ioredis';

import { fmaSteps } from '#bench/fmaf.js';
import { Device, StreamPool } from 'cuda-stream-pool';
import { inputOf, loadFmaKernel, runFmaTask } from '../../examples/fma-task.js';
import { JOB_QUEUE, RESULTS_KEY, RUNNING_KEY, RUNS_KEY, STARTS_KEY, type JobData, type JobResult } from '../../examples/job-queue/jobs.js';
import { gpu } from '../support/gpu.js';

const EXECUTOR = new URL('../../examples/job-queue/executor.js', import.meta.url);
const JOBS = 2000;
const ELEMENTS = 4096;
const STEPS = 16;
const A = 0.9990234375; // exact in float32
const B = 0.0009765625;

const redisMissing = spawnSync('redis-server', ['--version']).error !== undefined;
const withRedis = gpu.skip ? gpu : { skip: redisMissing ? 'needs redis-server on PATH (Debian: apt-get install redis-server)' : false };

/** A free TCP port on the loopback interface. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Resolves once `child` printed a line matching `pattern` on stdout; rejects if it exits first. */
function waitForLine(child: ChildProcess, pattern: RegExp, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      if (pattern.test(seen)) {
        child.stdout!.off('data', onData);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code, signal) => reject(new Error(`${what} exited (${signal ?? code}) before it was ready: ${seen}`)));
  });
}

/** The result a job must give: its input through STEPS exact float32 FMAs, summed in float64 in element order. */
function expectedSum(seed: number): number {
  let sum = 0;
  for (const value of inputOf(seed, ELEMENTS)) sum += fmaSteps(value, STEPS, A, B);
  return sum;
}

/** The jobs' work as tasks of this process, 8 at a time on one pool (as two executors of concurrency 4): seconds. */
async function inProcessSeconds(): Promise<number> {
  await using pool = new StreamPool({ size: 32 });
  const { module, kernel } = await loadFmaKernel(Device.get(0));
  using _module = module;
  let next = 0;
  const begun = performance.now();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let seed = next++; seed < JOBS; seed = next++) {
        const sum = await runFmaTask(pool, kernel, { seed, elements: ELEMENTS, steps: STEPS, a: A, b: B });
        if (seed % 97 === 0) assert.equal(sum, expectedSum(seed));
      }
    }),
  );
  return (performance.now() - begun) / 1000;
}

test('executors on a BullMQ queue in Redis: one is killed mid-run, a new one joins, every job is right and stored once', withRedis, async (t) => {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const executors: ChildProcess[] = [];
  const startExecutor = async () => {
    const child = spawn(process.execPath, [EXECUTOR.pathname, '--redis', url, '--concurrency', '4', '--lock-ms', '2000'], { stdio: ['ignore', 'pipe', 'inherit'] });
    executors.push(child);
    await waitForLine(child, /executor \d+ ready/, 'an executor');
    return child;
  };
  let queue: Queue<JobData, JobResult> | undefined;
  let store: Redis | undefined;
  try {
    await waitForLine(redis, /Ready to accept connections/, 'redis-server');
    store = new Redis(url);
    queue = new Queue<JobData, JobResult>(JOB_QUEUE, { connection: { url } });
    const first = await startExecutor();
    await startExecutor();
    const begun = performance.now();
    await queue.addBulk(
      Array.from({ length: JOBS }, (_, seed) => ({
        name: 'fma',
        data: { seed, elements: ELEMENTS, steps: STEPS, a: A, b: B },
        opts: { jobId: `job-${seed}`, removeOnComplete: true },
      })),
    );
    // Once a tenth of the jobs are done, kill an executor while it runs a job, and start another in its place. A job
    // can finish between the look and the kill: then the next executor is killed the same way, up to five times.
    while ((await store.hlen(RESULTS_KEY)) < JOBS / 10) await new Promise((resolve) => setTimeout(resolve, 20));
    let victim = first;
    let inHand: string[] = []; // the jobs the killed executor was running: its runs that never finished
    for (let kills = 0; kills < 5 && inHand.length === 0; kills++) {
      const pid = String(victim.pid);
      while (!Object.values(await store.hgetall(RUNNING_KEY)).includes(pid)) await new Promise((resolve) => setImmediate(resolve));
      victim.kill('SIGKILL');
      await new Promise((resolve) => victim.once('exit', resolve));
      inHand = Object.entries(await store.hgetall(RUNNING_KEY)).filter(([, runner]) => runner === pid).map(([id]) => id);
      victim = await startExecutor();
    }
    const deadline = Date.now() + 120_000;
    while ((await store.hlen(RESULTS_KEY)) < JOBS && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    const seconds = (performance.now() - begun) / 1000;

    const results = await store.hgetall(RESULTS_KEY);
    const runs = await store.hgetall(RUNS_KEY);
    assert.equal(Object.keys(results).length, JOBS, 'every job stored a result');
    for (let seed = 0; seed < JOBS; seed++) {
      const stored = JSON.parse(results[`job-${seed}`]!) as JobResult;
      assert.equal(stored.sum, expectedSum(seed), `job-${seed}'s sum`);
    }
    const starts = await store.hgetall(STARTS_KEY);
    const finished = Object.values(runs).reduce((sum, n) => sum + Number(n), 0);
    const started = Object.values(starts).reduce((sum, n) => sum + Number(n), 0);
    const startedAgain = Object.values(starts).filter((n) => Number(n) > 1).length;
    assert.ok(finished >= JOBS && started >= finished);
    assert.ok(inHand.length > 0, 'the executor was killed with a job in hand');
    for (const id of inHand) assert.ok(Number(starts[id]) >= 2, `${id}, in hand when its executor was killed, ran again`);
    const counts = await queue.getJobCounts('wait', 'active', 'delayed', 'failed');
    assert.deepEqual(counts, { wait: 0, active: 0, delayed: 0, failed: 0 });
    t.diagnostic(
      `${JOBS} jobs of ${ELEMENTS} elements in ${seconds.toFixed(2)} s (${(JOBS / seconds).toFixed(0)} jobs/s) on 2 executors at a time (${executors.length - 2} killed and replaced); ` +
        `${startedAgain} job(s) started again after the kill (${started - JOBS} extra starts, ${finished - JOBS} extra finished runs)`,
    );
    t.diagnostic(`the same tasks in this process, 8 at a time on one pool: ${(JOBS / (await inProcessSeconds())).toFixed(0)} tasks/s`);
  } finally {
    await queue?.close();
    store?.disconnect();
    for (const child of executors) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    redis.kill('SIGKILL');
  }
});
