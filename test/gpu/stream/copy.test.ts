// stream.copy() and stream.fill(): every direction with offsets against a layout computed on the host, range checks,
// staging (sources read at call time, destinations written before the stream's later completions), and the
// argument checks, which run without a GPU where they need no buffer.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DestroyedError, DeviceBuffer, Event, PinnedBuffer, Stream } from 'cuda-stream-pool';
import { copyOnStream, fillOnStream } from '#library/stream/copy.js';
import { gpu, MS, testKernels } from '../../support/gpu.js';
import { flushNursery } from '#library/binding/native-ref-lifetime.js';

const gc = (globalThis as { gc?: () => void }).gc;
const fakeStream = {} as Stream;

/** Resolves after pending immediates (where ArrayBuffer finalizers run) and a GC. */
async function collectGarbage(): Promise<void> {
  flushNursery(); // forgotten objects become collectable now, not at the nursery's next flush
  for (let i = 0; i < 3; i++) {
    gc?.();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

async function readBack(stream: Stream, buffer: DeviceBuffer): Promise<Uint8Array> {
  const out = new Uint8Array(buffer.byteLength);
  stream.copy(out, buffer);
  await stream.synchronize();
  return out;
}

function pattern(length: number, seed: number): Uint8Array {
  return Uint8Array.from({ length }, (_, i) => (i * 31 + seed * 7 + (i >> 8)) & 0xff);
}

// ---------------------------------------------------------------------------------------------------------------
// Argument checks that need no GPU.

test('copy() rejects operands that are not buffers or host memory, naming the argument', () => {
  assert.throws(() => copyOnStream(fakeStream, 42, new Uint8Array(4), undefined), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_TYPE',
    message: /^"dst" must be a DeviceBuffer, a ManagedBuffer, a PinnedBuffer, an ArrayBuffer, a SharedArrayBuffer or an ArrayBufferView; received 42 \(number\)\.$/,
  });
  assert.throws(() => copyOnStream(fakeStream, new Uint8Array(4), 'text', undefined), { code: 'ERR_INVALID_ARG_TYPE', message: /^"src" must be/ });
});

test('copy() between two host arrays is ERR_INVALID_ARG_VALUE and points to TypedArray.prototype.set()', () => {
  assert.throws(() => copyOnStream(fakeStream, new Uint8Array(4), new ArrayBuffer(4), undefined), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: /"dst" and "src" are both host memory; one of them must be a DeviceBuffer.*TypedArray\.prototype\.set\(\)/,
  });
});

test('copy() and fill() reject unknown option keys with "did you mean"', () => {
  assert.throws(() => copyOnStream(fakeStream, new Uint8Array(4), new Uint8Array(4), { bytelength: 4 }), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.bytelength" is not a copy option; did you mean "byteLength"?',
  });
  assert.throws(() => fillOnStream(fakeStream, {}, 0, { elementsize: 4 }), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.elementsize" is not a fill option; did you mean "elementSize"?',
  });
});

