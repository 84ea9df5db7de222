// 2D copies and pitched device memory on the simulated driver: a tile of a pinned or registered host image lands in
// a pitched DeviceBuffer row by row and comes back, the rows between stay untouched, bad rectangles are refused
// naming what fits, and a failed cuMemcpy2DAsync is a CudaError that leaves the stream usable.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

const setup = `
  import { cuda, Device, DeviceBuffer, HostRegistration, PinnedBuffer, Stream } from 'cuda-stream-pool';
  const outcome = (f) => { try { const v = f(); return v === undefined ? 'done' : v; } catch (e) { return { name: e.name, code: e.code, message: e.message }; } };`;

for (const submission of ['direct', 'deferred'] as const) {
  test(`with ${submission} submission, a tile of a host image goes into pitched device memory and back, row by row`, needsCompiler, async () => {
    const result = await simulatedJson<{ pitch: number; alignment: number; bytes: number; tile: boolean; gaps: boolean; registered: boolean }>(
      `${setup}
       const stream = Stream.create();
       const imageWidth = 100, imageHeight = 40, x = 7, y = 5, w = 50, h = 20; // 1-byte pixels
       const image = PinnedBuffer.alloc(imageWidth * imageHeight);
       image.bytes.forEach((_, i) => { image.bytes[i] = (i * 13) & 255; });
       const tile = DeviceBuffer.allocPitched(w, h, { stream });
       stream.fill(tile, 0xee);
       stream.copy2D(tile, image, { widthBytes: w, height: h, srcPitch: imageWidth, srcOffset: y * imageWidth + x });
       const raw = await tile.toArray(Uint8Array, { stream });
       let ok = true, gaps = true;
       for (let r = 0; r < h; r++) for (let c = 0; c < tile.pitch; c++) {
         const v = raw[r * tile.pitch + c];
         if (c < w) ok &&= v === image.bytes[(y + r) * imageWidth + x + c];
         else gaps &&= v === 0xee;
       }
       // Back into a registered host array, packed (pitch = width).
       const back = new Uint8Array(w * h);
       const registration = HostRegistration.register(back);
       stream.copy2D(back, tile, { widthBytes: w, height: h });
       await stream.synchronize();
       let registered = true;
       for (let r = 0; r < h; r++) for (let c = 0; c < w; c++) registered &&= back[r * w + c] === image.bytes[(y + r) * imageWidth + x + c];
       registration.unregister();
       console.log(JSON.stringify({ pitch: tile.pitch, alignment: Device.get(0).pitchAlignmentBytes, bytes: tile.byteLength, tile: ok, gaps, registered }));`,
      { env: { CUDA_STREAM_POOL_SUBMISSION: submission }, operationDelayUs: 100 },
    );
    assert.deepEqual(result, { pitch: 64, alignment: 32, bytes: 64 * 20, tile: true, gaps: true, registered: true });
  });
}

test('bad rectangles and operands are refused, naming what fits', needsCompiler, async () => {
  const result = await simulatedJson<{ refused: { name: string; code: string; message: string }[] }>(
    `${setup}
     const stream = Stream.create();
     const pitched = DeviceBuffer.allocPitched(100, 10, { stream }); // pitch 128
     const plain = DeviceBuffer.alloc(4096, { stream });
     const pinned = PinnedBuffer.alloc(4096);
     const refused = [
       outcome(() => stream.copy2D(pitched, new Uint8Array(4096), { widthBytes: 100, height: 10 })),
       outcome(() => stream.copy2D(pitched, pinned, { widthBytes: 100, height: 11, srcPitch: 100 })),
       outcome(() => stream.copy2D(pitched, pinned, { widthBytes: 100, height: 10, srcPitch: 50 })),
       outcome(() => stream.copy2D(pinned, pinned, { widthBytes: 10, height: 1 })),
       outcome(() => stream.copy2D(pitched, pitched, { widthBytes: 100, height: 2, srcOffset: 64 })),
       outcome(() => stream.copy2D(pitched, plain)),
       outcome(() => DeviceBuffer.allocPitched(0, 4, { stream })),
       outcome(() => stream.copy2D(pitched, plain, { widthBytes: 100, height: 10, srcPitch: 100, dstOffset: 1 }) ?? 'fits'),
       outcome(() => stream.copy2D(pitched, pitched, { widthBytes: 50, height: 10, dstOffset: 50 }) ?? 'fits'), // left half to right half
       outcome(() => stream.copy2D(pitched, pitched, { widthBytes: 50, height: 9, dstOffset: 128 + 20 })), // rows 0..8 into 1..9, shifted
     ];
     console.log(JSON.stringify({ refused }));`,
  );
  const [pageable, tooManyRows, narrowPitch, twoHost, overlap, noOptions, zeroWidth, fits, halves, shifted] = result.refused;
  assert.equal(halves, 'fits');
  assert.match(shifted!.message, /^"src" overlaps "dst": destination row 0 shares device memory with source row 1/);
  assert.match(pageable!.message, /^"src" is pageable host memory; a 2D copy takes pinned memory/);
  assert.equal(tooManyRows!.code, 'ERR_OUT_OF_RANGE');
  assert.match(tooManyRows!.message, /^"options.height" must be at most 10 rows to fit the destination \(1280 bytes from offset 0, rows 128 bytes apart\); received 11/);
  assert.match(narrowPitch!.message, /^"options.srcPitch" must be at least "options.widthBytes" \(100\); received 50/);
  assert.match(twoHost!.message, /^"dst" and "src" are both host memory/);
  assert.match(overlap!.message, /^"src" overlaps "dst": destination row 0 shares device memory with source row 0/);
  assert.equal(noOptions!.code, 'ERR_INVALID_ARG_TYPE');
  assert.equal(zeroWidth!.code, 'ERR_OUT_OF_RANGE');
  assert.equal(fits, 'fits');
});

test('a failed cuMemcpy2DAsync is a CudaError naming the rows; the stream goes on', needsCompiler, async () => {
  const result = await simulatedJson<{ error: { code: string; message: string }; after: number[] }>(
    `${setup}
     const stream = Stream.create();
     const tile = DeviceBuffer.allocPitched(16, 4, { stream });
     const pinned = PinnedBuffer.alloc(64);
     pinned.bytes.fill(9);
     const error = outcome(() => stream.copy2D(tile, pinned, { widthBytes: 16, height: 4 }));
     stream.copy2D(tile, pinned, { widthBytes: 16, height: 4 });
     const out = await tile.toArray(Uint8Array, { stream });
     console.log(JSON.stringify({ error, after: [out[0], out[3 * tile.pitch + 15]] }));`,
    { fail: 'cuMemcpy2DAsync:1=CUDA_ERROR_INVALID_VALUE' },
  );
  assert.match(result.error.message, /^CUDA_ERROR_INVALID_VALUE: cuMemcpy2DAsync failed on device 0, stream \d+, 4 rows of 16 bytes \(pitches 32 and 16\)/);
  assert.deepEqual(result.after, [9, 9]);
});
