// stream.copyBatch() on a device: many small copies of every kind land byte for byte on an owned stream, the
// per-thread default stream and the legacy default stream (queued one by one there), a pageable source is read at the
// call, and the batch keeps its place in the stream's order between a fill before it and a kernel after it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Device, DeviceBuffer, HostRegistration, PinnedBuffer, Stream } from 'cuda-stream-pool';
import { gpu, testKernels } from '../../support/gpu.js';

const PIECES = 64;
const PIECE = 4096;

const pattern = (bytes: number, seed: number): Uint8Array => Uint8Array.from({ length: bytes }, (_, i) => (i * 31 + seed * 7) & 255);

for (const [which, make] of [
  ['an owned stream', () => Stream.create()],
  ['the per-thread default stream', () => Stream.perThread()],
  ['the legacy default stream', () => Stream.legacy()],
] as const) {
  test(`on ${which}, ${PIECES} pinned and ${PIECES} pageable pieces of 4 KiB land in one batch, and come back in another`, gpu, async () => {
    const stream = make();
    using device = DeviceBuffer.alloc(2 * PIECES * PIECE, { stream });
    using pinned = PinnedBuffer.alloc(PIECES * PIECE);
    using back = PinnedBuffer.alloc(2 * PIECES * PIECE);
    pinned.bytes.set(pattern(PIECES * PIECE, 1));
    const pageable = Array.from({ length: PIECES }, (_, i) => pattern(PIECE, i + 2));
    stream.copyBatch([
      ...Array.from({ length: PIECES }, (_, i) => ({ dst: device, src: pinned, srcOffset: i * PIECE, dstOffset: (PIECES - 1 - i) * PIECE, byteLength: PIECE })),
      ...pageable.map((src, i) => ({ dst: device, src, dstOffset: (PIECES + i) * PIECE })),
    ]);
    for (const piece of pageable) piece.fill(0); // read at the call: this changes nothing
    stream.copyBatch(Array.from({ length: 2 * PIECES }, (_, i) => ({ dst: back, src: device, srcOffset: i * PIECE, dstOffset: i * PIECE, byteLength: PIECE })));
    await stream.synchronize();
    const source = pattern(PIECES * PIECE, 1);
    for (let i = 0; i < PIECES; i++) {
      assert.deepEqual(back.bytes.subarray(i * PIECE, (i + 1) * PIECE), source.subarray((PIECES - 1 - i) * PIECE, (PIECES - i) * PIECE), `pinned piece ${i}`);
      assert.deepEqual(back.bytes.subarray((PIECES + i) * PIECE, (PIECES + i + 1) * PIECE), pattern(PIECE, i + 2), `pageable piece ${i}`);
    }
    if (which === 'an owned stream') stream.destroy();
  });
}

test('a batch keeps its place in stream order: after a fill queued before it, before a kernel queued after it', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  using device = DeviceBuffer.alloc(PIECES * PIECE, { stream });
  const words = new Uint32Array(PIECE / 4).fill(5);
  for (let round = 0; round < 10; round++) {
    stream.fill(device, 1);
    stream.copyBatch(Array.from({ length: PIECES }, (_, i) => ({ dst: device, src: words, dstOffset: i * PIECE })));
    fillU32.launch({ grid: 1, block: 32, stream }, device, 9, 32); // the first 32 words
    const out = await device.toArray(Uint32Array, { stream });
    assert.deepEqual([out[0], out[31], out[32], out[out.length - 1]], [9, 9, 5, 5], `round ${round}`);
  }
});

