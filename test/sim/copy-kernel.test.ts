// The library's copy kernel on the simulated driver: stream.copyBatch() moves 2 to 128 pieces of at most 64 KiB
// between device and pinned memory in one launch, byte for byte, on any driver version and on the legacy default
// stream; other batches go to the driver; the pieces' memory outlives the queued kernel; a kernel that cannot be
// loaded leaves batches to the driver (tried again unless the driver can never load it), so does a launch the driver
// refuses, and a sticky fault at the launch is a CudaError.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collectGarbage, needsCompiler, simulatedJson, simulatedJsonWithCalls } from '../support/simulated-driver.js';

const setup = `
  import { cuda, DeviceBuffer, HostRegistration, PinnedBuffer, Stream } from 'cuda-stream-pool';
  const pattern = (n, seed) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 255);
  const same = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);
  const outcome = (f) => { try { f(); return 'queued'; } catch (e) { return { name: e.name, code: e.code, message: e.message }; } };`;

/** One batch of every direction the kernel takes, at odd offsets and sizes, up to the largest piece, queued while
 * the driver delays each operation; whether each piece landed, with the bytes beside each left alone. */
const everyDirection = (streamExpression: string) => `${setup}
  const stream = ${streamExpression};
  const device = DeviceBuffer.alloc(1 << 18, { stream });
  const other = DeviceBuffer.alloc(1 << 18, { stream });
  const pinned = PinnedBuffer.alloc(1 << 17);
  const into = PinnedBuffer.alloc(1 << 17);
  pinned.bytes.set(pattern(1 << 17, 1));
  stream.copy(other, pattern(1 << 18, 2));
  stream.fill(device, 0);
  into.bytes.fill(0);
  await stream.synchronize();
  stream.copyBatch([
    { dst: device, src: pinned, byteLength: 4096 },                                        // pinned to device
    { dst: device, src: pinned, dstOffset: 8195, srcOffset: 4099, byteLength: 1001 },      // misaligned
    { dst: device, src: pinned, dstOffset: 65536, srcOffset: 65536, byteLength: 65536 },   // the largest piece
    { dst: into, src: other, dstOffset: 16, srcOffset: 32, byteLength: 16 },               // device to pinned
    { dst: into, src: other, dstOffset: 100, srcOffset: 300, byteLength: 7 },              // a few bytes
    { dst: device, src: other, dstOffset: 200000, srcOffset: 1000, byteLength: 20000 },    // device to device
  ]);
  pinned.free();
  const d = await device.toArray(Uint8Array, { stream });
  const landed = [
    same(d.subarray(0, 4096), pattern(1 << 17, 1).subarray(0, 4096)),
    same(d.subarray(8195, 9196), pattern(1 << 17, 1).subarray(4099, 5100)),
    d[8194] === 0 && d[9196] === 0,
    same(d.subarray(65536, 131072), pattern(1 << 17, 1).subarray(65536, 131072)),
    same(into.bytes.subarray(16, 32), pattern(1 << 18, 2).subarray(32, 48)) && into.bytes[15] === 0 && into.bytes[32] === 0,
    same(into.bytes.subarray(100, 107), pattern(1 << 18, 2).subarray(300, 307)) && into.bytes[107] === 0,
    same(d.subarray(200000, 220000), pattern(1 << 18, 2).subarray(1000, 21000)),
  ];
  device.free();
  other.free();
  into.free();
  await stream.synchronize();
  const { deviceBytes, pinnedBytes, modules } = cuda.liveObjects();
  console.log(JSON.stringify({ landed, live: [deviceBytes, pinnedBytes, modules] }));`;

for (const [name, streamExpression, version] of [
  ['a created stream, CUDA 13.0', 'Stream.create()', '13000'],
  ['a created stream, a CUDA 12.6 driver without cuMemcpyBatchAsync', 'Stream.create()', '12060'],
  ['the legacy default stream, which cuMemcpyBatchAsync refuses', 'Stream.legacy()', '13000'],
] as const) {
  test(`small pieces between device and pinned memory land byte for byte through one launch of the copy kernel: ${name}`, needsCompiler, async () => {
    const { result, calls } = await simulatedJsonWithCalls<{ landed: boolean[]; live: number[] }>(everyDirection(streamExpression), {
      operationDelayUs: 300,
      env: { SIMULATED_DRIVER_VERSION: version },
    });
    assert.deepEqual(result.landed, [true, true, true, true, true, true, true]);
    assert.deepEqual(result.live, [0, 0, 0], "nothing left, and the library's own module is not one of the user's");
    assert.equal(calls.cuLaunchKernel, 1, JSON.stringify(calls));
    assert.equal(calls.cuModuleLoadDataEx, 1, JSON.stringify(calls));
    assert.equal(calls.cuMemcpyBatchAsync ?? 0, 0, JSON.stringify(calls));
  });
}

