// Bounded pinned staging for copies between pageable JS memory and device buffers: copies larger than the free
// chunks, or than the whole cap, stream through the chunks and keep stream order. Each case runs in a child process
// with a small cap (CUDA_STREAM_POOL_STAGING_BYTES), so the streamed path is taken.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { PinnedBuffer } from 'cuda-stream-pool';
import { gpu } from '../../support/gpu.js';
import { runChild } from '../../support/child.js';

const MiB = 1 << 20;

test('cacheInfo() reports the staging cap, what is allocated and the high-water mark, GPU or not', () => {
  const { staging } = PinnedBuffer.cacheInfo();
  assert.equal(staging.capBytes, 64 * MiB);
  assert.ok(staging.allocatedBytes >= 0 && staging.allocatedBytes <= staging.capBytes);
  assert.ok(staging.highWaterBytes >= 0 && staging.highWaterBytes <= staging.allocatedBytes);
});

test('CUDA_STREAM_POOL_STAGING_BYTES: whole bytes rounded down to 256 KiB chunks; anything else keeps 64 MiB', async () => {
  const caps: Record<string, number> = {};
  for (const value of ['1048576', '1000000', '-5', '1x', '4096', '', '9007199254740993']) {
    const result = await runChild(
      `import { PinnedBuffer } from 'cuda-stream-pool'; console.log(PinnedBuffer.cacheInfo().staging.capBytes);`,
      { CUDA_STREAM_POOL_STAGING_BYTES: value, CUDA_STREAM_POOL_LIBCUDA: '/nonexistent/libcuda.so.1' },
    );
    assert.equal(result.code, 0, result.stderr);
    caps[value] = Number(result.stdout.trim());
  }
  assert.deepEqual(caps, { '1048576': MiB, '1000000': 786432, '-5': 64 * MiB, '1x': 64 * MiB, '4096': 64 * MiB, '': 64 * MiB, '9007199254740993': 64 * MiB });
});

test('with a 1 MiB cap, 5 MiB copies in both directions stream through the chunks and return every byte', gpu, async () => {
  const result = await runChild(`
    import { readFileSync } from 'node:fs';
    import { DeviceBuffer, Module, PinnedBuffer, Stream } from 'cuda-stream-pool';
    const module = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
    const spin = module.getFunction('spin', ['u64', 'ptr']);
    const stream = Stream.create();
    const n = 5 * 1024 * 1024;
    const source = new Uint8Array(n);
    for (let i = 0; i < n; i++) source[i] = (i * 7 + (i >> 12)) & 0xff;
    const expected = source.slice();
    const a = DeviceBuffer.alloc(n, { stream });
    const b = DeviceBuffer.alloc(n, { stream });
    // A kernel first, so the copy waits in the stream behind its gates while the poller feeds the chunks.
    spin.launch({ grid: 1, block: 1, stream }, 50_000_000n, 0n);
    stream.copy(a, source);
    source.fill(0); // read at call time: later writes do not arrive
    stream.copy(b, a); // stream order: after the whole streamed copy
    const back = new Uint8Array(n);
    stream.copy(back, b);
    const second = new Uint8Array(n);
    stream.copy(second, a);
    await stream.synchronize();
    const info = PinnedBuffer.cacheInfo().staging;
    const same = (x) => x.every((v, i) => v === expected[i]);
    console.log(JSON.stringify({ back: same(back), second: same(second), info }));
    a.free(); b.free(); stream.destroy();
  `, { CUDA_STREAM_POOL_STAGING_BYTES: String(MiB) });
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  assert.equal(out.back, true, 'host -> device -> device -> host through 1 MiB of staging');
  assert.equal(out.second, true, 'a second device -> host copy queued behind the first');
  assert.equal(out.info.capBytes, MiB);
  assert.ok(out.info.allocatedBytes <= MiB, `allocated ${out.info.allocatedBytes}`);
  assert.ok(out.info.highWaterBytes <= MiB && out.info.highWaterBytes > 0, `high water ${out.info.highWaterBytes}`);
});

test('many small copies in flight at once with a 1 MiB cap: more copies than chunks, every byte right', gpu, async () => {
  const result = await runChild(`
    import { readFileSync } from 'node:fs';
    import { DeviceBuffer, Module, Stream } from 'cuda-stream-pool';
    const module = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
    const spin = module.getFunction('spin', ['u64', 'ptr']);
    const streams = Array.from({ length: 4 }, () => Stream.create());
    const copies = [];
    for (let i = 0; i < 64; i++) {
      const stream = streams[i % 4];
      if (i < 4) spin.launch({ grid: 1, block: 1, stream }, 20_000_000n, 0n);
      const data = new Uint32Array(4096).map((_, j) => i * 100000 + j);
      const buffer = DeviceBuffer.alloc(data.byteLength, { stream });
      stream.copy(buffer, data);
      const back = new Uint32Array(4096);
      stream.copy(back, buffer);
      copies.push({ i, back, buffer, stream });
    }
    await Promise.all(streams.map((s) => s.synchronize()));
    const bad = copies.flatMap(({ i, back }) => {
      const j = back.findIndex((v, j) => v !== i * 100000 + j);
      return j < 0 ? [] : [{ copy: i, element: j, got: back[j], expected: i * 100000 + j }];
    });
    for (const c of copies) c.buffer.free();
    for (const s of streams) s.destroy();
    console.log(JSON.stringify({ bad }));
  `, { CUDA_STREAM_POOL_STAGING_BYTES: String(MiB) });
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout).bad, []);
});
