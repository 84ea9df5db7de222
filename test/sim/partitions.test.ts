// Device partitions (green contexts) on the simulated driver, which splits its 132 multiprocessors in steps of 8 as
// an H100/H200 does: the split is made once per process and seen by every thread, counts are checked and rounded as
// the driver rounds them, pools and streams made in a partition do what any pool and stream does (leases, kernels,
// copies, events, workers, deferred submission), and a driver without green contexts, or one that fails a call,
// gives a typed error and leaves everything else working.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson, simulatedJsonWithCalls } from '../support/simulated-driver.js';

const setup = `
  import { readFileSync } from 'node:fs';
  import { cuda, Device, DeviceBuffer, DevicePartition, Stream, StreamPool } from 'cuda-stream-pool';
  const outcome = (f) => { try { const v = f(); return v === undefined ? 'done' : v; } catch (e) { return { name: e.name, code: e.code, message: e.message }; } };
  const shape = (partitions) => partitions.map((p) => [p.index, p.multiprocessorCount, p.requestedMultiprocessors ?? null]);`;

test('a device is split once per process: the counts are rounded up, the rest is a partition, and the same split comes back', needsCompiler, async () => {
  const { result, calls } = await simulatedJsonWithCalls<{ before: unknown; split: unknown; again: boolean; read: boolean; other: { code: string; message: string }; frozen: boolean; streams: unknown[] }>(
    `${setup}
     const device = Device.get(0);
     const before = device.partitions ?? null;
     const split = device.partition([7, 30]);
     const again = device.partition([7, 30]) === split;
     const read = device.partitions === split;
     const other = outcome(() => device.partition([16]));
     const inPartition = Stream.create({ partition: split[1] });
     const whole = Stream.create();
     const pool = new StreamPool({ partition: split[2], size: 2 });
     const leased = await pool.run(async (stream) => stream.partition);
     const unread = Stream.create({ partition: split[0] });
     unread.destroy(); // its facts come from the destroy
     const streams = [inPartition.partition === split[1], whole.partition ?? null, pool.getStream(1).partition === split[2], leased === split[2], unread.partition === split[0]];
     inPartition.destroy();
     whole.destroy();
     pool.destroy();
     console.log(JSON.stringify({ before, split: shape(split), again, read, other, frozen: Object.isFrozen(split), streams }));`,
  );
  assert.deepEqual(result.streams, [true, null, true, true, true]);
  // The driver was asked by the read before the split and twice by the split (its limits, then the split itself);
  // the repeated partition() calls, the later reads and the streams' getters were answered without it.
  assert.equal(calls.cuDeviceGetDevResource, 3, JSON.stringify(calls));
  assert.equal(result.before, null);
  assert.deepEqual(result.split, [[0, 8, 7], [1, 32, 30], [2, 92, null]]);
  assert.equal(result.again, true);
  assert.equal(result.read, true);
  assert.equal(result.frozen, true);
  assert.equal(result.other.code, 'ERR_INVALID_STATE');
  assert.equal(result.other.message, 'Invalid state: device 0 was split already into partitions of [8, 32, 92] multiprocessors (asked [7, 30]), and "multiprocessors" asks for [16]; a device is split once per process so that partitions never overlap. Use device.partitions.');
});

test('bad counts are refused before anything is split, naming the rounding; a rest below the smallest partition is none', needsCompiler, async () => {
  const result = await simulatedJson<{ refused: { name: string; code: string; message: string }[]; whole: unknown; constructed: { code: string } }>(
    `${setup}
     const device = Device.get(0);
     const refused = [
       outcome(() => device.partition([])),
       outcome(() => device.partition(16)),
       outcome(() => device.partition([0])),
       outcome(() => device.partition([1.5])),
       outcome(() => device.partition([64, 65])),
       outcome(() => device.partition([133])),
     ];
     const whole = shape(device.partition([64, 64]));
     const constructed = outcome(() => new DevicePartition(Symbol(), device, 0, 8, 8));
     console.log(JSON.stringify({ refused, whole, constructed }));`,
  );
  assert.deepEqual(result.refused.map((r) => r.code), ['ERR_INVALID_ARG_TYPE', 'ERR_INVALID_ARG_TYPE', 'ERR_OUT_OF_RANGE', 'ERR_OUT_OF_RANGE', 'ERR_OUT_OF_RANGE', 'ERR_OUT_OF_RANGE']);
  assert.ok(result.refused[4]!.message.startsWith('"multiprocessors" must be partitions that fit the device\'s 132 multiprocessors once each is rounded up to at least 8 and a multiple of 8 ([64, 65] rounds up to [64, 72], 136 in all)'), result.refused[4]!.message);
  assert.match(result.refused[5]!.message, /^"multiprocessors\[0\]" must be an integer from 1 to 132; received 133/);
  assert.deepEqual(result.whole, [[0, 64, 64], [1, 64, 64]]); // 4 left: fewer than the smallest partition, 8
  assert.equal(result.constructed.code, 'ERR_ILLEGAL_CONSTRUCTOR');
});