test('fill() of host memory is ERR_INVALID_ARG_TYPE with a hint', () => {
  assert.throws(() => fillOnStream(fakeStream, new Float32Array(4), 0, undefined), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_TYPE',
    message: /^"dst" must be a DeviceBuffer; received an instance of Float32Array\. Fill host memory with TypedArray\.prototype\.fill\(\)\.$/,
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Copies on the GPU.

test('every copy direction with offsets matches a layout computed on the host, guard bytes untouched', gpu, async () => {
  const stream = Stream.create();
  const size = 8192;
  const source = pattern(size, 1);
  // The host model of every buffer: the same copies applied to plain arrays.
  const model = {
    d1: new Uint8Array(size).fill(0xa5),
    d2: new Uint8Array(size).fill(0x5a),
    d3: new Uint8Array(size).fill(0x3c),
    pinned: new Uint8Array(size).fill(0xc3),
    out: new Uint8Array(size).fill(0x99),
  };
  const d1 = DeviceBuffer.alloc(size, { stream });
  const d2 = DeviceBuffer.alloc(size, { stream });
  const d3 = DeviceBuffer.alloc(size, { stream });
  const pinned = PinnedBuffer.alloc(size);
  const out = new Uint8Array(size).fill(0x99);
  stream.fill(d1, 0xa5);
  stream.fill(d2, 0x5a);
  stream.fill(d3, 0x3c3c3c3c, { elementSize: 4 });
  pinned.bytes.fill(0xc3);

  // pageable -> device, from a view that starts 100 bytes into its ArrayBuffer
  const view = new Uint8Array(source.buffer, 100, 4000);
  stream.copy(d1, view, { srcOffset: 3, dstOffset: 1001, byteLength: 2000 });
  model.d1.set(source.subarray(103, 2103), 1001);
  // device -> device, odd offsets
  stream.copy(d2, d1, { srcOffset: 1001, dstOffset: 3003, byteLength: 2000 });
  model.d2.set(model.d1.subarray(1001, 3001), 3003);
  // device -> pinned (the PinnedBuffer itself)
  stream.copy(pinned, d2, { srcOffset: 3003, dstOffset: 17, byteLength: 2000 });
  model.pinned.set(model.d2.subarray(3003, 5003), 17);
  // pinned -> device, from a Float32Array view 16 bytes into the pinned memory (offsets count from the view)
  stream.copy(d3, pinned.view(Float32Array, 16), { srcOffset: 1, dstOffset: 4096, byteLength: 2000 });
  model.d3.set(model.pinned.subarray(17, 2017), 4096);
  // device -> pageable, into a subarray 8 bytes into `out`
  stream.copy(out.subarray(8), d3, { srcOffset: 4096, dstOffset: 500, byteLength: 2000 });
  model.out.set(model.d3.subarray(4096, 6096), 508);
  // device -> pageable DataView and ArrayBuffer, whole buffers (byteLength defaults to the source's length)
  const whole = new ArrayBuffer(size);
  stream.copy(whole, d3);
  const dataView = new DataView(new ArrayBuffer(size + 8), 8, size);
  stream.copy(dataView, d2);
  await stream.synchronize();

  assert.deepEqual(pinned.bytes, model.pinned);
  assert.deepEqual(out, model.out);
  assert.deepEqual(new Uint8Array(whole), model.d3);
  assert.deepEqual(new Uint8Array(dataView.buffer, 8, size), model.d2);
  assert.deepEqual(await readBack(stream, d1), model.d1);
  assert.deepEqual(await readBack(stream, d2), model.d2);
  assert.deepEqual(await readBack(stream, d3), model.d3);
  for (const b of [d1, d2, d3]) b.free();
  pinned.free();
  stream.destroy();
});

test('a SharedArrayBuffer is copied through staging in both directions', gpu, async () => {
  const stream = Stream.create();
  const shared = new SharedArrayBuffer(1024);
  new Uint8Array(shared).set(pattern(1024, 5));
  using buffer = DeviceBuffer.alloc(1024, { stream });
  stream.copy(buffer, shared);
  const back = new SharedArrayBuffer(1024);
  stream.copy(new Uint8Array(back), buffer);
  await stream.synchronize();
  assert.deepEqual(new Uint8Array(back), pattern(1024, 5));
  stream.destroy();
});

test('byteLength defaults to the source from srcOffset and must fit the destination: RangeError naming sizes', gpu, () => {
  const stream = Stream.create();
  using small = DeviceBuffer.alloc(100, { stream });
  using large = DeviceBuffer.alloc(1000, { stream });
  assert.throws(() => stream.copy(small, large), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: /^"options\.byteLength" must be at most 100 to fit the destination \(its 100 bytes from "options\.dstOffset" 0\); received 1000 \(number\)\. It defaulted to the source's 1000 bytes from "options\.srcOffset" 0; pass "options\.byteLength"\.$/,
  });
  assert.throws(() => stream.copy(large, small, { srcOffset: 40, byteLength: 61 }), {
    code: 'ERR_OUT_OF_RANGE',
    message: /^"options\.byteLength" must be an integer from 0 to 60 \(the source's 100 bytes from "options\.srcOffset" 40\); received 61 \(number\)\.$/,
  });
  assert.throws(() => stream.copy(large, small, { srcOffset: 101 }), {
    code: 'ERR_OUT_OF_RANGE',
    message: /^"options\.srcOffset" must be an integer from 0 to 100 \(the source is 100 bytes\); received 101 \(number\)\.$/,
  });
  assert.throws(() => stream.copy(large, small, { dstOffset: 950 }), {
    code: 'ERR_OUT_OF_RANGE',
    message: /must be at most 50 to fit the destination \(its 1000 bytes from "options\.dstOffset" 950\); received 100/,
  });
  assert.throws(() => stream.copy(large, small, { dstOffset: -1 }), { code: 'ERR_OUT_OF_RANGE', message: /"options\.dstOffset" must be an integer from 0 to 1000/ });
  assert.throws(() => stream.copy(large, small, { byteLength: 1.5 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => stream.copy(large, small, { byteLength: '4' as never }), { code: 'ERR_INVALID_ARG_TYPE' });
  stream.copy(large, small, { srcOffset: 100 }); // zero bytes: nothing to do, no error
  stream.destroy();
});

test('overlapping ranges of one device buffer are ERR_INVALID_ARG_VALUE; disjoint ranges copy', gpu, async () => {
  const stream = Stream.create();
  using buffer = DeviceBuffer.alloc(256, { stream });
  stream.copy(buffer, pattern(256, 2));
  assert.throws(() => stream.copy(buffer, buffer, { srcOffset: 0, dstOffset: 10, byteLength: 20 }), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /^"src" overlaps "dst": device memory at 0x[0-9a-f]+ to 0x[0-9a-f]+ and 0x[0-9a-f]+ to 0x[0-9a-f]+; a copy between overlapping ranges is undefined/,
  });
  stream.copy(buffer, buffer, { srcOffset: 0, dstOffset: 128, byteLength: 128 });
  const out = await readBack(stream, buffer);
  assert.deepEqual(out.subarray(128), pattern(256, 2).subarray(0, 128));
  stream.destroy();
});

test('a freed buffer, a freed pinned buffer and a destroyed stream are DestroyedErrors', gpu, () => {
  const stream = Stream.create();
  const buffer = DeviceBuffer.alloc(64, { stream });
  const pinned = PinnedBuffer.alloc(64);
  const view = pinned.view(Uint8Array);
  using other = DeviceBuffer.alloc(64, { stream });
  buffer.free();
  pinned.free();
  assert.throws(() => stream.copy(buffer, new Uint8Array(64)), (e) => e instanceof DestroyedError && e.resource === 'DeviceBuffer' && e.method === 'copy');
  // The message names the argument that was freed.
  assert.throws(() => stream.copy(other, buffer), { name: 'DestroyedError', message: 'stream.copy(): the DeviceBuffer passed as "src" was freed' });
  assert.throws(() => stream.copyBatch([{ dst: other, src: new Uint8Array(64) }, { dst: buffer, src: other }]), {
    name: 'DestroyedError',
    message: 'stream.copyBatch(): the DeviceBuffer passed as "copies[1].dst" was freed',
  });
  assert.throws(() => stream.fill(buffer, 0), (e) => e instanceof DestroyedError && e.method === 'fill');
  assert.throws(() => stream.copy(other, pinned), (e) => e instanceof DestroyedError && e.resource === 'PinnedBuffer');
  assert.throws(() => stream.copy(view, other), (e) => e instanceof DestroyedError && e.resource === 'PinnedBuffer', 'a view into freed pinned memory');
  // The freed destination is named first, whatever the source, and a look at the source runs no Proxy trap before.
  assert.throws(() => stream.copy(buffer, Object.create(PinnedBuffer.prototype) as never), { name: 'DestroyedError', message: 'stream.copy(): the DeviceBuffer passed as "dst" was freed' });
  const revoked = Proxy.revocable({}, {});
  revoked.revoke();
  assert.throws(() => stream.copy(buffer, revoked.proxy as never), { name: 'DestroyedError', message: 'stream.copy(): the DeviceBuffer passed as "dst" was freed' });
  assert.throws(() => stream.copy(42 as never, revoked.proxy as never), { code: 'ERR_INVALID_ARG_TYPE', message: /^"dst" must be a DeviceBuffer/ });
  stream.destroy();
  assert.throws(() => stream.copy(other, new Uint8Array(64)), (e) => e instanceof DestroyedError && e.resource === 'Stream' && e.method === 'copy');
});

test('a device-to-host copy into a resizable ArrayBuffer is ERR_INVALID_ARG_VALUE', gpu, () => {
  const stream = Stream.create();
  using buffer = DeviceBuffer.alloc(64, { stream });
  const Resizable = ArrayBuffer as unknown as new (n: number, o: { maxByteLength: number }) => ArrayBuffer;
  const resizable = new Resizable(64, { maxByteLength: 128 });
  if ((resizable as { resizable?: boolean }).resizable !== true) return; // this Node has no resizable ArrayBuffer
  assert.throws(() => stream.copy(resizable, buffer), { code: 'ERR_INVALID_ARG_VALUE', message: /resizable or growable/ });
  // A length-tracking view of the buffer once shrunk is refused for what it is, not for its shorter length.
  const tracking = new Uint8Array(resizable);
  (resizable as unknown as { resize(n: number): void }).resize(16);
  assert.throws(() => stream.copy(tracking, buffer), { code: 'ERR_INVALID_ARG_VALUE', message: /resizable or growable/ });
  stream.copy(buffer, resizable, { byteLength: 16 }); // as a source it is read at call time: fine
  stream.destroy();
});

test('a host-to-device copy arrives exactly from every source alignment and length around the staging stores\' 16 and 64 bytes, on the calling thread and on the copy threads', gpu, async () => {
  // Bytes go into staging 64 at a time with 16-byte stores after an unaligned head, and large copies are split among
  // the copy threads: each source offset and length here lands a head, the blocks or a tail on a different edge.
  const stream = Stream.create();
  const largest = (1 << 20) + 77; // 1 MiB and more: the copy threads take part
  using buffer = DeviceBuffer.alloc(largest, { stream });
  const source = pattern(largest + 32, 5);
  const cases: [offset: number, length: number][] = [];
  for (let offset = 0; offset < 17; offset++) for (const length of [1, 15, 16, 17, 63, 64, 65, 127, 4099]) cases.push([offset, length]);
  cases.push([5, (1 << 20) + 13], [11, largest], [3, 3 * 262144 + 7]);
  for (const [offset, length] of cases) {
    stream.fill(buffer, 0xee);
    stream.copy(buffer, source.subarray(offset, offset + length));
    const out = await readBack(stream, buffer);
    const wrong = out.subarray(0, length).findIndex((b, i) => b !== source[offset + i]);
    assert.equal(wrong, -1, `source offset ${offset}, ${length} bytes: byte ${wrong} differs`);
    assert.ok(out.subarray(length).every((b) => b === 0xee), `source offset ${offset}, ${length} bytes: a byte after the copy changed`);
  }
  stream.destroy();
});

test('a host-to-device copy reads its source at call time: later writes to the array do not arrive', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  using buffer = DeviceBuffer.alloc(4096, { stream });
  spin.launch({ grid: 1, block: 1, stream }, 100n * MS, 0n);
  const source = new Uint8Array(4096).fill(7);
  stream.copy(buffer, source);
  source.fill(9);
  assert.equal(stream.query(), false, 'the copy is still queued behind the spin kernel');
  assert.ok((await readBack(stream, buffer)).every((b) => b === 7));
  stream.destroy();
});

test('a pageable source dropped and garbage-collected while its copy is queued: the data arrives', gpu, async () => {
  assert.ok(gc, 'the test runner passes --expose-gc');
  const { spin } = await testKernels();
  const stream = Stream.create();
  const size = 1 << 20;
  using buffer = DeviceBuffer.alloc(size, { stream });
  spin.launch({ grid: 1, block: 1, stream }, 200n * MS, 0n);
  let source: Float64Array | undefined = new Float64Array(size / 8).map((_, i) => i * 0.5);
  const collected = new Promise<void>((resolve) => new FinalizationRegistry<void>(() => resolve()).register(source!, undefined));
  stream.copy(buffer, source);
  source = undefined;
  await collectGarbage();
  await Promise.race([collected, new Promise((resolve) => setTimeout(resolve, 1000))]);
  const out = new Float64Array(size / 8);
  stream.copy(out, buffer);
  await stream.synchronize();
  assert.ok(out.every((v, i) => v === i * 0.5));
  stream.destroy();
});

test('a device-to-host copy into a JS array lands before the stream reports a later completion', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  using buffer = DeviceBuffer.alloc(1 << 16, { stream });
  stream.fill(buffer, 0x3f800000, { elementSize: 4 });
  spin.launch({ grid: 1, block: 1, stream }, 100n * MS, 0n);
  const viaStream = new Float32Array(1 << 14);
  stream.copy(viaStream, buffer);
  const marker = Event.create();
  marker.record(stream);
  await marker.synchronize(); // an event recorded after the copy, awaited on its own
  assert.ok(viaStream.every((v) => v === 1), 'landed before the event completed');
  const viaQuery = new Float32Array(1 << 14);
  stream.copy(viaQuery, buffer);
  while (!stream.query()) await new Promise((resolve) => setTimeout(resolve, 1));
  assert.ok(viaQuery.every((v) => v === 1), 'landed before cuStreamQuery reported the stream idle');
  marker.destroy();
  stream.destroy();
});

test('an array still pending as a device-to-host destination cannot be a copy source until it lands', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  using buffer = DeviceBuffer.alloc(1024, { stream });
  using other = DeviceBuffer.alloc(1024, { stream });
  stream.fill(buffer, 3);
  spin.launch({ grid: 1, block: 1, stream }, 200n * MS, 0n);
  const host = new Uint8Array(2048);
  stream.copy(host.subarray(1024), buffer);
  assert.throws(() => stream.copy(other, host, { srcOffset: 512, byteLength: 1024 }), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: new RegExp(`^"src" is the destination of a device-to-host copy still pending on stream ${stream.id} \\(bytes 1024 to 2048 of its ArrayBuffer\\); await`),
  });
  stream.copy(other, host.subarray(0, 1024)); // the other half is not pending
  await stream.synchronize();
  stream.copy(other, host.subarray(1024)); // landed: fine now
  assert.ok((await readBack(stream, other)).every((b) => b === 3));
  stream.destroy();
});

