// DeviceBuffer: stream-ordered allocation and free, safety across streams (Note [buffer uses]), frees after the
// stream is gone, out of memory, finalizers, and borrowed views in workers. Argument checks run without a GPU.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';

import { cuda, CudaError, currentStream, DestroyedError, Device, DeviceBuffer, PinnedBuffer, Stream, StreamPool } from 'cuda-stream-pool';
import { gpu, MS, testKernels } from '../../support/gpu.js';
import { flushNursery } from '#library/binding/native-ref-lifetime.js';

const workerUrl = new URL('../../workers/memory-worker.js', import.meta.url);
const ONE = 0x3f800000; // 1.0f
const MINUS_ONE = 0xbf800000; // -1.0f

async function readFloats(stream: Stream, buffer: DeviceBuffer): Promise<Float32Array> {
  const out = new Float32Array(buffer.byteLength / 4);
  stream.copy(out, buffer);
  await stream.synchronize();
  return out;
}

function allEqual(values: Float32Array, expected: number): string | undefined {
  const bad = values.findIndex((v) => v !== expected);
  return bad < 0 ? undefined : `element ${bad} is ${values[bad]}, not ${expected}`;
}

// ---------------------------------------------------------------------------------------------------------------
// Argument checks that need no GPU.

test('DeviceBuffer.alloc() checks byteLength and rejects unknown options before touching the driver', () => {
  assert.throws(() => DeviceBuffer.alloc(0), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: '"byteLength" must be an integer from 1 to 9007199254740991; received 0 (number).',
  });
  assert.throws(() => DeviceBuffer.alloc(2.5), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => DeviceBuffer.alloc(10n as never), { code: 'ERR_INVALID_ARG_TYPE', message: /received 10n \(bigint\)\. Pass Number\(value\)\./ });
  assert.throws(() => DeviceBuffer.alloc(16, { strem: undefined } as never), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.strem" is not a DeviceBuffer.alloc option; did you mean "stream"?',
  });
  assert.throws(() => DeviceBuffer.alloc(16, { stream: 1 as never }), { code: 'ERR_INVALID_ARG_TYPE', message: '"options.stream" must be a Stream; received 1 (number).' });
});

test('DeviceBuffer.attach() rejects anything but the object share() returns, naming the field that is wrong', () => {
  for (const bad of [undefined, {}, { kind: 'other', id: 1n }, 'id'])
    assert.throws(() => DeviceBuffer.attach(bad as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /^"shared" must be a SharedDeviceBuffer from buffer\.share\(\)/ });
  const kind = 'cuda-stream-pool.DeviceBuffer';
  assert.throws(() => DeviceBuffer.attach({ kind, id: 1 } as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: '"shared.id" must be a bigint (from buffer.share()); received 1 (number).' });
  assert.throws(() => DeviceBuffer.attach({ kind, id: 2n ** 64n, byteLength: 8, ptr: 1n, device: 0 }), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: '"shared.id" must be a buffer id from buffer.share(): an integer from 1n to 2n ** 64n - 1n; received 18446744073709551616n (bigint).',
  });
  assert.throws(() => DeviceBuffer.attach({ kind, id: 1n, byteLength: 8, ptr: 'x' } as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: '"shared.ptr" must be a bigint; received "x" (string).' });
});

// ---------------------------------------------------------------------------------------------------------------
// Allocation and free.

test('alloc() on a stream reports its size, address, device and stream, and is counted in deviceBytes', gpu, async () => {
  const stream = Stream.create();
  const before = cuda.liveObjects().deviceBytes;
  const buffer = DeviceBuffer.alloc(1000, { stream });
  assert.equal(buffer.byteLength, 1000);
  assert.equal(typeof buffer.ptr, 'bigint');
  assert.notEqual(buffer.ptr, 0n);
  assert.equal(buffer.device, Device.get(0));
  assert.equal(buffer.stream, stream);
  assert.equal(buffer.borrowed, false);
  assert.equal(cuda.liveObjects().deviceBytes, before + 1000);
  buffer.free();
  buffer.free();
  assert.equal(buffer.freed, true);
  assert.equal(cuda.liveObjects().deviceBytes, before);
  assert.throws(() => buffer.recordStream(stream), (e) => e instanceof DestroyedError && e.resource === 'DeviceBuffer' && e.method === 'recordStream');
  assert.throws(() => buffer.share(), (e) => e instanceof DestroyedError && e.method === 'share');
  await stream.synchronize();
  stream.destroy();
});