test('pools and streams in a partition lease, launch, copy, record events and serve workers like any pool', needsCompiler, async () => {
  const result = await simulatedJson<{ pool: unknown; filled: number[]; refused: { code: string; message: string }[]; worker: unknown; live: unknown }>(
    `${setup}
     import { Worker } from 'node:worker_threads';
     import { Module } from 'cuda-stream-pool';
     const device = Device.get(0);
     const [small, rest] = device.partition([16]);
     const module = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
     const fill = module.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
     const pool = new StreamPool({ partition: small, size: 4 });
     const filled = await Promise.all([1, 2, 3, 4, 5, 6].map((value) => pool.run(async (stream) => {
       const words = DeviceBuffer.alloc(1024 * 4, { stream });
       fill.launch({ grid: 4, block: 256, stream }, words, value, 1024);
       const done = stream.recordEvent();
       const other = Stream.create({ partition: rest });
       other.waitEvent(done);
       const out = await words.toArray(Uint32Array, { stream: other });
       other.destroy();
       done.destroy();
       words.free();
       return out.every((w) => w === value) ? value : -value;
     })));
     const refused = [
       outcome(() => new StreamPool({ partition: small, nonBlocking: false })),
       outcome(() => Stream.create({ partition: {} })),
       outcome(() => Stream.create({ partition: small, device: 0 }) && 'same device accepted'),
     ];
     const worker = await new Promise((resolve, reject) => {
       const w = new Worker(\`
         import { parentPort, workerData } from 'node:worker_threads';
         import { Device, StreamPool } from 'cuda-stream-pool';
         const pool = StreamPool.attach(workerData);
         const partitions = Device.get(0).partitions.map((p) => [p.index, p.multiprocessorCount]);
         const value = await pool.run(async (stream) => { await stream.synchronize(); return stream.id > 0n; });
         parentPort.postMessage({ partition: pool.partition.index, partitions, value });
         pool.destroy();\`, { eval: true, workerData: pool.share() });
       w.once('message', resolve);
       w.once('error', reject);
     });
     pool.destroy();
     module.unload();
     console.log(JSON.stringify({ pool: [pool.partition === small, pool.device === device], filled, refused, worker, live: cuda.liveObjects().streams }));`,
    { env: { SIMULATED_DRIVER_DEVICES: '1' } },
  );
  assert.deepEqual(result.pool, [true, true]);
  assert.deepEqual(result.filled, [1, 2, 3, 4, 5, 6]);
  assert.equal(result.refused[0]!.code, 'ERR_INVALID_ARG_VALUE');
  assert.match(result.refused[0]!.message, /^"options.nonBlocking" must not be false with "options.partition": the streams of a partition are non-blocking/);
  assert.equal(result.refused[1]!.code, 'ERR_INVALID_ARG_TYPE');
  assert.match(result.refused[1]!.message, /^"options.partition" must be a DevicePartition \(from device.partition\(\)\)/);
  assert.equal(result.refused[2], 'same device accepted');
  assert.deepEqual(result.worker, { partition: 0, partitions: [[0, 16], [1, 116]], value: true });
});

test('with deferred submission, work on a partition pool is recorded and issued like any other', needsCompiler, async () => {
  const result = await simulatedJson<{ sums: number[] }>(
    `${setup}
     const [latency] = Device.get(0).partition([8]);
     const pool = new StreamPool({ partition: latency, size: 2 });
     const sums = await Promise.all([3, 5, 7].map((value) => pool.run(async (stream) => {
       const buffer = DeviceBuffer.alloc(4096, { stream });
       stream.fill(buffer, value);
       const out = await buffer.toArray(Uint8Array, { stream });
       buffer.free();
       return out.reduce((a, b) => a + b, 0);
     })));
     pool.destroy();
     console.log(JSON.stringify({ sums }));`,
    { env: { CUDA_STREAM_POOL_SUBMISSION: 'deferred' }, operationDelayUs: 100 },
  );
  assert.deepEqual(result.sums, [3 * 4096, 5 * 4096, 7 * 4096]);
});

test('each partition reports its work-queue configuration where the driver has one (CUDA 13.1), and none before or when the driver will not say', needsCompiler, async () => {
  const queues = (env: Record<string, string>, fail?: string) =>
    simulatedJson<{ queues: unknown[]; frozen: boolean; worker: unknown }>(
      `${setup}
       import { Worker } from 'node:worker_threads';
       const split = Device.get(0).partition([16, 16]);
       const queues = split.map((p) => p.workQueues ?? null);
       const worker = await new Promise((resolve, reject) => {
         const w = new Worker(\`
           import { parentPort } from 'node:worker_threads';
           import { Device } from 'cuda-stream-pool';
           parentPort.postMessage(Device.get(0).partitions.map((p) => p.workQueues ?? null));\`, { eval: true });
         w.once('message', resolve);
         w.once('error', reject);
       });
       console.log(JSON.stringify({ queues, frozen: split[0].workQueues === undefined || Object.isFrozen(split[0].workQueues), worker }));`,
      { env, fail },
    );
  const shared = { concurrencyLimit: 8, balanced: false };
  const newer = await queues({ SIMULATED_DRIVER_VERSION: '13010' });
  assert.deepEqual(newer.queues, [shared, shared, shared]);
  assert.deepEqual(newer.worker, newer.queues, 'another thread reads the same configuration');
  assert.equal(newer.frozen, true);
  const older = await queues({ SIMULATED_DRIVER_VERSION: '13000' });
  assert.deepEqual(older.queues, [null, null, null]);
  // cuGreenCtxGetDevResource asks for the multiprocessors, then the work queues, of each partition in turn: the
  // fourth call is partition 1's work queues. The split stands; that partition reports none.
  const refused = await queues({ SIMULATED_DRIVER_VERSION: '13010' }, 'cuGreenCtxGetDevResource:4=CUDA_ERROR_NOT_SUPPORTED');
  assert.deepEqual(refused.queues, [shared, null, shared]);
});

