import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cuda, Device, DeviceBuffer, Program, Stream } from 'cuda-stream-pool';
import { runChild } from '../../support/child.js';
import { gpu, MS, testKernels } from '../../support/gpu.js';

test('Device.count() is a non-negative integer and matches cuda.available', () => {
  const count = Device.count();
  assert.ok(Number.isInteger(count) && count >= 0);
  assert.equal(count > 0, cuda.available);
});

test('Device.get() rejects non-integer ordinals with ERR_INVALID_ARG_TYPE', () => {
  assert.throws(() => Device.get('0' as unknown as number), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
});

test('Device.get() returns the same object on every call and reports real properties', gpu, () => {
  const device = Device.get(0);
  assert.equal(Device.get(0), device);
  assert.equal(device.ordinal, 0);
  assert.match(device.name, /\S/);
  assert.ok(device.computeCapability.major >= 5);
  assert.ok(device.multiprocessorCount > 0);
  assert.ok(device.totalMemoryBytes > 2 ** 30);
  assert.ok(device.asyncEngineCount >= 1);
  assert.ok(device.streamPriorityRange.greatest <= device.streamPriorityRange.least);
  assert.equal(device.healthy, true);
  assert.equal(typeof cuda.driverVersion, 'number');
  assert.ok(cuda.driverVersion! >= 12000);
});

test('Device.get() with an ordinal past the visible devices is ERR_OUT_OF_RANGE naming the range', gpu, async () => {
  assert.throws(() => Device.get(Device.count()), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: new RegExp(`"ordinal" must be an integer from 0 to ${Device.count() - 1}.*received ${Device.count()}`),
  });
  // Given as an option, the ordinal is named as that option.
  assert.throws(() => Stream.create({ device: Device.count() }), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: `"options.device" must be an integer from 0 to ${Device.count() - 1} (the visible devices); received ${Device.count()} (number).`,
  });
  // Program.compile() checks the device before it looks for the compiler: the caller's error, with NVRTC or without.
  await assert.rejects(Program.compile('extern "C" __global__ void noop() {}', { device: Device.count() }), {
    name: 'RangeError',
    message: new RegExp(`^"options.device" must be an integer from 0 to ${Device.count() - 1}`),
  });
});

test('Device.get() rejects negative, fractional and NaN ordinals with ERR_OUT_OF_RANGE, GPU or not', () => {
  for (const ordinal of [-1, 1.5, NaN, Infinity])
    assert.throws(() => Device.get(ordinal), {
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: new RegExp(`"ordinal" must be a non-negative integer \\(a device ordinal\\); received ${ordinal}`),
    });
});

test('Device, MemoryPool, Kernel and StreamLease have no public constructor', async () => {
  const { MemoryPool, Kernel, StreamLease } = await import('cuda-stream-pool');
  for (const [Class, factory] of [[Device, 'Device.get'], [MemoryPool, 'device.memoryPool'], [Kernel, 'module.getFunction'], [StreamLease, 'pool.acquire']] as const)
    assert.throws(() => new (Class as unknown as new () => unknown)(), {
      name: 'TypeError',
      code: 'ERR_ILLEGAL_CONSTRUCTOR',
      message: new RegExp(`^${Class.name} has no public constructor; use ${factory.replace('.', '\\.')}`),
    });
});

test('cuda.driverVersionString is the driver version as major.minor text', gpu, () => {
  const version = cuda.driverVersion!;
  assert.equal(cuda.driverVersionString, `${Math.floor(version / 1000)}.${(version % 1000) / 10}`);
  assert.match(cuda.driverVersionString!, /^\d+\.\d+$/);
});

test('device.synchronize() resolves after the work of every stream, and the event loop runs meanwhile', gpu, async () => {
  const { spin } = await testKernels();
  using a = Stream.create();
  using b = Stream.create();
  spin.launch({ grid: 1, block: 1, stream: a }, 300n * MS, 0n);
  spin.launch({ grid: 1, block: 1, stream: b }, 200n * MS, 0n);
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  try {
    await Device.get(0).synchronize();
  } finally {
    clearInterval(timer);
  }
  assert.equal(a.query(), true);
  assert.equal(b.query(), true);
  // About 30 ticks fit in 300 ms; a blocked event loop would give none.
  assert.ok(ticks >= 5, `${ticks} timer ticks while waiting`);
});

test('many device.synchronize() calls at once all resolve', gpu, async () => {
  const { spin } = await testKernels();
  using stream = Stream.create();
  spin.launch({ grid: 1, block: 1, stream }, 50n * MS, 0n);
  const device = Device.get(0);
  await Promise.all(Array.from({ length: 100 }, () => device.synchronize()));
  assert.equal(stream.query(), true);
});