test('Stream.create(), new StreamPool(), DeviceBuffer.alloc() and free() read each option once, so a getter cannot pass a check with one value and reach the driver with another', gpu, () => {
  const reads = new Map<string, number>();
  const counted = <T extends object>(values: T): T => {
    const options = {};
    for (const [key, value] of Object.entries(values))
      Object.defineProperty(options, key, { enumerable: true, get: () => (reads.set(key, (reads.get(key) ?? 0) + 1), value) });
    return options as T;
  };
  const device = Device.get(0);
  using stream = Stream.create(counted({ device, nonBlocking: true, priority: 0 }));
  assert.deepEqual(Object.fromEntries(reads), { device: 1, nonBlocking: 1, priority: 1 });
  reads.clear();
  const pool = new StreamPool(counted({ device, size: 2, priority: 0, nonBlocking: true, memoryLimitBytes: 2 ** 20 }));
  assert.deepEqual(Object.fromEntries(reads), { device: 1, size: 1, priority: 1, nonBlocking: 1, memoryLimitBytes: 1 });
  pool.destroy();
  reads.clear();
  const buffer = DeviceBuffer.alloc(256, counted({ stream, device, exportable: false }));
  assert.deepEqual(Object.fromEntries(reads), { stream: 1, device: 1, exportable: 1 });
  reads.clear();
  buffer.free(counted({ stream }));
  assert.deepEqual(Object.fromEntries(reads), { stream: 1 });
  assert.equal(buffer.freed, true);
});

test('alloc() without a stream uses currentStream(), the per-thread default stream outside any scope', gpu, () => {
  const buffer = DeviceBuffer.alloc(64);
  assert.equal(buffer.stream, Stream.perThread());
  buffer.free();
  assert.throws(() => DeviceBuffer.alloc(64, { stream: Stream.perThread(), device: Device.count() }), { name: 'RangeError' });
});

test('alloc() on a destroyed stream is a DestroyedError naming the stream', gpu, () => {
  const stream = Stream.create();
  stream.destroy();
  assert.throws(() => DeviceBuffer.alloc(64, { stream }), (e) => e instanceof DestroyedError && e.resource === 'Stream' && e.method === 'alloc');
});

test('an absurd size is CUDA_ERROR_OUT_OF_MEMORY naming the bytes, and the next alloc works', gpu, async () => {
  const stream = Stream.create();
  const before = cuda.liveObjects().deviceBytes;
  const absurd = 2 ** 40;
  assert.throws(() => DeviceBuffer.alloc(absurd, { stream }), (e) => {
    assert.ok(e instanceof CudaError, String(e));
    assert.equal(e.name, 'CudaError');
    assert.equal(e.code, 'CUDA_ERROR_OUT_OF_MEMORY');
    assert.equal(e.result, 2);
    assert.equal(e.call, 'cuMemAllocFromPoolAsync');
    assert.equal(e.sticky, false);
    assert.ok(e.message.startsWith('CUDA_ERROR_OUT_OF_MEMORY: cuMemAllocFromPoolAsync failed on device 0, stream '), e.message);
    assert.ok(e.message.includes(`${absurd} bytes requested`), e.message);
    return true;
  });
  assert.equal(cuda.liveObjects().deviceBytes, before);
  const buffer = DeviceBuffer.alloc(1 << 20, { stream });
  stream.fill(buffer, ONE, { elementSize: 4 });
  assert.equal(allEqual(await readFloats(stream, buffer), 1), undefined);
  buffer.free();
  await stream.synchronize();
  assert.equal(Device.get(0).healthy, true);
  stream.destroy();
});

