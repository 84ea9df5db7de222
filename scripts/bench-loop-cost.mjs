// The main thread's CPU time per task of the executor benchmark's JS loop (BatchThread.run, as `bench --mode <mode>`
// runs it on one thread) beside a loop of the library's calls and the await alone (take a pool stream, copy in, launch,
// copy out, await stream.synchronize()), on the same slots, partitions and kernel, in one process, alternating.
// The difference is the benchmark's own work per task (Note [a task loop as lean as a user's] in packages/cuda-stream-pool-bench/src/batch.ts).
// CPU time is the main thread's alone (/proc/self/task/<pid>/schedstat), so a driver's own threads do not count.
// Linux only; built code from dist/ (npm run build or npx tsc first). On a GPU, or on the simulated driver:
//   CUDA_STREAM_POOL_LIBCUDA=/tmp/simulated-driver/libcuda.so.1 node scripts/bench-loop-cost.mjs [--calls-only] [mode] [tasks] [elements]
// prints the medians over 9 rounds (after 3 not counted) and their ratio, and the wall time per task with the share of
// it the main thread was busy. mode: pool (default), lease or per-thread.
// With the null driver (scripts/null-driver.cc), whose kernels compute nothing for the benchmark to verify, pass
// --calls-only to time the library's calls and the await alone; compare CUDA_STREAM_POOL_SUBMISSION=deferred and
// direct there for the library's own cost in each mode.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { Stream, StreamPool } from 'cuda-stream-pool';
import { BatchThread } from '../packages/cuda-stream-pool-bench/dist/batch.js';
import { fmaGrid, FMA_BLOCK } from '../packages/cuda-stream-pool-bench/dist/kernels.js';
import { computeReferences, FMA_A, FMA_B, sampleIndices } from '../packages/cuda-stream-pool-bench/dist/reference.js';

// Strict: an unknown option or a mistyped mode would otherwise measure pool under another label.
const { values, positionals } = parseArgs({ allowPositionals: true, options: { 'calls-only': { type: 'boolean', default: false } } });
const callsOnly = values['calls-only'];
const [mode = 'pool', tasksArgument = '4000', elementsArgument = '1024'] = positionals;
const tasks = Number(tasksArgument);
const elements = Number(elementsArgument);
if (!['pool', 'lease', 'per-thread'].includes(mode)) throw new Error(`mode must be pool, lease or per-thread; received ${mode}`);
for (const [name, value] of [['tasks', tasks], ['elements', elements]])
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer; received ${value}`);
const spec = { elements, intensity: 2, partitions: 8, sample: sampleIndices(elements) };
const pool = new StreamPool({ size: 32 });
const thread = await BatchThread.create({ device: 0, spec, references: computeReferences(spec), slots: 32, corrupt: undefined, marks: false, thread: 0 }, pool);
const { ctx } = thread;

/** Nanoseconds the main thread has run on a CPU. */
const cpuNs = () => Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);

/** The library's calls and the await, nothing else, one async loop per slot as the benchmark has. */
async function callsAndAwait(count) {
  let next = 0;
  await Promise.all(
    thread.slots.map(async (slot) => {
      while (next < count) {
        const partition = ctx.partitions[next++ % ctx.partitions.length];
        const take = async (stream) => {
          stream.copy(slot.buffer, partition.pinned, { byteLength: elements * 4 });
          ctx.kernel.launch({ grid: fmaGrid(elements), block: FMA_BLOCK, stream }, slot.buffer, elements, spec.intensity, FMA_A, FMA_B);
          stream.copy(slot.output, slot.buffer, { byteLength: elements * 4 });
          await stream.synchronize();
        };
        if (mode === 'lease') await pool.run(take);
        else await take(mode === 'per-thread' ? Stream.perThread(ctx.device) : pool.getStream());
      }
    }),
  );
}

const loops = callsOnly ? { 'calls+await': callsAndAwait } : { bench: (count) => thread.run(mode, 0, count, true), 'calls+await': callsAndAwait };
const perTask = { bench: [], 'calls+await': [] };
const wallPerTask = { bench: [], 'calls+await': [] };
for (let round = -3; round < 9; round++) {
  for (const [name, loop] of Object.entries(loops)) {
    const start = cpuNs();
    const wallStart = process.hrtime.bigint();
    await loop(tasks);
    if (round < 0) continue;
    perTask[name].push((cpuNs() - start) / tasks / 1000);
    wallPerTask[name].push(Number(process.hrtime.bigint() - wallStart) / tasks / 1000);
  }
}
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const bare = median(perTask['calls+await']);
const busy = (name) => `${median(wallPerTask[name]).toFixed(2)} µs/task of wall time, main thread busy ${((100 * median(perTask[name])) / median(wallPerTask[name])).toFixed(0)} %`;
if (callsOnly) {
  console.log(`${mode}: calls + await ${bare.toFixed(2)} µs/task of main-thread CPU; ${busy('calls+await')}`);
} else {
  const bench = median(perTask.bench);
  console.log(`${mode}: bench loop ${bench.toFixed(2)} µs/task, calls + await ${bare.toFixed(2)} µs/task of main-thread CPU; ratio ${(bench / bare).toFixed(2)}`);
  // Where the main thread is busy for most of the wall time, its CPU is the limit; where it is not, hand-offs are.
  console.log(`  bench loop ${busy('bench')}; calls + await ${busy('calls+await')}`);
}
thread.dispose();
pool.destroy();