test('a driver without green contexts refuses partitions with an UnsupportedError; pools and streams go on', needsCompiler, async () => {
  const result = await simulatedJson<{ refused: { name: string; code: string; message: string }; partitions: unknown; pool: number }>(
    `${setup}
     const device = Device.get(0);
     const refused = outcome(() => device.partition([16]));
     const pool = new StreamPool({ size: 2 });
     const size = pool.size;
     pool.destroy();
     console.log(JSON.stringify({ refused, partitions: device.partitions ?? null, pool: size }));`,
    { env: { SIMULATED_DRIVER_VERSION: '12040' } },
  );
  assert.equal(result.refused.name, 'UnsupportedError');
  assert.equal(result.refused.code, 'ERR_CUDA_UNSUPPORTED');
  assert.equal(result.refused.message, 'partitions is not supported on device 0: the CUDA driver has no green contexts with streams (they need CUDA 12.5 or later).');
  assert.equal(result.partitions, null);
  assert.equal(result.pool, 2);
});

for (const [entry, at] of [['cuGreenCtxCreate', 2], ['cuDevSmResourceSplitByCount', 1], ['cuGreenCtxStreamCreate', 3]] as const) {
  test(`a failed ${entry} is a CudaError naming it; nothing is split or left behind, and a retry succeeds`, needsCompiler, async () => {
    const result = await simulatedJson<{ error: { name: string; code: string; message: string }; before: unknown; after: unknown; retried: unknown }>(
      `${setup}
       const device = Device.get(0);
       const before = cuda.liveObjects();
       const attempt = () => { const [p] = device.partition([16]); const pool = new StreamPool({ partition: p, size: 4 }); const ids = pool.size; pool.destroy(); return ids; };
       const error = outcome(attempt);
       const after = cuda.liveObjects();
       const retried = outcome(attempt);
       console.log(JSON.stringify({ error, before, after, retried }));`,
      { fail: `${entry}:${at}=CUDA_ERROR_OUT_OF_MEMORY` },
    );
    assert.equal(result.error.name, 'CudaError');
    assert.equal(result.error.code, 'CUDA_ERROR_OUT_OF_MEMORY');
    assert.match(result.error.message, new RegExp(`^CUDA_ERROR_OUT_OF_MEMORY: ${entry} failed on device 0`));
    assert.deepEqual(result.after, result.before);
    assert.equal(result.retried, 4);
  });
}

for (const submission of ['direct', 'deferred'] as const) {
  test(`with ${submission} submission, a cooperative launch on a partition may have only the blocks the partition holds`, needsCompiler, async () => {
    const result = await simulatedJson<{ fits: string; refused: { code: string; message: string } }>(
      `${setup}
       import { Module } from 'cuda-stream-pool';
       const [small] = Device.get(0).partition([16]);
       const module = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
       const fill = module.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
       const stream = Stream.create({ partition: small });
       const words = DeviceBuffer.alloc(129 * 256 * 4, { stream });
       // 16 multiprocessors hold 8 blocks of 256 threads each: 128.
       const fits = outcome(() => fill.launch({ grid: 128, block: 256, stream, cooperative: true }, words, 1, 128 * 256));
       let refused = outcome(() => fill.launch({ grid: 129, block: 256, stream, cooperative: true }, words, 1, 129 * 256));
       await stream.synchronize().catch((e) => { if (refused === 'done') refused = { code: e.code, message: e.message }; });
       console.log(JSON.stringify({ fits, refused }));`,
      { env: { CUDA_STREAM_POOL_SUBMISSION: submission } },
    );
    assert.equal(result.fits, 'done');
    assert.equal(result.refused.code, 'CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE');
    assert.match(result.refused.message, /room for at most 128 blocks at once/);
  });
}

test('bench micro\'s partition group skips on the simulated driver, whose CPU kernels would take hours for its batch load, and says so', needsCompiler, async () => {
  const reason = await simulatedJson<string>(
    `import { partitionSkipReason } from '#bench/partition-latency.js';
     console.log(JSON.stringify(partitionSkipReason(0)));`,
  );
  assert.match(reason, /^Simulated GPU 0 runs kernels on the CPU: the batch load .* would take hours$/);
});