test('free({ stream }) on another stream orders the free after the allocation stream and that stream', gpu, async () => {
  const { spin } = await testKernels();
  const a = Stream.create();
  const b = Stream.create();
  const buffer = DeviceBuffer.alloc(1 << 20, { stream: a });
  a.fill(buffer, ONE, { elementSize: 4 });
  spin.launch({ grid: 1, block: 1, stream: a }, 200n * MS, 0n);
  const pinned = PinnedBuffer.alloc(1 << 20);
  a.copy(pinned, buffer);
  buffer.free({ stream: b }); // b must wait for a's spin and copy before the memory is reused
  const next = DeviceBuffer.alloc(1 << 20, { stream: b });
  b.fill(next, MINUS_ONE, { elementSize: 4 });
  await b.synchronize();
  await a.synchronize();
  assert.equal(allEqual(pinned.view(Float32Array), 1), undefined);
  next.free();
  pinned.free();
  await b.synchronize();
  a.destroy();
  b.destroy();
});

test('[Symbol.asyncDispose] frees and resolves once the stream reached the free', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  const buffer = DeviceBuffer.alloc(4096, { stream });
  spin.launch({ grid: 1, block: 1, stream }, 100n * MS, 0n);
  const before = stream.recordEvent();
  await buffer[Symbol.asyncDispose]();
  assert.equal(buffer.freed, true);
  assert.equal(before.query(), true, 'work queued before the free is done once asyncDispose resolves');
  await buffer[Symbol.asyncDispose](); // idempotent
  before.destroy();
  stream.destroy();
});

test('1,000 alloc/free pairs bring memoryPool.usedBytes back to where it started', gpu, async () => {
  const stream = Stream.create();
  const pool = Device.get(0).memoryPool;
  await stream.synchronize();
  const start = pool.usedBytes;
  for (let i = 0; i < 1000; i++) {
    const buffer = DeviceBuffer.alloc(4096 + (i % 7) * 65536, { stream });
    if (i % 100 === 0) stream.fill(buffer, i & 0xff);
    buffer.free();
  }
  await stream.synchronize();
  assert.equal(pool.usedBytes, start);
  stream.destroy();
});

// ---------------------------------------------------------------------------------------------------------------
// Safety across streams (Note [buffer uses]).

/** Whether the byte range [ptr, ptr + bytes) overlaps [other, other + otherBytes). */
function overlapping(ptr: bigint, bytes: number, other: bigint, otherBytes: number): boolean {
  return ptr < other + BigInt(otherBytes) && other < ptr + BigInt(bytes);
}

test('a free on A of a buffer B still reads: A is not held up by B\'s kernel, and the memory is not reused under B', gpu, async () => {
  const { spin, empty } = await testKernels();
  const a = Stream.create();
  const b = Stream.create();
  const bytes = 4 << 20;
  const buffer = DeviceBuffer.alloc(bytes, { stream: a });
  const address = buffer.ptr;
  a.fill(buffer, ONE, { elementSize: 4 });
  b.waitStream(a);
  spin.launch({ grid: 1, block: 1, stream: b }, 300n * MS, 0n);
  const pinned = PinnedBuffer.alloc(bytes);
  b.copy(pinned, buffer);
  buffer.free(); // on A, without making A wait for B
  const reused = DeviceBuffer.alloc(bytes, { stream: a });
  a.fill(reused, MINUS_ONE, { elementSize: 4 });
  empty.launch({ grid: 1, block: 1, stream: a });
  const start = performance.now();
  await a.synchronize();
  const aMs = performance.now() - start;
  // B's kernel runs 300 ms; a free that made A wait for B would hold A that long.
  assert.ok(aMs < 150, `A's later work waited ${aMs.toFixed(0)} ms behind B's kernel`);
  assert.ok(!b.query(), 'B was still running when A finished');
  assert.ok(!overlapping(reused.ptr, bytes, address, bytes), 'memory B still reads was handed out again');
  await b.synchronize();
  assert.equal(allEqual(pinned.view(Float32Array), 1), undefined);
  assert.equal(allEqual(await readFloats(a, reused), -1), undefined);
  reused.free();
  pinned.free();
  await a.synchronize();
  a.destroy();
  b.destroy();
});