test('staged copies on a non-blocking stream complete while a long kernel runs on the legacy stream', gpu, async () => {
  const { spin } = await testKernels();
  const legacy = Stream.legacy();
  const stream = Stream.create();
  using buffer = DeviceBuffer.alloc(4096, { stream });
  stream.copy(new Uint8Array(4096), buffer); // warms the pinned cache for this size
  await stream.synchronize();
  spin.launch({ grid: 1, block: 1, stream: legacy }, 500n * MS, 0n);
  const out = new Uint8Array(4096);
  stream.fill(buffer, 0x11);
  stream.copy(out, buffer);
  await stream.synchronize();
  assert.equal(legacy.query(), false, 'the legacy kernel still runs');
  assert.ok(out.every((b) => b === 0x11));
  legacy.synchronizeSync();
  stream.destroy();
});

// ---------------------------------------------------------------------------------------------------------------
// Fills.

test('fill() writes 1-byte and 4-byte patterns in a range, leaving the rest', gpu, async () => {
  const stream = Stream.create();
  using buffer = DeviceBuffer.alloc(64, { stream });
  stream.fill(buffer, 0xee);
  stream.fill(buffer, 0x3f800000, { offset: 8, byteLength: 16, elementSize: 4 });
  stream.fill(buffer, 0x01, { offset: 40, byteLength: 3 });
  const out = await readBack(stream, buffer);
  const floats = new Float32Array(out.buffer, 8, 4);
  assert.deepEqual(Array.from(floats), [1, 1, 1, 1]);
  assert.ok(out.subarray(0, 8).every((b) => b === 0xee));
  assert.ok(out.subarray(24, 40).every((b) => b === 0xee));
  assert.deepEqual(Array.from(out.subarray(40, 44)), [1, 1, 1, 0xee]);
  stream.destroy();
});