test('device.synchronize() keeps no libuv pool thread: with one pool thread, crypto work finishes during the wait', gpu, async () => {
  const result = await runChild(
    `
    import { pbkdf2 } from 'node:crypto';
    import { promisify } from 'node:util';
    import { Device, Stream } from 'cuda-stream-pool';
    import { testKernels, MS } from './dist/test/support/gpu.js';
    const { spin } = await testKernels();
    const stream = Stream.create();
    spin.launch({ grid: 1, block: 1, stream }, 2000n * MS, 0n);
    let synchronized = false;
    const wait = Device.get(0).synchronize().then(() => { synchronized = true; });
    await promisify(pbkdf2)('secret', 'salt', 1, 32, 'sha256'); // runs on the only libuv pool thread
    const before = synchronized;
    await wait;
    stream.destroy();
    console.log(JSON.stringify({ cryptoFinishedFirst: !before, synchronized }));
    `,
    { UV_THREADPOOL_SIZE: '1' },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { cryptoFinishedFirst: true, synchronized: true });
});

test('device.synchronize() honours an abort signal, rejecting with its reason while the work goes on', gpu, async () => {
  const { spin } = await testKernels();
  using stream = Stream.create();
  spin.launch({ grid: 1, block: 1, stream }, 300n * MS, 0n);
  const controller = new AbortController();
  const wait = Device.get(0).synchronize({ signal: controller.signal });
  controller.abort(new Error('stop waiting'));
  await assert.rejects(wait, { message: 'stop waiting' });
  assert.equal(stream.query(), false, 'the kernel still runs');
  await assert.rejects(Device.get(0).synchronize({ signal: AbortSignal.abort('already') }), (e) => e === 'already');
  assert.throws(() => Device.get(0).synchronize({ signal: 'x' } as never), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => Device.get(0).synchronize({ signl: undefined } as never), { code: 'ERR_INVALID_ARG_VALUE', message: /did you mean "signal"/ });
  await Device.get(0).synchronize();
});

test('device.synchronizeSync() returns once the work of every stream is done', gpu, async () => {
  const { spin } = await testKernels();
  using stream = Stream.create();
  spin.launch({ grid: 1, block: 1, stream }, 100n * MS, 0n);
  assert.equal(stream.query(), false);
  Device.get(0).synchronizeSync();
  assert.equal(stream.query(), true);
});

test('after a sticky fault, device.synchronize() rejects with the CudaError and synchronizeSync() throws it', gpu, async () => {
  const result = await runChild(`
    import { Device, Stream, CudaError } from 'cuda-stream-pool';
    import { testKernels } from './dist/test/support/gpu.js';
    const { writeInvalid } = await testKernels();
    const stream = Stream.create();
    writeInvalid.launch({ grid: 1, block: 1, stream }, 0x10n);
    const out = {};
    try { await Device.get(0).synchronize(); out.async = 'resolved'; } catch (e) { out.async = e instanceof CudaError ? [e.code, e.call, e.sticky] : String(e); }
    try { Device.get(0).synchronizeSync(); out.sync = 'returned'; } catch (e) { out.sync = e instanceof CudaError ? e.code : String(e); }
    out.healthy = Device.get(0).healthy;
    console.log(JSON.stringify(out));
  `);
  assert.equal(result.signal, null);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), {
    async: ['CUDA_ERROR_ILLEGAL_ADDRESS', 'cuCtxSynchronize', true],
    sync: 'CUDA_ERROR_ILLEGAL_ADDRESS',
    healthy: false,
  });
});

test('a worker exits cleanly while its device.synchronize() is pending, and the process goes on', gpu, async () => {
  const result = await runChild(`
    import { Worker } from 'node:worker_threads';
    // A CommonJS eval worker (import() resolves from the working directory, the repository root).
    const worker = new Worker(\`(async () => {
      const { Device, Stream } = await import('cuda-stream-pool');
      const { testKernels, MS } = await import('./dist/test/support/gpu.js');
      const { spin } = await testKernels();
      const stream = Stream.create();
      spin.launch({ grid: 1, block: 1, stream }, 500n * MS, 0n);
      Device.get(0).synchronize();
      process.exit(0);
    })();\`, { eval: true });
    const code = await new Promise((resolve) => worker.on('exit', resolve));
    const { Device } = await import('cuda-stream-pool');
    await Device.get(0).synchronize();
    console.log(JSON.stringify({ code }));
  `);
  assert.equal(result.signal, null);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { code: 0 });
});

test('device.memoryInfo() reports the total memory and free bytes that drop by an allocation', gpu, async () => {
  const device = Device.get(0);
  device.synchronizeSync();
  device.memoryPool.trim(0);
  const before = device.memoryInfo();
  assert.equal(before.totalBytes, device.totalMemoryBytes);
  assert.ok(before.freeBytes > 0 && before.freeBytes <= before.totalBytes);
  const bytes = 1024 * 1024 * 1024;
  using stream = Stream.create();
  const buffer = DeviceBuffer.alloc(bytes, { stream });
  await stream.synchronize();
  const during = device.memoryInfo();
  assert.ok(during.freeBytes <= before.freeBytes - bytes, `free ${before.freeBytes} -> ${during.freeBytes} after allocating ${bytes}`);
  buffer.free();
  stream.synchronizeSync(); // trim() releases only frees that a synchronizing call observed
  device.memoryPool.trim(0);
  assert.ok(device.memoryInfo().freeBytes > during.freeBytes);
});