test('a DeviceBuffer kernel argument on stream B keeps its memory from reuse until the kernel ran', gpu, async () => {
  const { spin, fillU32 } = await testKernels();
  const a = Stream.create();
  const b = Stream.create();
  const n = 1 << 20;
  const buffer = DeviceBuffer.alloc(4 * n, { stream: a });
  const address = buffer.ptr;
  b.waitStream(a);
  spin.launch({ grid: 1, block: 1, stream: b }, 300n * MS, 0n);
  fillU32.launch({ grid: n / 256, block: 256, stream: b }, buffer, 0x40000000, n); // 2.0f, late on B
  buffer.free();
  const reused = DeviceBuffer.alloc(4 * n, { stream: a });
  a.fill(reused, MINUS_ONE, { elementSize: 4 });
  const reusedEarly = overlapping(reused.ptr, 4 * n, address, 4 * n) && !b.query();
  await b.synchronize();
  assert.equal(reusedEarly, false, 'the memory was handed out again while B\'s kernel was still to write it');
  // Had the memory been reused before B's kernel, the kernel's 2.0 would have overwritten the -1.0.
  assert.equal(allEqual(await readFloats(a, reused), -1), undefined);
  reused.free();
  await a.synchronize();
  a.destroy();
  b.destroy();
});

test('recordStream(B) before a raw-pointer kernel on B keeps the memory from reuse the same way', gpu, async () => {
  const { spin, fillU32 } = await testKernels();
  const a = Stream.create();
  const b = Stream.create();
  const n = 1 << 20;
  const buffer = DeviceBuffer.alloc(4 * n, { stream: a });
  const address = buffer.ptr;
  b.waitStream(a);
  buffer.recordStream(b);
  spin.launch({ grid: 1, block: 1, stream: b }, 300n * MS, 0n);
  fillU32.launch({ grid: n / 256, block: 256, stream: b }, buffer.ptr, 0x40000000, n);
  buffer.free();
  const reused = DeviceBuffer.alloc(4 * n, { stream: a });
  a.fill(reused, MINUS_ONE, { elementSize: 4 });
  const reusedEarly = overlapping(reused.ptr, 4 * n, address, 4 * n) && !b.query();
  await b.synchronize();
  assert.equal(reusedEarly, false, 'the memory was handed out again while B\'s kernel was still to write it');
  assert.equal(allEqual(await readFloats(a, reused), -1), undefined);
  reused.free();
  await a.synchronize();
  a.destroy();
  b.destroy();
});

test('a free after the allocation stream was destroyed is ordered after its last work on a library stream', gpu, async () => {
  const { spin } = await testKernels();
  const a = Stream.create();
  const c = Stream.create();
  const bytes = 4 << 20;
  const buffer = DeviceBuffer.alloc(bytes, { stream: a });
  const address = buffer.ptr;
  a.fill(buffer, ONE, { elementSize: 4 });
  spin.launch({ grid: 1, block: 1, stream: a }, 300n * MS, 0n);
  const pinned = PinnedBuffer.alloc(bytes);
  a.copy(pinned, buffer);
  const aDone = a.recordEvent();
  a.destroy(); // its spin and copy are still queued
  buffer.free(); // must not touch the destroyed stream
  const reused = DeviceBuffer.alloc(bytes, { stream: c });
  c.fill(reused, MINUS_ONE, { elementSize: 4 });
  const reusedEarly = overlapping(reused.ptr, bytes, address, bytes) && !aDone.query();
  await aDone.synchronize();
  assert.equal(reusedEarly, false, 'the memory was handed out again before the destroyed stream\'s copy read it');
  // Had the free not waited for a's last work, c's -1.0 could have landed in the memory before a's copy read it.
  assert.equal(allEqual(pinned.view(Float32Array), 1), undefined);
  assert.equal(allEqual(await readFloats(c, reused), -1), undefined);
  aDone.destroy();
  reused.free();
  pinned.free();
  await c.synchronize();
  c.destroy();
});

test('forgotten buffers are freed by their finalizers and deviceBytes returns', gpu, async () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  assert.ok(gc, 'the test runner passes --expose-gc');
  const stream = Stream.create();
  const before = cuda.liveObjects().deviceBytes;
  (() => {
    for (let i = 0; i < 100; i++) stream.fill(DeviceBuffer.alloc(65536, { stream }), 1);
  })();
  assert.equal(cuda.liveObjects().deviceBytes, before + 100 * 65536);
  flushNursery(); // forgotten objects become collectable now, not at the nursery's next flush
  for (let i = 0; i < 40 && cuda.liveObjects().deviceBytes > before; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(cuda.liveObjects().deviceBytes, before);
  await stream.synchronize();
  stream.destroy();
});

// ---------------------------------------------------------------------------------------------------------------
// Borrowed views and workers.

