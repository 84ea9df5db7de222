// PinnedBuffer and the library's pinned cache (Note [pinned cache]): views, free() that returns at once and detaches,
// memory that stays intact under queued copies, and a JS thread that never stalls while the GPU works.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { cuda, DestroyedError, Device, DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
import { gpu, MS, testKernels } from '../../support/gpu.js';
import { runChild } from '../../support/child.js';
import { flushNursery } from '#library/binding/native-ref-lifetime.js';

const gc = (globalThis as { gc?: () => void }).gc;

async function settle(): Promise<void> {
  flushNursery(); // forgotten objects become collectable now, not at the nursery's next flush
  for (let i = 0; i < 3; i++) {
    gc?.();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test('PinnedBuffer.alloc() accepts 1 to 2**32 - 1 bytes and says so', () => {
  for (const bad of [0, -1, 2 ** 32, 1.5])
    assert.throws(() => PinnedBuffer.alloc(bad), {
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: `"byteLength" must be an integer from 1 to 4294967295; received ${bad} (number).`,
    });
  assert.throws(() => PinnedBuffer.alloc('8' as never), { code: 'ERR_INVALID_ARG_TYPE' });
  for (const options of [{ device: 1 }, 'x', 5])
    assert.throws(() => (PinnedBuffer.alloc as (bytes: number, options: unknown) => PinnedBuffer)(16, options), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: /^"options" is not taken: PinnedBuffer.alloc\(\) has only byteLength/,
    });
});

test('without a driver the pinned cache is empty: cacheInfo() reports 0 bytes and trimCache() releases 0', async () => {
  const result = await runChild(
    `
    import { PinnedBuffer } from 'cuda-stream-pool';
    console.log(JSON.stringify({ info: PinnedBuffer.cacheInfo(), released: PinnedBuffer.trimCache(), again: PinnedBuffer.cacheInfo() }));
  `,
    { CUDA_STREAM_POOL_LIBCUDA: '/nonexistent/libcuda.so.1' },
  );
  assert.equal(result.code, 0, result.stderr);
  const empty = { idleBytes: 0, totalBytes: 0, staging: { capBytes: 64 << 20, allocatedBytes: 0, highWaterBytes: 0, copyThreads: 0, evictedBytes: 0 } };
  assert.deepEqual(JSON.parse(result.stdout), { info: empty, released: 0, again: empty });
});

// Copies between pinned memory and a DeviceBuffer (or a view of one) with any offsets and lengths, valid or not: each
// lands exactly the bytes a JS model moves, or is refused with the error the model names, and a refused copy moves
// nothing.
test('copies between a PinnedBuffer and device memory move the bytes their options name, or are refused for the option that is wrong', gpu, async () => {
  const stream = Stream.create();
  const whole = DeviceBuffer.alloc(256, { stream });
  const pinned = PinnedBuffer.alloc(192);
  const option = fc.oneof(fc.constant(undefined), fc.integer({ min: -2, max: 260 }), fc.constantFrom(1.5, Number.NaN, '8'));
  await fc.assert(
    fc.asyncProperty(
      fc.boolean(), fc.boolean(), option, option, option,
      async (toDevice, viewOfDevice, byteLength, dstOffset, srcOffset) => {
        const device = viewOfDevice ? whole.subarray(40, 200) : whole;
        const [dst, src] = toDevice ? [device, pinned] : [pinned, device];
        // The model: both sides' bytes before, and what the copy must do.
        const deviceBefore = new Uint8Array(256).map((_, i) => (i * 7 + 1) & 255);
        const pinnedBefore = new Uint8Array(192).map((_, i) => (i * 13 + 5) & 255);
        stream.copy(whole, deviceBefore);
        pinned.bytes.set(pinnedBefore);
        await stream.synchronize();
        const bad = (value: unknown, most: number) => value !== undefined && (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > most);
        const options = { byteLength, dstOffset, srcOffset };
        let refused: string | undefined;
        if (bad(srcOffset, src.byteLength)) refused = 'srcOffset';
        else if (bad(dstOffset, dst.byteLength)) refused = 'dstOffset';
        const from = (srcOffset as number | undefined) ?? 0, to = (dstOffset as number | undefined) ?? 0;
        if (!refused && (bad(byteLength, src.byteLength - from) || ((byteLength as number | undefined) ?? src.byteLength - from) > dst.byteLength - to)) refused = 'byteLength';
        let error: unknown;
        try {
          stream.copy(dst, src, options as never);
        } catch (e) {
          error = e;
        }
        if (refused) assert.match(String((error as Error | undefined)?.message), new RegExp(`^"options\\.${refused}" `), `${JSON.stringify(options)} ${toDevice} ${viewOfDevice}`);
        else assert.equal(error, undefined);
        const deviceAfter = new Uint8Array(256);
        stream.copy(deviceAfter, whole);
        await stream.synchronize();
        const deviceExpected = deviceBefore.slice(), pinnedExpected = pinnedBefore.slice();
        if (!refused) {
          const bytes = (byteLength as number | undefined) ?? src.byteLength - from;
          const base = viewOfDevice ? 40 : 0;
          if (toDevice) deviceExpected.set(pinnedBefore.subarray(from, from + bytes), base + to);
          else pinnedExpected.set(deviceBefore.subarray(base + from, base + from + bytes), to);
        }
        assert.deepEqual(deviceAfter, deviceExpected);
        assert.deepEqual(pinned.bytes, pinnedExpected);
      },
    ),
    { numRuns: 150 },
  );
  pinned.free();
  whole.free();
  stream.destroy();
});

test('a freed PinnedBuffer stays in the cache as idle bytes until trimCache() releases them', gpu, async () => {
  await settle();
  PinnedBuffer.trimCache();
  const before = PinnedBuffer.cacheInfo();
  assert.equal(before.idleBytes, 0);
  const bytes = (11 << 20) + 3; // a size class no other test here uses
  const pinned = PinnedBuffer.alloc(bytes);
  const held = PinnedBuffer.cacheInfo();
  assert.ok(held.totalBytes - before.totalBytes >= bytes, 'the block counts in totalBytes');
  assert.equal(held.idleBytes, 0, 'and is not idle while in use');
  pinned.free();
  await settle(); // the block goes back from its ArrayBuffer's finalizer, once the detached buffer is collected
  const idle = PinnedBuffer.cacheInfo();
  assert.equal(idle.totalBytes, held.totalBytes);
  assert.equal(idle.idleBytes, held.totalBytes - before.totalBytes, 'back in the cache, idle');
  assert.equal(PinnedBuffer.trimCache(), idle.idleBytes);
  assert.deepEqual(PinnedBuffer.cacheInfo(), before);
});

test('bytes and view() share the pinned memory, with offsets in bytes and lengths in elements', gpu, () => {
  using pinned = PinnedBuffer.alloc(64);
  assert.equal(pinned.byteLength, 64);
  assert.equal(pinned.bytes.length, 64);
  assert.equal(pinned.bytes, pinned.bytes, 'the same Uint8Array each time');
  const floats = pinned.view(Float32Array, 8, 2);
  floats[0] = 1;
  assert.deepEqual(Array.from(pinned.bytes.subarray(8, 12)), [0, 0, 0x80, 0x3f]);
  assert.equal(pinned.view(BigUint64Array).length, 8);
  assert.equal(pinned.view(Uint16Array, 60).length, 2);
  assert.equal(pinned.view(DataView, 4, 10).byteLength, 10);
  assert.throws(() => pinned.view(Float32Array, 6), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /"byteOffset" must be a multiple of 4 \(Float32Array\.BYTES_PER_ELEMENT\)/ });
  assert.throws(() => pinned.view(Float32Array, 8, 15), { code: 'ERR_OUT_OF_RANGE', message: /"length" must be an integer from 0 to 14/ });
  assert.throws(() => pinned.view(Array as never), { code: 'ERR_INVALID_ARG_TYPE', message: /"Ctor" must be a TypedArray constructor/ });
});

