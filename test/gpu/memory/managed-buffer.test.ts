// ManagedBuffer: managed memory seen by the host through views and by kernels through its address; prefetch, advice,
// stream-ordered copies with device buffers, and a free that waits for the device's queued work.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cuda, DestroyedError, Device, DeviceBuffer, ManagedBuffer, Stream } from 'cuda-stream-pool';
import { runChild } from '../../support/child.js';
import { gpu, MS, testKernels } from '../../support/gpu.js';

function pattern(length: number, seed: number): Uint8Array {
  return Uint8Array.from({ length }, (_, i) => (i * 13 + seed) & 0xff);
}

// ---------------------------------------------------------------------------------------------------------------
// Argument checks that need no GPU.

test('ManagedBuffer.alloc() checks byteLength and options before touching the driver', () => {
  assert.throws(() => ManagedBuffer.alloc(0), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /^"byteLength" must be an integer from 1 to 4294967295; received 0/ });
  assert.throws(() => ManagedBuffer.alloc(2 ** 32), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => ManagedBuffer.alloc(16, { devic: 0 } as never), { code: 'ERR_INVALID_ARG_VALUE', message: /did you mean "device"/ });
});

// ---------------------------------------------------------------------------------------------------------------
// GPU.

test('the host writes a ManagedBuffer, a kernel rewrites half of it, and the host reads the result', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  const n = 1 << 16;
  using managed = ManagedBuffer.alloc(4 * n);
  assert.equal(managed.byteLength, 4 * n);
  assert.equal(managed.device, Device.get(0));
  assert.equal(managed.bytes.byteLength, 4 * n);
  const values = managed.view(Uint32Array);
  values.fill(5);
  fillU32.launch({ grid: n / 2 / 256, block: 256, stream }, managed, 9, n / 2);
  await stream.synchronize();
  assert.equal(values.subarray(0, n / 2).every((v) => v === 9), true);
  assert.equal(values.subarray(n / 2).every((v) => v === 5), true);
  assert.equal(managed.view(DataView, 4 * n - 4).getUint32(0, true), 5);
});

test('prefetch() to the device and back to the host keeps the contents', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  const n = 1 << 20;
  using managed = ManagedBuffer.alloc(4 * n);
  managed.view(Uint32Array).fill(1);
  managed.prefetch(managed.device, stream);
  fillU32.launch({ grid: n / 256, block: 256, stream }, managed, 3, n / 4);
  managed.prefetch('cpu', stream);
  await stream.synchronize();
  const values = managed.view(Uint32Array);
  assert.equal(values.subarray(0, n / 4).every((v) => v === 3), true);
  assert.equal(values.subarray(n / 4).every((v) => v === 1), true);
  managed.prefetch(0); // on currentStream()
  await Device.get(0).synchronize();
  assert.throws(() => managed.prefetch('gpu' as never, stream), { code: 'ERR_INVALID_ARG_TYPE', message: /^"target" must be a Device or a device ordinal/ });
  assert.throws(() => managed.prefetch(Device.count(), stream), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => managed.prefetch(0, {} as never), { code: 'ERR_INVALID_ARG_TYPE', message: /^"stream" must be a Stream/ });
});