test('share()/attach() in the same thread gives a borrowed view whose free() leaves the memory', gpu, async () => {
  const stream = Stream.create();
  const owner = DeviceBuffer.alloc(256, { stream });
  const shared = owner.share();
  assert.deepEqual(structuredClone(shared), shared);
  const view = DeviceBuffer.attach(shared, { stream });
  assert.equal(view.ptr, owner.ptr);
  assert.equal(view.byteLength, 256);
  assert.equal(view.borrowed, true);
  const before = cuda.liveObjects().deviceBytes;
  view.free();
  assert.equal(cuda.liveObjects().deviceBytes, before, 'a borrowed view frees nothing');
  stream.fill(owner, 9);
  const second = DeviceBuffer.attach(shared, { stream });
  owner.free();
  assert.throws(() => DeviceBuffer.attach(shared), (e) => e instanceof DestroyedError && e.resource === 'DeviceBuffer' && e.method === 'attach');
  assert.throws(() => stream.fill(second, 0), (e) => e instanceof DestroyedError && e.resource === 'DeviceBuffer');
  await stream.synchronize();
  stream.destroy();
});

test('a worker reads a shared buffer through a borrowed view', gpu, async () => {
  const stream = Stream.create();
  const bytes = 1 << 16;
  const input = Uint8Array.from({ length: bytes }, (_, i) => (i * 7) & 0xff);
  const buffer = DeviceBuffer.alloc(bytes, { stream });
  stream.copy(buffer, input);
  await stream.synchronize();
  const worker = new Worker(workerUrl, { workerData: { mode: 'read', shared: buffer.share() } });
  const exited = once(worker, 'exit');
  const [message] = await once(worker, 'message');
  assert.equal(message.borrowed, true);
  assert.deepEqual(new Uint8Array(message.bytes), input);
  const [code] = await exited;
  assert.equal(code, 0);
  buffer.free();
  await stream.synchronize();
  stream.destroy();
});

test('a worker\'s queued use of a shared buffer delays the owner\'s free and reuse', gpu, async () => {
  const stream = Stream.create();
  const bytes = 4 << 20;
  const buffer = DeviceBuffer.alloc(bytes, { stream });
  const address = buffer.ptr;
  stream.fill(buffer, ONE, { elementSize: 4 });
  await stream.synchronize();
  const worker = new Worker(workerUrl, { workerData: { mode: 'hold', shared: buffer.share() } });
  const exited = once(worker, 'exit');
  const messages: unknown[] = [];
  const done = new Promise<void>((resolve) => worker.on('message', (m) => { messages.push(m); if (messages.length === 2) resolve(); }));
  while (messages.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(messages[0], 'queued');
  buffer.free(); // the worker's spin and copy are queued on its stream
  const reused = DeviceBuffer.alloc(bytes, { stream });
  stream.fill(reused, MINUS_ONE, { elementSize: 4 });
  const reusedEarly = overlapping(reused.ptr, bytes, address, bytes) && messages.length < 2;
  await done;
  assert.equal(reusedEarly, false, 'the memory was handed out again while the worker still read it');
  const result = messages[1] as { bytes: Uint8Array };
  const floats = new Float32Array(result.bytes.buffer, result.bytes.byteOffset, bytes / 4);
  assert.equal(allEqual(floats, 1), undefined);
  assert.equal(allEqual(await readFloats(stream, reused), -1), undefined);
  const [code] = await exited;
  assert.equal(code, 0);
  reused.free();
  await stream.synchronize();
  stream.destroy();
});

test('a worker allocates on a shared pool stream, copies in and out, and frees', gpu, async () => {
  const pool = new StreamPool({ size: 2 });
  const bytes = 1 << 18;
  const before = cuda.liveObjects().deviceBytes;
  const worker = new Worker(workerUrl, { workerData: { mode: 'allocate', pool: pool.share(), bytes } });
  const exited = once(worker, 'exit');
  const [message] = await once(worker, 'message');
  const [code] = await exited;
  assert.equal(code, 0);
  assert.deepEqual(new Uint8Array(message.bytes), Uint8Array.from({ length: bytes }, (_, i) => (i * 13 + 1) & 0xff));
  assert.equal(cuda.liveObjects().deviceBytes, before);
  pool.destroy();
});

// ---------------------------------------------------------------------------------------------------------------
// DeviceBuffer.from(), toArray() and subarray().

test('DeviceBuffer.from() and toArray() check their arguments before touching the driver', () => {
  assert.throws(() => DeviceBuffer.from([1, 2] as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /^"source" must be a TypedArray, DataView or Buffer; received/ });
  assert.throws(() => DeviceBuffer.from(new Float32Array(0)), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /^"source.byteLength" must be an integer from 1/ });
  assert.throws(() => DeviceBuffer.from(new Uint8Array(4), { strem: undefined } as never), { code: 'ERR_INVALID_ARG_VALUE', message: /not a DeviceBuffer.from option; did you mean "stream"/ });
});

