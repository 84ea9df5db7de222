// The simulated driver's timing model: one copy engine per direction, a compute engine with a limit on concurrent
// kernels, the legacy default stream's implicit synchronization, and the executor benchmark in modelled time, where
// pool streams must beat the legacy default stream by the overlap of copies and kernels.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';

import { repositoryRoot } from '../support/gpu.js';
import { needsCompiler, simulatedDriver, simulatedJson } from '../support/simulated-driver.js';

const spinKernel = `
  import { readFileSync } from 'node:fs';
  import { DeviceBuffer, Module, Stream } from 'cuda-stream-pool';
  const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
  const spin = tests.getFunction('spin', ['u64', 'ptr']);
  // Spins ms on the stream and returns its [start, end] %globaltimer stamps, in milliseconds.
  function spinOn(stream, ms) {
    const stamps = DeviceBuffer.alloc(16, { stream });
    spin.launch({ grid: 1, block: 1, stream }, BigInt(ms * 1e6), stamps);
    return async () => [...(await stamps.toArray(BigUint64Array, { stream }))].map((ns) => Number(ns) / 1e6);
  }`;

test('copies in one direction take turns on their engine; copies in opposite directions overlap', needsCompiler, async () => {
  // 4 MiB at 80 bytes per microsecond: 52 ms a copy.
  const result = await simulatedJson<{ sameDirectionMs: number; oppositeMs: number }>(
    `import { DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
     const bytes = 4 << 20;
     const [a, b] = [Stream.create(), Stream.create()];
     const pinned = [PinnedBuffer.alloc(bytes), PinnedBuffer.alloc(bytes)];
     const device = [DeviceBuffer.alloc(bytes, { stream: a }), DeviceBuffer.alloc(bytes, { stream: b })];
     await Promise.all([a.synchronize(), b.synchronize()]);
     async function timed(queue) {
       const started = performance.now();
       queue();
       await Promise.all([a.synchronize(), b.synchronize()]);
       return performance.now() - started;
     }
     const sameDirectionMs = await timed(() => { a.copy(device[0], pinned[0]); b.copy(device[1], pinned[1]); });
     const oppositeMs = await timed(() => { a.copy(device[0], pinned[0]); b.copy(pinned[1], device[1]); });
     console.log(JSON.stringify({ sameDirectionMs, oppositeMs }));`,
    { env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '80' } },
  );
  // Two 52 ms copies on one engine can never take less than 104 ms; on two engines they take one copy's time, which
  // must come in under the serialized time (a margin of 2x).
  assert.ok(result.sameDirectionMs >= 100, `host-to-device copies serialize: ${result.sameDirectionMs} ms`);
  assert.ok(result.oppositeMs < 100, `a host-to-device and a device-to-host copy overlap: ${result.oppositeMs} ms`);
});

test('at most SIMULATED_DRIVER_CONCURRENT_KERNELS kernels run at once', needsCompiler, async () => {
  const result = await simulatedJson<{ stamps: number[][] }>(
    `${spinKernel}
     const streams = [Stream.create(), Stream.create(), Stream.create()];
     const reads = streams.map((s) => spinOn(s, 60));
     const stamps = await Promise.all(reads.map((read) => read()));
     console.log(JSON.stringify({ stamps }));`,
    { env: { SIMULATED_DRIVER_CONCURRENT_KERNELS: '2' } },
  );
  // Every instant is inside at most two of the three intervals: the third kernel starts after one of the first ends.
  const starts = result.stamps.map(([start]) => start!).sort((x, y) => x - y);
  const ends = result.stamps.map(([, end]) => end!).sort((x, y) => x - y);
  assert.ok(starts[2]! >= ends[0]!, `the third kernel waited for a free slot: ${JSON.stringify(result.stamps)}`);
  assert.ok(starts[1]! < ends[0]!, `two kernels ran side by side: ${JSON.stringify(result.stamps)}`);
});

test('the legacy default stream waits for blocking streams, not for non-blocking ones', needsCompiler, async () => {
  const result = await simulatedJson<{ blocking: number[][]; nonBlocking: number[][] }>(
    `${spinKernel}
     async function pair(nonBlocking) {
       const first = spinOn(Stream.create({ nonBlocking }), 80);
       const second = spinOn(Stream.legacy(), 80);
       return [await first(), await second()];
     }
     console.log(JSON.stringify({ blocking: await pair(false), nonBlocking: await pair(true) }));`,
  );
  const [[, blockingEnd], [legacyStart]] = result.blocking as [number[], number[]];
  assert.ok(legacyStart! >= blockingEnd!, `legacy work started after the blocking stream's: ${JSON.stringify(result.blocking)}`);
  const [[, nonBlockingEnd], [legacyStartAgain]] = result.nonBlocking as [number[], number[]];
  assert.ok(legacyStartAgain! < nonBlockingEnd!, `legacy work overlapped the non-blocking stream's: ${JSON.stringify(result.nonBlocking)}`);
});

interface BenchMode {
  mode: string;
  tasksPerSecond: { median: number };
  overlapFraction: { median: number };
  verifiedTasks: number;
}

/** Runs the benchmark's CLI on the simulated driver with modelled rates and returns its JSON. */
function benchJson(args: string[]): Promise<{ modes: BenchMode[]; parameters: { tasks: number; runs: number; warmupTasks: number } }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['packages/cuda-stream-pool-bench/dist/cli/main.js', 'bench', '--json', '-q', ...args], {
      cwd: repositoryRoot,
      env: {
        ...process.env,
        CUDA_STREAM_POOL_LIBCUDA: simulatedDriver(),
        // 65,536-byte partitions: 2 ms a copy; 4 fmaf steps of 16,384 elements: 2 ms a kernel. Long beside what the
        // CPU spends on a task, so that a loaded machine still measures the model.
        SIMULATED_DRIVER_COPY_BYTES_PER_US: '32',
        SIMULATED_DRIVER_KERNEL_FMA_PER_US: '32',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`bench exited ${code}: ${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

test('in modelled time, pool streams run the benchmark at least 2x the legacy default stream and near the overlap bound', needsCompiler, async (t) => {
  const result = await benchJson(['--mode', 'legacy,pool', '--tasks', '96', '--elements', '16384', '--intensity', '4', '--runs', '3']);
  const [legacy, pool] = ['legacy', 'pool'].map((name) => result.modes.find((m) => m.mode === name)!);
  // Every task of every run, the warm-up's included, checked its sample against the CPU's fmaf.
  const checked = result.parameters.tasks * result.parameters.runs;
  assert.ok(legacy!.verifiedTasks >= checked && pool!.verifiedTasks >= checked, JSON.stringify(result.modes));
  const speedup = pool!.tasksPerSecond.median / legacy!.tasksPerSecond.median;
  t.diagnostic(`pool ${speedup.toFixed(2)}x legacy, at ${pool!.overlapFraction.median.toFixed(2)} of the overlap bound`);
  assert.ok(speedup >= 2, `pool ${speedup.toFixed(2)}x legacy`);
  assert.ok(pool!.overlapFraction.median >= 0.8, `pool at ${pool!.overlapFraction.median.toFixed(2)} of the overlap bound`);
});
