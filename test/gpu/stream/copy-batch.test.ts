// stream.copyBatch() on a device: many small copies of every kind land byte for byte on an owned stream, the
// per-thread default stream and the legacy default stream (queued one by one there), a pageable source is read at the
// call, and the batch keeps its place in the stream's order between a fill before it and a kernel after it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
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