test('DeviceBuffer.from() copies any typed array in and toArray() reads it back as any element type', gpu, async () => {
  using stream = Stream.create();
  const source = Float64Array.from({ length: 1000 }, (_, i) => i * 0.5 - 17);
  using buffer = DeviceBuffer.from(source, { stream });
  assert.equal(buffer.byteLength, 8000);
  assert.equal(buffer.stream, stream);
  source.fill(0); // read at call time: later writes do not arrive
  const back = await buffer.toArray(Float64Array, { stream });
  assert.ok(back instanceof Float64Array);
  assert.deepEqual(Array.from(back.subarray(0, 4)), [-17, -16.5, -16, -15.5]);
  assert.equal(back[999], 999 * 0.5 - 17);
  const bytes = await buffer.toArray(Uint8Array, { stream });
  assert.deepEqual(bytes, new Uint8Array(back.buffer));
  const words = await buffer.toArray(BigUint64Array, { stream });
  assert.equal(words[1], new BigUint64Array(back.buffer)[1]);
  using fromView = DeviceBuffer.from(new Int16Array([1, -2, 3, -4, 5]).subarray(1, 4), { stream });
  assert.deepEqual(Array.from(await fromView.toArray(Int16Array, { stream })), [-2, 3, -4]);
});

test('DeviceBuffer.from() and toArray() default to currentStream()', gpu, async () => {
  const buffer = DeviceBuffer.from(new Uint32Array([7, 8, 9]));
  assert.equal(buffer.stream, currentStream());
  assert.deepEqual(Array.from(await buffer.toArray(Uint32Array)), [7, 8, 9]);
  buffer.free();
});