test('fill() checks value, elementSize, offset and byteLength', gpu, () => {
  const stream = Stream.create();
  using buffer = DeviceBuffer.alloc(64, { stream });
  assert.throws(() => stream.fill(buffer, 256), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: /^"value" must be an integer from 0 to 255 \(one 1-byte element's unsigned bit pattern\); received 256 \(number\)\. Pass \{ elementSize: 4 \} for 32-bit values, or \{ type \} to give a number\.$/,
  });
  assert.throws(() => stream.fill(buffer, -1, { elementSize: 4 }), { code: 'ERR_OUT_OF_RANGE', message: /from 0 to 4294967295/ });
  assert.throws(() => stream.fill(buffer, 0, { elementSize: 2 as never }), { code: 'ERR_INVALID_ARG_VALUE', message: '"options.elementSize" must be 1 or 4; received 2.' });
  assert.throws(() => stream.fill(buffer, 0, { elementSize: 4, offset: 2 }), { code: 'ERR_OUT_OF_RANGE', message: /"options\.offset" must be a multiple of 4/ });
  assert.throws(() => stream.fill(buffer, 0, { elementSize: 4, byteLength: 6 }), { code: 'ERR_OUT_OF_RANGE', message: /"options\.byteLength" must be a multiple of 4/ });
  assert.throws(() => stream.fill(buffer, 0, { offset: 60, byteLength: 5 }), {
    code: 'ERR_OUT_OF_RANGE',
    message: /^"options\.byteLength" must be an integer from 0 to 4 \(the buffer's 64 bytes from "options\.offset" 60\); received 5/,
  });
  assert.throws(() => stream.fill(buffer, '0' as never), { code: 'ERR_INVALID_ARG_TYPE' });
  stream.destroy();
});

test('fill() with a type writes the number as an f32, i32, u32 or u8 element', gpu, async () => {
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(64, { stream });
  stream.fill(buffer, 0xee);
  stream.fill(buffer, 1.5, { type: 'f32', byteLength: 16 });
  stream.fill(buffer, -7, { type: 'i32', offset: 16, byteLength: 8 });
  stream.fill(buffer, 4294967295, { type: 'u32', offset: 24, byteLength: 4 });
  stream.fill(buffer, 200, { type: 'u8', offset: 28, byteLength: 3 });
  stream.fill(buffer, -Infinity, { type: 'f32', offset: 32, byteLength: 4 });
  const out = await readBack(stream, buffer);
  const view = new DataView(out.buffer);
  assert.deepEqual([0, 4, 8, 12].map((at) => view.getFloat32(at, true)), [1.5, 1.5, 1.5, 1.5]);
  assert.equal(view.getUint32(0, true), 0x3fc00000, '1.5 as float32 bits');
  assert.deepEqual([view.getInt32(16, true), view.getInt32(20, true)], [-7, -7]);
  assert.equal(view.getUint32(24, true), 0xffffffff);
  assert.deepEqual(Array.from(out.subarray(28, 32)), [200, 200, 200, 0xee]);
  assert.equal(view.getFloat32(32, true), -Infinity);
  assert.ok(out.subarray(36).every((b) => b === 0xee), 'the rest is untouched');
});

test('fill() with a type checks the value against the type and refuses elementSize beside it', gpu, () => {
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(64, { stream });
  assert.throws(() => stream.fill(buffer, 1e39, { type: 'f32' }), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /^"value" must be an f32: a number within the float32 range/ });
  assert.throws(() => stream.fill(buffer, 2 ** 31, { type: 'i32' }), { code: 'ERR_OUT_OF_RANGE', message: /^"value" must be an i32: an integer from -2147483648 to 2147483647; received 2147483648/ });
  assert.throws(() => stream.fill(buffer, 1.5, { type: 'i32' }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => stream.fill(buffer, -1, { type: 'u32' }), { code: 'ERR_OUT_OF_RANGE', message: /^"value" must be a u32/ });
  assert.throws(() => stream.fill(buffer, 256, { type: 'u8' }), { code: 'ERR_OUT_OF_RANGE', message: /^"value" must be a u8: an integer from 0 to 255/ });
  assert.throws(() => stream.fill(buffer, 1n as never, { type: 'u32' }), { code: 'ERR_INVALID_ARG_TYPE', message: /^"value" must be a number \(one u32 element\)/ });
  assert.throws(() => stream.fill(buffer, 1, { type: 'f64' as never }), { code: 'ERR_INVALID_ARG_VALUE', message: `"options.type" must be one of 'f32', 'i32', 'u32', 'u8'; received "f64".` });
  assert.throws(() => stream.fill(buffer, 1, { type: 'f32', elementSize: 4 }), { code: 'ERR_INVALID_ARG_VALUE', message: /^"options.elementSize" must not be given with "options.type"/ });
  assert.throws(() => stream.fill(buffer, 1, { type: 'f32', offset: 2 }), { code: 'ERR_OUT_OF_RANGE', message: /"options\.offset" must be a multiple of 4/ });
});

test('copies and fills through subarrays land at the view\'s offset in its buffer', gpu, async () => {
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(256, { stream });
  stream.fill(buffer, 0);
  const view = buffer.subarray(64, 128);
  stream.copy(view, pattern(64, 3));
  stream.fill(view.subarray(8, 16), 9, { type: 'u8' });
  stream.fill(buffer.subarray(200), 2.5, { type: 'f32' });
  const whole = await readBack(stream, buffer);
  const expected = new Uint8Array(256);
  expected.set(pattern(64, 3), 64);
  expected.fill(9, 72, 80);
  new Float32Array(expected.buffer, 200, 14).fill(2.5);
  assert.deepEqual(whole, expected);
  // Back out of a view, and device to device between views of one buffer.
  const out = new Uint8Array(16);
  stream.copy(out, view, { srcOffset: 4, byteLength: 16 });
  stream.copy(buffer.subarray(0, 64), view);
  await stream.synchronize();
  assert.deepEqual(out, expected.subarray(68, 84));
  assert.deepEqual((await readBack(stream, buffer)).subarray(0, 64), expected.subarray(64, 128));
  assert.throws(() => stream.copy(buffer.subarray(60, 100), buffer.subarray(64, 104)), { code: 'ERR_INVALID_ARG_VALUE', message: /overlaps "dst"/ });
  assert.throws(() => stream.fill(buffer.subarray(2, 10), 1, { type: 'u32' }), { code: 'ERR_INVALID_ARG_VALUE', message: /^"dst" is a subarray starting 2 bytes into its buffer/ });
});

test('an option getter that detaches or shrinks an operand runs before the operands are checked: the copy, a batch and DeviceBuffer.from() refuse it with the typed error of a detached source', gpu, () => {
  using stream = Stream.create();
  using device = DeviceBuffer.alloc(64, { stream });
  const detached = /^"(src|copies\[0\]\.src|source)" is (an ArrayBuffer|a view of an ArrayBuffer) that is detached/;
  const detach = (memory: ArrayBuffer) => structuredClone(memory, { transfer: [memory] });
  const source = new ArrayBuffer(64);
  assert.throws(() => stream.copy(device, source, { get byteLength() { detach(source); return 64; } }), { code: 'ERR_INVALID_ARG_VALUE', message: detached });
  // A later entry's getter detaches an earlier entry's source.
  const first = new ArrayBuffer(64);
  const copies = [{ dst: device, src: first, byteLength: 32 }, { dst: device, src: new Uint8Array(32), dstOffset: 32, get byteLength() { detach(first); return 32; } }];
  assert.throws(() => stream.copyBatch(copies), { code: 'ERR_INVALID_ARG_VALUE', message: detached });
  const view = new Uint8Array(new ArrayBuffer(64));
  assert.throws(() => DeviceBuffer.from(view, { get stream() { detach(view.buffer as ArrayBuffer); return stream; } }), { code: 'ERR_INVALID_ARG_VALUE', message: detached });
  // A resizable source shrunk by the getter is copied at the length it has when checked, or refused for it.
  const Resizable = ArrayBuffer as unknown as new (bytes: number, options: { maxByteLength: number }) => ArrayBuffer & { resize(bytes: number): void };
  const resizable = new Resizable(64, { maxByteLength: 64 });
  assert.throws(() => stream.copy(device, resizable, { get byteLength() { resizable.resize(16); return 64; } }), { code: 'ERR_OUT_OF_RANGE', message: /the source's 16 bytes/ });
});