test('free() returns at once, detaches every view, and later use is a DestroyedError', gpu, () => {
  const before = cuda.liveObjects().pinnedBytes;
  const pinned = PinnedBuffer.alloc(4096);
  assert.equal(cuda.liveObjects().pinnedBytes, before + 4096);
  const floats = pinned.view(Float32Array);
  const bytes = pinned.bytes;
  pinned.free();
  pinned.free();
  assert.equal(pinned.freed, true);
  assert.equal(cuda.liveObjects().pinnedBytes, before);
  assert.equal(floats.length, 0);
  assert.equal(bytes.length, 0);
  assert.equal(pinned.bytes.length, 0);
  assert.equal(floats[0], undefined, 'reading a detached view gives nothing, never a crash');
  assert.throws(() => pinned.view(Uint8Array), (e) => e instanceof DestroyedError && e.resource === 'PinnedBuffer' && e.method === 'view');
});

test('views outlive a forgotten PinnedBuffer and are still copied directly', gpu, async () => {
  const stream = Stream.create();
  const words = (() => PinnedBuffer.alloc(256).view(Uint32Array))();
  await settle();
  words.fill(0xdeadbeef);
  using buffer = DeviceBuffer.alloc(256, { stream });
  stream.copy(buffer, words);
  const back = new Uint32Array(64);
  stream.copy(back, buffer);
  await stream.synchronize();
  assert.ok(back.every((w) => w === 0xdeadbeef));
  stream.destroy();
});