test('advise() takes each CUmem_advise hint over a range and keeps the contents; bad advice is refused', gpu, async () => {
  using managed = ManagedBuffer.alloc(1 << 20);
  managed.bytes.set(pattern(1 << 20, 4));
  managed.advise('setReadMostly');
  managed.advise('unsetReadMostly');
  managed.advise('setPreferredLocation', { device: 'cpu', byteOffset: 0, byteLength: 1 << 19 });
  managed.advise('unsetPreferredLocation', { device: 'cpu', byteOffset: 0, byteLength: 1 << 19 });
  managed.advise('setAccessedBy', { device: managed.device });
  managed.advise('unsetAccessedBy', { device: 0 });
  assert.deepEqual(managed.bytes, pattern(1 << 20, 4));
  assert.throws(() => managed.advise('readMostly' as never), { code: 'ERR_INVALID_ARG_VALUE', message: /^"advice" must be one of 'setReadMostly', .*; received "readMostly"\./ });
  assert.throws(() => managed.advise('setReadMostly', { byteOffset: 1 << 21 }), { code: 'ERR_OUT_OF_RANGE', message: /^"options.byteOffset"/ });
  assert.throws(() => managed.advise('setReadMostly', { byteOffset: 16, byteLength: 1 << 20 }), { code: 'ERR_OUT_OF_RANGE', message: /^"options.byteLength" must be an integer from 1 to 1048560/ });
  // Empty ranges: the driver would refuse them with a bare CUDA_ERROR_INVALID_VALUE.
  assert.throws(() => managed.advise('setReadMostly', { byteOffset: 1 << 20 }), { code: 'ERR_OUT_OF_RANGE', message: /^"options.byteOffset" must be an integer from 0 to 1048575/ });
  assert.throws(() => managed.advise('setReadMostly', { byteLength: 0 }), { code: 'ERR_OUT_OF_RANGE', message: /^"options.byteLength" must be an integer from 1 to 1048576/ });
  managed.advise('setReadMostly', { byteOffset: (1 << 20) - 1 });
});

test('stream.copy() moves bytes between a ManagedBuffer and DeviceBuffers or another ManagedBuffer', gpu, async () => {
  using stream = Stream.create();
  using source = DeviceBuffer.from(pattern(4096, 1), { stream });
  using managed = ManagedBuffer.alloc(4096);
  using other = ManagedBuffer.alloc(1024);
  stream.copy(managed, source);
  stream.copy(other, managed, { srcOffset: 1024, byteLength: 1024 });
  using target = DeviceBuffer.alloc(4096, { stream });
  stream.fill(target, 0);
  stream.copy(target, other, { dstOffset: 100 });
  await stream.synchronize();
  assert.deepEqual(managed.bytes, pattern(4096, 1));
  assert.deepEqual(other.bytes, pattern(4096, 1).subarray(1024, 2048));
  const expected = new Uint8Array(4096);
  expected.set(pattern(4096, 1).subarray(1024, 2048), 100);
  assert.deepEqual(await target.toArray(Uint8Array, { stream }), expected);
  assert.throws(() => stream.copy(managed, new Uint8Array(16)), { code: 'ERR_INVALID_ARG_VALUE', message: /^"src" is host memory and the other operand a ManagedBuffer/ });
  assert.throws(() => stream.copy(new Uint8Array(16), managed), { code: 'ERR_INVALID_ARG_VALUE', message: /^"dst" is host memory/ });
  assert.throws(() => stream.copy(managed, managed), { code: 'ERR_INVALID_ARG_VALUE', message: /overlaps "dst"/ });
});

test('free() detaches the views at once and every later use is a DestroyedError; free is idempotent', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  const managed = ManagedBuffer.alloc(64);
  const view = managed.view(Float32Array);
  managed.free();
  managed.free();
  assert.equal(managed.freed, true);
  assert.equal(view.length, 0);
  assert.equal(managed.bytes.byteLength, 0);
  assert.throws(() => managed.view(Uint8Array), DestroyedError);
  assert.throws(() => managed.prefetch('cpu', stream), DestroyedError);
  assert.throws(() => managed.advise('setReadMostly'), DestroyedError);
  assert.throws(() => fillU32.launch({ grid: 1, block: 1, stream }, managed, 1, 1), (e) => e instanceof DestroyedError && e.resource === 'ManagedBuffer');
  using target = DeviceBuffer.alloc(64, { stream });
  assert.throws(() => stream.copy(target, managed), DestroyedError);
  // Frees wait for the device on another thread, in order: once this dispose resolves, every earlier free (the 64
  // bytes above, and earlier tests' buffers) is released too, so `before` counts only live buffers.
  await ManagedBuffer.alloc(1)[Symbol.asyncDispose]();
  const before = cuda.liveObjects().managedBytes;
  const disposed = ManagedBuffer.alloc(4096);
  assert.equal(cuda.liveObjects().managedBytes, before + 4096);
  await disposed[Symbol.asyncDispose]();
  assert.equal(disposed.freed, true);
  assert.equal(cuda.liveObjects().managedBytes, before, 'the memory was released when the dispose resolved');
});

