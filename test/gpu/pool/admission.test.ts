// GPU admission on a device: tasks that declare memory budgets run without running out of memory when, started all at
// once, they would not fit. The policy itself (ordering, turns, deaths) is tested on the CPU in
// test/cpu/pool-admission.test.ts. Run alone: node dist/test/support/run-tests.js --gpu admission
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CudaError, Device, DeviceBuffer, StreamPool, type Stream } from 'cuda-stream-pool';
import { gpu, onSimulatedDriver } from '../../support/gpu.js';

const MiB = 2 ** 20;

/** One task: allocates `bytes` on its stream, fills them with `value`, reads the last 16 bytes back, frees, and waits
 * until the free has run (so the memory is back in the device's pool for the next task). */
async function task(stream: Stream, bytes: number, value: number): Promise<number[]> {
  const buffer = DeviceBuffer.alloc(bytes, { stream });
  try {
    stream.fill(buffer, value, { type: 'u8' });
    return [...(await buffer.subarray(bytes - 16).toArray(Uint8Array, { stream }))];
  } finally {
    buffer.free({ stream });
    await stream.synchronize();
  }
}

test('tasks whose budgets oversubscribe the device all run, a limit-full at a time, without running out of memory', gpu, async () => {
  const device = Device.get(0);
  // Most of what is free on a GPU; on the simulated driver, whose device memory is host memory, a little.
  const limit = onSimulatedDriver ? 256 * MiB : Math.floor((device.memoryInfo().freeBytes * 0.6) / MiB) * MiB;
  const budget = Math.floor(limit / 4 / MiB) * MiB;
  await using pool = new StreamPool({ size: 8, memoryLimitBytes: limit });
  assert.equal(pool.memoryLimitBytes, limit);
  let inFlight = 0;
  let peak = 0;
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      pool.run(async (stream) => {
        inFlight += budget;
        peak = Math.max(peak, inFlight);
        assert.ok(pool.stats().memoryAdmittedBytes <= limit);
        try {
          return await task(stream, budget, i + 1);
        } finally {
          inFlight -= budget;
        }
      }, { memoryBytes: budget }),
    ),
  );
  results.forEach((bytes, i) => assert.deepEqual(bytes, new Array(16).fill(i + 1), `task ${i} read its own bytes`));
  assert.equal(peak, 4 * budget, 'four budgets fit at once, and four ran at once');
  const stats = pool.stats();
  assert.deepEqual([stats.memoryAdmittedBytes, stats.memoryWaiters, stats.leased], [0, 0, 0]);

  if (onSimulatedDriver) return; // its memory is the host's: the control below would only use up RAM
  // The control: the same tasks without budgets, eight at once (one per stream), ask for 1.2 times what was free.
  const outcomes = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => pool.run((stream) => task(stream, budget, i + 1))));
  const failures = outcomes.filter((outcome) => outcome.status === 'rejected').map((outcome) => (outcome as PromiseRejectedResult).reason as unknown);
  assert.ok(failures.length > 0, 'without budgets, some task ran out of memory');
  for (const failure of failures) assert.ok(failure instanceof CudaError && failure.code === 'CUDA_ERROR_OUT_OF_MEMORY', String(failure));
});

test('the default pool takes its limit from CUDA_STREAM_POOL_MEMORY_LIMIT, and a new pool from the device\'s memory', gpu, () => {
  using pool = new StreamPool({ size: 2 });
  assert.equal(pool.memoryLimitBytes, Device.get(0).totalMemoryBytes);
  assert.equal(pool.stats().memoryLimitBytes, Device.get(0).totalMemoryBytes);
  const expected = process.env.CUDA_STREAM_POOL_MEMORY_LIMIT ? Number(process.env.CUDA_STREAM_POOL_MEMORY_LIMIT) : Device.get(0).totalMemoryBytes;
  assert.equal(StreamPool.default().memoryLimitBytes, expected);
  assert.throws(() => pool.tryAcquire({ memoryBytes: pool.memoryLimitBytes + 1 }), { code: 'ERR_OUT_OF_RANGE' });
});