// Batches the library's copy kernel takes (2 to 128 pieces of at most 64 KiB between device and pinned memory).
const kernelBatch = async (stream: Stream, registered?: Uint8Array): Promise<void> => {
  const sizes = [1, 7, 16, 100, 4096, 4099, 65535, 65536];
  const sourceBytes = pattern(1 << 20, 3);
  using device = DeviceBuffer.alloc(1 << 20, { stream });
  using other = DeviceBuffer.alloc(1 << 20, { stream });
  using pinned = PinnedBuffer.alloc(1 << 20);
  using back = PinnedBuffer.alloc(1 << 20);
  pinned.bytes.set(sourceBytes);
  stream.fill(device, 0);
  stream.fill(other, 0);
  back.bytes.fill(0);
  // Pieces at odd offsets, each 70000 bytes apart, from pinned memory (or registered memory) into device memory.
  const host = registered ?? pinned;
  const hostBytes = registered ?? pinned.bytes;
  hostBytes.set(sourceBytes.subarray(0, hostBytes.length));
  const pieces = sizes.map((byteLength, i) => ({ dst: device, src: host, dstOffset: i * 70000 + 3, srcOffset: i * 70000 + (i % 2 ? 5 : 16), byteLength }));
  stream.copyBatch(pieces);
  // Then device to device and device to pinned, in 128 pieces of 512 bytes.
  stream.copyBatch(Array.from({ length: 64 }, (_, i) => ({ dst: other, src: device, dstOffset: i * 1024, srcOffset: i * 8192, byteLength: 512 })).concat(
    Array.from({ length: 64 }, (_, i) => ({ dst: other, src: device, dstOffset: 65536 + i * 1024, srcOffset: 3 + i * 512, byteLength: 512 }))));
  stream.copyBatch(sizes.map((byteLength, i) => ({ dst: back, src: device, dstOffset: i * 70000 + 1, srcOffset: i * 70000 + 3, byteLength })));
  await stream.synchronize();
  const d = await device.toArray(Uint8Array, { stream });
  const o = await other.toArray(Uint8Array, { stream });
  sizes.forEach((byteLength, i) => {
    const expected = hostBytes.subarray(pieces[i]!.srcOffset, pieces[i]!.srcOffset + byteLength);
    assert.deepEqual(d.subarray(i * 70000 + 3, i * 70000 + 3 + byteLength), expected, `host to device, piece ${i} of ${byteLength} bytes`);
    assert.equal(d[i * 70000 + 2], 0, `the byte before piece ${i}`);
    assert.equal(d[i * 70000 + 3 + byteLength], 0, `the byte after piece ${i}`);
    assert.deepEqual(back.bytes.subarray(i * 70000 + 1, i * 70000 + 1 + byteLength), expected, `device to pinned, piece ${i}`);
    assert.equal(back.bytes[i * 70000 + 1 + byteLength], 0, `the byte after piece ${i} in pinned memory`);
  });
  for (let i = 0; i < 64; i++) {
    assert.deepEqual(o.subarray(i * 1024, i * 1024 + 512), d.subarray(i * 8192, i * 8192 + 512), `device to device, piece ${i}`);
    assert.deepEqual(o.subarray(65536 + i * 1024, 65536 + i * 1024 + 512), d.subarray(3 + i * 512, 3 + i * 512 + 512), `device to device, piece ${64 + i}`);
  }
};

test('small pieces of every size and alignment between device, pinned and registered memory land byte for byte through the copy kernel', gpu, async () => {
  using stream = Stream.create();
  await kernelBatch(stream);
  await kernelBatch(Stream.legacy());
  const memory = new Uint8Array(1 << 20);
  using registration = HostRegistration.register(memory);
  assert.equal(registration.byteLength, 1 << 20);
  await kernelBatch(stream, memory);
});

test('a kernel batch on a partition\'s stream lands, and keeps its place between a fill and a kernel', gpu, async (t) => {
  const device = Device.get(0);
  const partitions = device.partitions ?? (device.partition([16]));
  if (partitions.length < 2) return t.skip('the device could not be split');
  const stream = Stream.create({ partition: partitions[0]! });
  try {
    await kernelBatch(stream);
    const { fillU32 } = await testKernels();
    using buffer = DeviceBuffer.alloc(PIECES * PIECE, { stream });
    using words = PinnedBuffer.alloc(PIECE);
    new Uint32Array(words.bytes.buffer, words.bytes.byteOffset, PIECE / 4).fill(5);
    for (let round = 0; round < 10; round++) {
      stream.fill(buffer, 1);
      stream.copyBatch(Array.from({ length: PIECES }, (_, i) => ({ dst: buffer, src: words, dstOffset: i * PIECE })));
      fillU32.launch({ grid: 1, block: 32, stream }, buffer, 9, 32);
      const out = await buffer.toArray(Uint32Array, { stream });
      assert.deepEqual([out[0], out[31], out[32], out[out.length - 1]], [9, 9, 5, 5], `round ${round}`);
    }
  } finally {
    stream.destroy();
  }
});
