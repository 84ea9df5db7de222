// Worker threads from Piscina sharing one StreamPool: the main thread creates the pool and posts `pool.share()` to
// the workers through Piscina's workerData; each worker attaches it (worker.ts) and runs the tasks Piscina gives it
// on leased streams of that pool, so leases are exclusive across every thread. Run by test/gpu/piscina.test.ts.
//
//   node dist/examples/piscina/main.js --threads 4 --tasks 8192 --elements 65536
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { Piscina } from 'piscina';

import { StreamPool } from 'cuda-stream-pool';
import { wholeNumber, type FmaJob } from '../fma-task.js';

/** What {@link runWithPiscina} does: `tasks` tasks of `elements` values and `steps` steps, `threads` workers, each with
 * `perThread` tasks in flight (Piscina's concurrentTasksPerWorker). */
export interface PiscinaRun {
  threads: number;
  perThread: number;
  tasks: number;
  elements: number;
  steps: number;
}

/** Runs the tasks on a Piscina pool of workers sharing one StreamPool; resolves with each task's sum, the throughput
 * (tasks/s, from the first task queued to the last done) and the leases the pool granted. */
export async function runWithPiscina(o: PiscinaRun): Promise<{ sums: number[]; tasksPerSecond: number; leases: number }> {
  await using pool = new StreamPool({ size: 32 });
  const piscina = new Piscina<FmaJob, number>({
    filename: new URL('./worker.js', import.meta.url).href,
    minThreads: o.threads,
    maxThreads: o.threads,
    concurrentTasksPerWorker: o.perThread,
    workerData: { pool: pool.share() },
  });
  try {
    // Every worker started and attached before timing: a warm-up task per slot.
    await Promise.all(Array.from({ length: o.threads * o.perThread }, (_, seed) => piscina.run(job(seed, o))));
    const before = pool.stats().leaseCounts.reduce((sum, n) => sum + n, 0);
    const begun = performance.now();
    const sums = await Promise.all(Array.from({ length: o.tasks }, (_, seed) => piscina.run(job(seed, o))));
    const seconds = (performance.now() - begun) / 1000;
    const leases = pool.stats().leaseCounts.reduce((sum, n) => sum + n, 0) - before;
    return { sums, tasksPerSecond: o.tasks / seconds, leases };
  } finally {
    await piscina.destroy();
  }
}

/** The task for `seed`: the benchmark kernel's constants, exact in float32. */
export function job(seed: number, o: Pick<PiscinaRun, 'elements' | 'steps'>): FmaJob {
  return { seed, elements: o.elements, steps: o.steps, a: 0.9990234375, b: 0.0009765625 };
}

// Run as a program (also through a symbolic link), not imported by the test.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const { values } = parseArgs({
    options: {
      threads: { type: 'string', default: '4' },
      'per-thread': { type: 'string', default: '8' },
      tasks: { type: 'string', default: '8192' },
      elements: { type: 'string', default: '65536' },
      steps: { type: 'string', default: '16' },
    },
  });
  const o = {
    threads: wholeNumber('--threads', values.threads, 1),
    perThread: wholeNumber('--per-thread', values['per-thread'], 1),
    tasks: wholeNumber('--tasks', values.tasks, 1),
    elements: wholeNumber('--elements', values.elements, 1),
    steps: wholeNumber('--steps', values.steps, 0),
  };
  const { tasksPerSecond, leases } = await runWithPiscina(o);
  console.log(`${o.tasks} tasks of ${o.elements} float32 on ${o.threads} Piscina workers sharing one pool: ${tasksPerSecond.toFixed(0)} tasks/s (${leases} leases)`);
}