test('the pinned memory of a queued kernel copy is not handed out again, once its buffer is freed and collected, before the kernel ran', needsCompiler, async () => {
  const result = await simulatedJson<{ landed: boolean; collected: boolean; queuedMs: number; modules: number }>(
    `${setup}
     ${collectGarbage}
     import { readFileSync } from 'node:fs';
     import { Module } from 'cuda-stream-pool';
     const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
     const stream = Stream.create();
     const device = DeviceBuffer.alloc(1 << 16, { stream });
     const stamps = DeviceBuffer.alloc(16, { stream });
     await stream.synchronize();
     // The batch waits behind a 300 ms kernel while its source is freed and collected (its block goes back to the
     // library's cache) and a buffer of its size is asked for.
     const started = performance.now();
     tests.getFunction('spin', ['u64', 'ptr']).launch({ grid: 1, block: 1, stream }, 300_000_000n, stamps);
     let collected = false;
     const registry = new FinalizationRegistry(() => { collected = true; });
     (() => {
       const pinned = PinnedBuffer.alloc(1 << 16);
       pinned.bytes.set(pattern(1 << 16, 6));
       registry.register(pinned.bytes.buffer, 'source');
       stream.copyBatch([
         { dst: device, src: pinned, byteLength: 32768 },
         { dst: device, src: pinned, dstOffset: 32768, srcOffset: 32768, byteLength: 32768 },
       ]);
       pinned.free();
     })();
     await collectUntil(() => collected);
     const reused = PinnedBuffer.alloc(1 << 16);
     reused.bytes.fill(0xee);
     const queuedMs = performance.now() - started;
     const landed = same(await device.toArray(Uint8Array, { stream }), pattern(1 << 16, 6));
     reused.free();
     device.free();
     stamps.free();
     await stream.synchronize();
     tests.unload();
     console.log(JSON.stringify({ landed, collected, queuedMs, modules: cuda.liveObjects().modules }));`,
  );
  assert.equal(result.collected, true);
  assert.ok(result.queuedMs < 300, `the new buffer was written ${result.queuedMs} ms after the launch: the kernel may have run by then`);
  assert.equal(result.landed, true);
  assert.equal(result.modules, 0);
});

test('the kernel takes 2 to 128 pieces of at most 64 KiB, none pageable, registered memory where the device addresses it; other batches go to the driver', needsCompiler, async () => {
  const source = `${setup}
    const stream = Stream.create();
    const device = DeviceBuffer.alloc(1 << 20, { stream });
    const pinned = PinnedBuffer.alloc(1 << 20);
    pinned.bytes.set(pattern(1 << 20, 9));
    const memory = new ArrayBuffer(1 << 16);
    new Uint8Array(memory).set(pattern(1 << 16, 5));
    const registration = HostRegistration.register(memory);
    const pieces = (n, bytes) => Array.from({ length: n }, (_, i) => ({ dst: device, src: pinned, dstOffset: i * bytes, srcOffset: i * bytes, byteLength: bytes }));
    const batches = {
      one: [pieces(1, 64)],
      two: [pieces(2, 64)],
      most: [pieces(128, 64)],
      tooMany: [pieces(129, 64)],
      largest: [pieces(2, 65536)],
      tooLarge: [[...pieces(1, 64), { dst: device, src: pinned, dstOffset: 4096, srcOffset: 4096, byteLength: 65537 }]],
      pageable: [[...pieces(2, 64), { dst: device, src: pattern(64, 3), dstOffset: 8192 }]],
      registered: [[...pieces(2, 64), { dst: device, src: memory, dstOffset: 8192, byteLength: 4096 }]],
    };
    for (const [name, [copies]] of Object.entries(batches)) {
      stream.fill(device, 0);
      stream.copyBatch(copies);
      const out = await device.toArray(Uint8Array, { stream });
      for (const c of copies) {
        const src = c.src instanceof PinnedBuffer ? c.src.bytes.subarray(c.srcOffset, c.srcOffset + c.byteLength) : new Uint8Array(c.src.buffer ?? c.src, 0, c.byteLength ?? c.src.length);
        if (!same(out.subarray(c.dstOffset, c.dstOffset + src.length), src)) throw new Error(name + ': wrong bytes');
      }
    }
    registration.unregister();
    device.free();
    pinned.free();
    await stream.synchronize();
    console.log(JSON.stringify({ names: Object.keys(batches) }));`;
  const launched = async (env: Record<string, string>) => (await simulatedJsonWithCalls<{ names: string[] }>(source, { env })).calls;
  const addressable = await launched({});
  // two, most, largest and registered: four launches; one, tooMany, tooLarge and pageable went to the driver.
  assert.equal(addressable.cuLaunchKernel, 4, JSON.stringify(addressable));
  assert.equal(addressable.cuMemcpyBatchAsync, 4, JSON.stringify(addressable));
  const notAddressable = await launched({ SIMULATED_DRIVER_NO_HOST_POINTER_FOR_REGISTERED_MEMORY: '1' });
  assert.equal(notAddressable.cuLaunchKernel, 3, JSON.stringify(notAddressable));
  assert.equal(notAddressable.cuMemcpyBatchAsync, 5, JSON.stringify(notAddressable));
});