test('a pinned buffer freed while a copy from it is queued behind a spin kernel: the data arrives intact', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  const bytes = 1 << 20;
  await settle(); // earlier tests' forgotten buffers are finalized first
  const start = cuda.liveObjects().pinnedBytes;
  using buffer = DeviceBuffer.alloc(bytes, { stream });
  const pinned = PinnedBuffer.alloc(bytes);
  pinned.view(Uint32Array).forEach((_, i, a) => (a[i] = i * 2654435761));
  const expected = pinned.bytes.slice();
  spin.launch({ grid: 1, block: 1, stream }, 300n * MS, 0n);
  stream.copy(buffer, pinned);
  pinned.free();
  assert.equal(cuda.liveObjects().pinnedBytes, start);
  // The freed block is not handed out while its copy is queued: new buffers of the same size get other memory.
  await settle();
  const scribbles = Array.from({ length: 4 }, () => PinnedBuffer.alloc(bytes));
  for (const s of scribbles) s.bytes.fill(0xff);
  const out = new Uint8Array(bytes);
  stream.copy(out, buffer);
  await stream.synchronize();
  assert.deepEqual(out, expected);
  for (const s of scribbles) s.free();
  assert.equal(cuda.liveObjects().pinnedBytes, start);
  stream.destroy();
});

test('freeing pinned buffers and finishing staged copies while a long kernel runs never stalls the JS thread', gpu, async (t) => {
  const { spin } = await testKernels();
  const long = Stream.create();
  const short = Stream.create();
  const bytes = 4 << 20;
  using buffer = DeviceBuffer.alloc(bytes, { stream: short });
  const host = new Uint8Array(bytes).fill(5);
  // Warm the pinned cache with several blocks of this size: the measured part then allocates no pinned memory.
  const warm = Array.from({ length: 4 }, () => PinnedBuffer.alloc(bytes));
  for (const p of warm) short.copy(buffer, p);
  for (let i = 0; i < 4; i++) {
    short.copy(buffer, host);
    short.copy(new Uint8Array(bytes), buffer);
  }
  await short.synchronize();
  for (const p of warm) p.free();
  await settle();
  const cacheBefore = PinnedBuffer.cacheInfo().totalBytes;

  const intervalMs = 20;
  const ticks: number[] = [];
  const timer = setInterval(() => ticks.push(performance.now()), intervalMs);
  spin.launch({ grid: 1, block: 1, stream: long }, 2000n * MS, 0n);
  const started = performance.now();
  let rounds = 0;
  while (performance.now() - started < 800) {
    const pinned = PinnedBuffer.alloc(bytes);
    short.copy(buffer, pinned);
    pinned.free(); // returns at once; the block waits for the copy in the cache
    short.copy(buffer, host); // staged host-to-device
    const out = new Uint8Array(bytes);
    short.copy(out, buffer); // staged device-to-host, landed by this thread once its chunks are done
    await short.synchronize(); // another stream's short work completes while the kernel runs
    assert.equal(out[bytes - 1], 5);
    rounds++;
    // Where the short work is done before the wait (a fast device or the simulated driver), the wait settles without
    // a turn of the event loop; yield one, so that the timer can tick between rounds. A stall still shows as a gap.
    await new Promise((resolve) => setImmediate(resolve));
  }
  const elapsed = performance.now() - started;
  clearInterval(timer);
  const kernelStillRunning = !long.query();
  const gaps = ticks.slice(1).map((tick, i) => tick - ticks[i]!);
  const maxGap = Math.max(0, ...gaps);
  t.diagnostic(`${rounds} rounds in ${elapsed.toFixed(0)} ms, ${ticks.length} ticks, longest gap ${maxGap.toFixed(1)} ms, ` +
    `pinned cache grew by ${PinnedBuffer.cacheInfo().totalBytes - cacheBefore} bytes`);
  assert.ok(kernelStillRunning, 'the 2 s kernel was still running when the loop ended');
  assert.ok(rounds >= 2, `only ${rounds} rounds of short work completed while the kernel ran`);
  assert.ok(ticks.length >= elapsed / intervalMs / 2, `${ticks.length} ticks in ${elapsed.toFixed(0)} ms: the timer lost its rhythm`);
  assert.ok(maxGap < 250, `the JS thread stalled for ${maxGap.toFixed(0)} ms`);
  await long.synchronize();
  long.destroy();
  short.destroy();
});