test('toArray() refuses a type whose element size does not divide the buffer, and non-typed-array constructors', gpu, async () => {
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(6, { stream });
  assert.throws(() => buffer.toArray(Float32Array, { stream }), { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE', message: /^"Ctor" is Float32Array, whose 4-byte elements do not divide the buffer's 6 bytes/ });
  assert.throws(() => buffer.toArray(DataView as never, { stream }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => buffer.toArray(Array as never, { stream }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.equal((await buffer.toArray(Uint16Array, { stream })).length, 3);
  assert.throws(() => buffer.toArray(Uint8Array, { stream, signal: 'x' as never }), { code: 'ERR_INVALID_ARG_TYPE', message: /^"options.signal" must be an AbortSignal/ });
  await assert.rejects(buffer.toArray(Uint8Array, { stream, signal: AbortSignal.abort(new Error('no wait')) }), { message: 'no wait' });
  buffer.free();
  assert.throws(() => buffer.toArray(Uint8Array, { stream }), DestroyedError);
});

test('toArray() with a signal that had already aborted queues no copy: its stream is gone once destroyed', gpu, async () => {
  const before = cuda.liveObjects().streams;
  const stream = Stream.create();
  const buffer = DeviceBuffer.alloc(1 << 20, { stream });
  stream.fill(buffer, 7);
  const reason = new Error('not wanted');
  const result = buffer.toArray(Uint8Array, { stream, signal: AbortSignal.abort(reason) });
  buffer.free();
  stream.destroy();
  // A queued copy into a JS array would hold the stream until it landed, which needs this thread to yield first.
  assert.equal(cuda.liveObjects().streams, before);
  await assert.rejects(result, (error) => error === reason);
});

test('subarray() has JavaScript\'s meaning: negative offsets from the end, clamping, empty when end is before begin', gpu, () => {
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(100, { stream });
  const cases: Array<[number | undefined, number | undefined, number, number]> = [
    [undefined, undefined, 0, 100],
    [10, undefined, 10, 90],
    [10, 30, 10, 20],
    [-8, undefined, 92, 8],
    [-30, -10, 70, 20],
    [50, 20, 50, 0],
    [-500, 500, 0, 100],
    [100, 100, 100, 0],
  ];
  for (const [begin, end, offset, length] of cases) {
    const view = buffer.subarray(begin, end);
    assert.equal(view.byteLength, length, `subarray(${begin}, ${end})`);
    assert.equal(view.ptr, buffer.ptr + BigInt(offset), `subarray(${begin}, ${end})`);
    assert.equal(view.device, buffer.device);
    assert.equal(view.stream, buffer.stream);
  }
  const inner = buffer.subarray(10, 60).subarray(5, 15);
  assert.equal(inner.ptr, buffer.ptr + 15n);
  assert.equal(inner.byteLength, 10);
  assert.throws(() => buffer.subarray(1.5), { code: 'ERR_INVALID_ARG_TYPE', message: /^"begin" must be an integer \(a byte offset\)/ });
  assert.throws(() => buffer.subarray(0, '4' as never), { code: 'ERR_INVALID_ARG_TYPE', message: /^"end"/ });
});

test('ptr read for the first time after free() is the address the buffer had, for the buffer and its views', gpu, () => {
  using stream = Stream.create();
  const buffer = DeviceBuffer.alloc(256, { stream });
  const view = buffer.subarray(64);
  const nested = view.subarray(16);
  using other = DeviceBuffer.alloc(256, { stream });
  const otherPtr = other.ptr;
  buffer.free();
  assert.notEqual(buffer.ptr, 0n);
  assert.equal(view.ptr, buffer.ptr + 64n);
  assert.equal(nested.ptr, buffer.ptr + 80n);
  assert.notEqual(buffer.ptr, otherPtr, 'two live allocations have two addresses');
});

test('a subarray shares its buffer\'s lifetime: its own free() leaves the buffer, the buffer\'s free() ends it', gpu, async () => {
  using stream = Stream.create();
  const buffer = DeviceBuffer.from(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]), { stream });
  const bytesBefore = cuda.liveObjects().deviceBytes;
  const view = buffer.subarray(2, 6);
  assert.equal(cuda.liveObjects().deviceBytes, bytesBefore, 'a view allocates nothing');
  view.free();
  assert.equal(view.freed, true);
  assert.equal(buffer.freed, false);
  assert.equal(cuda.liveObjects().deviceBytes, bytesBefore, 'freeing a view frees nothing');
  assert.throws(() => view.toArray(Uint8Array), DestroyedError);
  assert.deepEqual(Array.from(await buffer.toArray(Uint8Array, { stream })), [1, 2, 3, 4, 5, 6, 7, 8]);
  const other = buffer.subarray(4);
  assert.throws(() => other.share(), { code: 'ERR_INVALID_ARG_VALUE', message: /is a subarray; share its buffer/ });
  buffer.free();
  assert.equal(other.freed, true);
  assert.throws(() => other.toArray(Uint8Array, { stream }), (e) => e instanceof DestroyedError && /is a view of a buffer that was freed/.test(e.message));
  assert.throws(() => other.subarray(0, 1), DestroyedError);
  assert.throws(() => stream.copy(new Uint8Array(4), other), DestroyedError);
});

test('a subarray used as a kernel argument on stream B delays its buffer\'s free on A until the kernel ran', gpu, async () => {
  const { spin, fillU32 } = await testKernels();
  const a = Stream.create();
  const b = Stream.create();
  const n = 1 << 20;
  const buffer = DeviceBuffer.alloc(8 * n, { stream: a });
  b.waitStream(a);
  spin.launch({ grid: 1, block: 1, stream: b }, 300n * MS, 0n);
  fillU32.launch({ grid: n / 256, block: 256, stream: b }, buffer.subarray(4 * n), 0x40000000, n); // 2.0f, late on B
  buffer.free();
  const reused = DeviceBuffer.alloc(8 * n, { stream: a });
  a.fill(reused, -1, { type: 'f32' });
  await b.synchronize();
  assert.equal(allEqual(await reused.toArray(Float32Array, { stream: a }), -1), undefined);
  reused.free();
  await a.synchronize();
  a.destroy();
  b.destroy();
});