const twoPieces = `${setup}
  const stream = Stream.create();
  const device = DeviceBuffer.alloc(8192, { stream });
  const pinned = PinnedBuffer.alloc(8192);
  pinned.bytes.set(pattern(8192, 4));
  const copies = [{ dst: device, src: pinned, byteLength: 4096 }, { dst: device, src: pinned, dstOffset: 4096, srcOffset: 4096, byteLength: 4096 }];
  const rounds = [];
  for (let round = 0; round < 3; round++) {
    stream.fill(device, 0);
    const error = outcome(() => stream.copyBatch(copies));
    const out = await device.toArray(Uint8Array, { stream });
    rounds.push(error === 'queued' ? same(out, pattern(8192, 4)) : error);
  }
  device.free();
  pinned.free();
  await stream.synchronize();
  console.log(JSON.stringify({ rounds, live: cuda.liveObjects().deviceBytes }));`;

for (const [result, retried] of [['CUDA_ERROR_OUT_OF_MEMORY', true], ['CUDA_ERROR_UNSUPPORTED_PTX_VERSION', false]] as const) {
  for (const entry of ['cuModuleLoadDataEx', 'cuModuleGetFunction'] as const) {
    test(`a ${entry} failing with ${result} leaves the batch to the driver, byte for byte, and the kernel is ${retried ? 'loaded again next time' : 'never asked for again'}`, needsCompiler, async () => {
      const { result: out, calls } = await simulatedJsonWithCalls<{ rounds: unknown[]; live: number }>(twoPieces, { fail: `${entry}@any:1=${result}` });
      assert.deepEqual(out.rounds, [true, true, true]);
      assert.equal(out.live, 0);
      assert.equal(calls.cuModuleLoadDataEx, retried ? 2 : 1, JSON.stringify(calls));
      assert.equal(calls.cuMemcpyBatchAsync, retried ? 1 : 3, JSON.stringify(calls));
      assert.equal(calls.cuLaunchKernel ?? 0, retried ? 2 : 0, JSON.stringify(calls));
      // A module whose function could not be found is unloaded, not kept.
      assert.equal(calls.cuModuleUnload ?? 0, entry === 'cuModuleGetFunction' ? 1 : 0, JSON.stringify(calls));
    });
  }
}

test('a launch of the copy kernel refused without a sticky fault leaves the batch to the driver, byte for byte; the next batch launches again', needsCompiler, async () => {
  const { result, calls } = await simulatedJsonWithCalls<{ rounds: unknown[]; live: number }>(twoPieces, {
    fail: 'cuLaunchKernel@any:1=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES',
  });
  assert.deepEqual(result.rounds, [true, true, true]);
  assert.equal(result.live, 0);
  assert.equal(calls.cuLaunchKernel, 3, JSON.stringify(calls));
  assert.equal(calls.cuMemcpyBatchAsync, 1, JSON.stringify(calls));
});

test('a launch of the copy kernel that meets a sticky fault is a CudaError naming it and the batch', needsCompiler, async () => {
  const result = await simulatedJson<{ error: { name: string; code: string; message: string; sticky: boolean } }>(
    `${setup}
     const stream = Stream.create();
     const device = DeviceBuffer.alloc(8192, { stream });
     const pinned = PinnedBuffer.alloc(8192);
     let error;
     try {
       stream.copyBatch([{ dst: device, src: pinned, byteLength: 4096 }, { dst: device, src: pinned, dstOffset: 4096, srcOffset: 4096, byteLength: 4096 }]);
     } catch (e) {
       error = { name: e.name, code: e.code, message: e.message, sticky: e.sticky };
     }
     device.free();
     pinned.free();
     console.log(JSON.stringify({ error }));`,
    { fail: 'cuLaunchKernel@any:1=CUDA_ERROR_ILLEGAL_ADDRESS' },
  );
  assert.equal(result.error.name, 'CudaError');
  assert.equal(result.error.code, 'CUDA_ERROR_ILLEGAL_ADDRESS');
  assert.equal(result.error.sticky, true);
  assert.match(result.error.message, /^CUDA_ERROR_ILLEGAL_ADDRESS: cuLaunchKernel failed on device 0, stream \d+, the library's copy kernel for a batch of 2 copies, 8192 bytes/);
});