test('a freed ManagedBuffer counts in managedBytes until the device\'s queued work is done', gpu, async () => {
  const { spin } = await testKernels();
  using stream = Stream.create();
  const before = cuda.liveObjects().managedBytes;
  const managed = ManagedBuffer.alloc(1 << 20);
  spin.launch({ grid: 1, block: 1, stream }, 300n * MS, 0n);
  managed.free();
  assert.equal(cuda.liveObjects().managedBytes, before + (1 << 20), 'held while the kernel runs');
  await Device.get(0).synchronize();
  assert.equal(cuda.liveObjects().managedBytes, before);
});

test('a ManagedBuffer freed while a queued kernel still writes it is released only after the kernel', gpu, async () => {
  const result = await runChild(`
    import { cuda, Device, ManagedBuffer, Stream } from 'cuda-stream-pool';
    import { testKernels, MS } from './dist/test/support/gpu.js';
    const { spin, fillU32 } = await testKernels();
    const stream = Stream.create();
    const n = 1 << 20;
    const managed = ManagedBuffer.alloc(4 * n);
    spin.launch({ grid: 1, block: 1, stream }, 300n * MS, 0n);
    fillU32.launch({ grid: n / 256, block: 256, stream }, managed, 7, n);
    managed.free(); // returns at once; cuMemFree waits for the device
    let error = 'none';
    try { await stream.synchronize(); await Device.get(0).synchronize(); } catch (e) { error = e.code; }
    stream.destroy();
    console.log(JSON.stringify({ error, healthy: Device.get(0).healthy, managedBytes: cuda.liveObjects().managedBytes }));
  `);
  assert.equal(result.signal, null);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { error: 'none', healthy: true, managedBytes: 0 });
});

test('a worker that exits with a ManagedBuffer freed under queued work, and one forgotten, ends cleanly', gpu, async () => {
  const result = await runChild(`
    import { Worker } from 'node:worker_threads';
    const worker = new Worker(\`(async () => {
      const { ManagedBuffer, Stream } = await import('cuda-stream-pool');
      const { testKernels, MS } = await import('./dist/test/support/gpu.js');
      const { spin, fillU32 } = await testKernels();
      const stream = Stream.create();
      const freed = ManagedBuffer.alloc(1 << 20);
      const forgotten = ManagedBuffer.alloc(1 << 20);
      spin.launch({ grid: 1, block: 1, stream }, 200n * MS, 0n);
      fillU32.launch({ grid: 1024, block: 256, stream }, freed, 1, 1 << 18);
      fillU32.launch({ grid: 1024, block: 256, stream }, forgotten, 2, 1 << 18);
      freed.free();
      process.exit(0);
    })();\`, { eval: true });
    const code = await new Promise((resolve) => worker.on('exit', resolve));
    const { Device } = await import('cuda-stream-pool');
    await Device.get(0).synchronize();
    const { cuda } = await import('cuda-stream-pool');
    // The worker's synchronizer thread finishes its last free on its own after the worker ended: allow it 5 s.
    for (let i = 0; i < 100 && cuda.liveObjects().managedBytes !== 0; i++) await new Promise((r) => setTimeout(r, 50));
    console.log(JSON.stringify({ code, healthy: Device.get(0).healthy, managedBytes: cuda.liveObjects().managedBytes }));
  `);
  assert.equal(result.signal, null);
  assert.equal(result.code, 0, result.stderr);
  // The worker's buffers, the freed one and the forgotten one, were both released when it ended.
  assert.deepEqual(JSON.parse(result.stdout), { code: 0, healthy: true, managedBytes: 0 });
});