test('pageable copies reuse bounded staging, not the PinnedBuffer cache; trimCache() releases idle blocks', gpu, async () => {
  const stream = Stream.create();
  await settle();
  PinnedBuffer.trimCache();
  const before = PinnedBuffer.cacheInfo();
  const bytes = (7 << 20) + 5;
  using buffer = DeviceBuffer.alloc(bytes, { stream });
  const round = async () => {
    stream.copy(buffer, new Uint8Array(bytes));
    stream.copy(new Uint8Array(bytes), buffer);
    await stream.synchronize();
  };
  await round();
  const first = PinnedBuffer.cacheInfo();
  assert.equal(first.totalBytes, before.totalBytes, 'staging did not take PinnedBuffer blocks');
  assert.ok(first.staging.allocatedBytes >= bytes && first.staging.allocatedBytes <= first.staging.capBytes,
    `staging allocated ${first.staging.allocatedBytes} bytes`);
  await round();
  assert.equal(PinnedBuffer.cacheInfo().staging.allocatedBytes, first.staging.allocatedBytes, 'the second round reused it');
  const pinned = PinnedBuffer.alloc((9 << 20) + 3); // a size class no other test here uses: a new block
  assert.ok(PinnedBuffer.cacheInfo().totalBytes > before.totalBytes, 'PinnedBuffer.alloc() took a new block');
  pinned.free();
  await settle();
  const released = PinnedBuffer.trimCache();
  assert.ok(released >= 9 << 20, `trimCache() released ${released} bytes`);
  assert.equal(PinnedBuffer.cacheInfo().idleBytes, 0);
  stream.destroy();
});

test('pinned memory uses a context the process already has: a fresh process on device 0 retains only device 0', gpu, async () => {
  const result = await runChild(`
    import { cuda, PinnedBuffer } from 'cuda-stream-pool';
    const before = cuda.liveObjects().contexts;
    const pinned = PinnedBuffer.alloc(4096);
    pinned.free();
    console.log(JSON.stringify({ before, after: cuda.liveObjects().contexts }));
  `);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { before: [], after: [0] });
});

const twoDevices = { skip: gpu.skip || (Device.count() < 2 ? 'needs 2 GPUs' : false) };

test('pinned memory allocated after work on device 1 never brings device 0 context into existence', twoDevices, async () => {
  const result = await runChild(`
    import { cuda, DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
    const stream = Stream.create({ device: 1 });
    const pinned = PinnedBuffer.alloc(1 << 20);
    const device = DeviceBuffer.alloc(1 << 20, { stream });
    const bytes = pinned.view(Uint8Array);
    bytes.fill(7);
    stream.copy(device, pinned);
    await stream.synchronize();
    bytes.fill(0);
    stream.copy(pinned, device);
    await stream.synchronize();
    device.free();
    console.log(JSON.stringify({ contexts: cuda.liveObjects().contexts, first: bytes[0], last: bytes[bytes.length - 1] }));
    pinned.free();
    stream.destroy();
  `);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { contexts: [1], first: 7, last: 7 });
});
