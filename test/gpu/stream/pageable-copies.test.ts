// Copies between pageable JS memory and device buffers through staging: the bytes of copies around the chunk
// (256 KiB), device-copy (2 MiB) and cap boundaries in both directions, the copy threads that share a large copy's
// memcpy, destinations detached while their copy is pending, and several workers copying at once.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { gpu } from '../../support/gpu.js';
import { runChild } from '../../support/child.js';

const KiB = 1024;
const MiB = 1 << 20;

// A child that copies each size host -> device -> host and reports the sizes whose bytes came back wrong, the
// source having been overwritten right after the first copy (it is read at call time).
function roundTrips(sizes: number[], evictedAtLeast = 0): string {
  return `
    import { DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
    const stream = Stream.create();
    const wrong = [];
    const pattern = (i, n) => (i * 131 + (i >>> 16) + n) & 0xff;
    for (const n of ${JSON.stringify(sizes)}) {
      const source = new Uint8Array(n);
      for (let i = 0; i < n; i++) source[i] = pattern(i, n);
      const buffer = DeviceBuffer.alloc(n, { stream });
      stream.copy(buffer, source);
      source.fill(0);
      const back = new Uint8Array(n).fill(1);
      stream.copy(back, buffer);
      await stream.synchronize();
      let bad = -1;
      for (let i = 0; i < n; i++) if (back[i] !== pattern(i, n)) { bad = i; break; }
      if (bad >= 0) wrong.push({ n, at: bad, got: back[bad], expected: pattern(bad, n) });
      buffer.free();
    }
    stream.destroy();
    // Evictions run in the background: wait for the expected bytes (then the count must stay there), at most 10 s.
    const until = Date.now() + 10_000;
    while (PinnedBuffer.cacheInfo().staging.evictedBytes < ${evictedAtLeast} && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 50));
    console.log(JSON.stringify({ wrong, staging: PinnedBuffer.cacheInfo().staging }));`;
}

const sizes = [1, 256 * KiB - 1, 256 * KiB, 256 * KiB + 1, MiB - 1, MiB, MiB + 1, 2 * MiB - 1, 2 * MiB, 2 * MiB + 1, 9 * MiB + 5, 33 * MiB];

test('pageable copies of sizes around the chunk and device-copy boundaries return every byte, read at call time', gpu, async () => {
  const result = await runChild(roundTrips(sizes), { CUDA_STREAM_POOL_COPY_THREADS: '3' }, 240_000);
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  assert.deepEqual(out.wrong, []);
  assert.equal(out.staging.copyThreads, 3, 'copies of 1 MiB and more started the copy threads asked for');
});

test('the staging of device-to-host copies from 1 MiB to 8 MiB is evicted from the CPU caches once landed, and only theirs', gpu, async () => {
  const evicted = [MiB, 2 * MiB + 1, 8 * MiB];
  const skipped = [MiB - 1, 8 * MiB + 1, 17 * MiB];
  const expected = process.arch === 'x64' ? evicted.reduce((a, b) => a + b) : 0;
  const result = await runChild(roundTrips([...evicted, ...skipped], expected), { CUDA_STREAM_POOL_COPY_THREADS: '2' }, 240_000);
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  assert.deepEqual(out.wrong, []);
  assert.equal(out.staging.evictedBytes, expected, `evicted ${out.staging.evictedBytes} bytes`);
  const alone = await runChild(roundTrips(evicted), { CUDA_STREAM_POOL_COPY_THREADS: '0' }, 240_000);
  assert.equal(alone.code, 0, alone.stderr);
  assert.equal(JSON.parse(alone.stdout).staging.evictedBytes, 0, 'without copy threads nothing is evicted');
});

test('a copy over chunks of two staging slabs that are neighbours in memory makes one device copy per slab', gpu, async () => {
  // The arena grows by 8 MiB slabs; the driver (and the simulator) often places a new slab right below the last one,
  // and one device copy may not run from one pinned allocation into the next.
  const result = await runChild(roundTrips([1, 256 * KiB - 1, 2 * MiB + 3, 9 * MiB + 5, 33 * MiB]), {}, 240_000);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout).wrong, []);
});

test('around the staging cap (4 MiB): copies that fit, fill and exceed it return every byte', gpu, async () => {
  const cap = 4 * MiB;
  const result = await runChild(roundTrips([cap - 1, cap, cap + 1, 3 * cap + 7]), { CUDA_STREAM_POOL_STAGING_BYTES: String(cap) }, 240_000);
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  assert.deepEqual(out.wrong, []);
  assert.ok(out.staging.highWaterBytes <= cap, `high water ${out.staging.highWaterBytes}`);
});

test('without copy threads (CUDA_STREAM_POOL_COPY_THREADS=0, or none could start) the calling thread copies alone', gpu, async () => {
  const cases: Record<string, string>[] = [{ CUDA_STREAM_POOL_COPY_THREADS: '0' }, { CUDA_STREAM_POOL_FAIL_THREAD_START: 'csp-copy' }];
  for (const env of cases) {
    const result = await runChild(roundTrips([3 * MiB + 11]), env, 120_000);
    assert.equal(result.code, 0, result.stderr);
    const out = JSON.parse(result.stdout);
    assert.deepEqual(out.wrong, [], JSON.stringify(env));
    assert.equal(out.staging.copyThreads, 0, JSON.stringify(env));
  }
});

test('a destination detached or transferred while its copy is pending gets nothing; the wait settles', gpu, async () => {
  const result = await runChild(`
    import { readFileSync } from 'node:fs';
    import { DeviceBuffer, Module, Stream } from 'cuda-stream-pool';
    const module = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
    const spin = module.getFunction('spin', ['u64', 'ptr']);
    const stream = Stream.create();
    const out = {};
    for (const n of [64 * 1024, 9 * 1024 * 1024]) {
      const buffer = DeviceBuffer.alloc(n, { stream });
      stream.fill(buffer, 0x5a);
      spin.launch({ grid: 1, block: 1, stream }, 30_000_000n, 0n); // the copies wait behind it
      const transferred = new Uint8Array(n);
      stream.copy(transferred, buffer);
      const moved = structuredClone(transferred.buffer, { transfer: [transferred.buffer] });
      const kept = new Uint8Array(n);
      stream.copy(kept, buffer);
      await stream.synchronize();
      out[n] = {
        detached: transferred.byteLength,
        untouched: new Uint8Array(moved).every((v) => v === 0),
        kept: kept.every((v) => v === 0x5a),
      };
      buffer.free();
    }
    stream.destroy();
    console.log(JSON.stringify(out));
  `, {}, 120_000);
  assert.equal(result.code, 0, result.stderr);
  const expected = { detached: 0, untouched: true, kept: true };
  assert.deepEqual(JSON.parse(result.stdout), { [64 * 1024]: expected, [9 * MiB]: expected });
});

test('four workers copying 6 MiB both ways at once, sharing the copy threads and the staging, get their own bytes', gpu, async () => {
  const result = await runChild(`
    import { Worker } from 'node:worker_threads';
    const body = \`
      import { parentPort, workerData } from 'node:worker_threads';
      import { DeviceBuffer, Stream } from 'cuda-stream-pool';
      const n = 6 * 1024 * 1024 + workerData * 4099;
      const stream = Stream.create();
      const buffer = DeviceBuffer.alloc(n, { stream });
      let wrong = 0;
      for (let round = 0; round < 4; round++) {
        const source = new Uint8Array(n);
        for (let i = 0; i < n; i += 1) source[i] = (i + workerData * 37 + round * 11) & 0xff;
        stream.copy(buffer, source);
        const back = new Uint8Array(n);
        stream.copy(back, buffer);
        await stream.synchronize();
        for (let i = 0; i < n; i++) if (back[i] !== ((i + workerData * 37 + round * 11) & 0xff)) { wrong++; break; }
      }
      buffer.free();
      stream.destroy();
      parentPort.postMessage(wrong);
    \`;
    const results = await Promise.all([0, 1, 2, 3].map((id) => new Promise((resolve, reject) => {
      const worker = new Worker(body, { eval: true, workerData: id });
      worker.once('message', resolve);
      worker.once('error', reject);
    })));
    console.log(JSON.stringify(results));
  `, {}, 240_000);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), [0, 0, 0, 0]);
});

test('a copy into the same bytes ordered after another wins, whichever one\'s completion is seen first', gpu, async () => {
  // Each copy's landing is finished when its marker is seen done; the later copy's marker may be seen first. Same
  // stream, and across streams through an event; each waited for in several ways.
  const result = await runChild(`
    import { Device, DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
    const n = 5 * 1024 * 1024, tail = 4096;
    const s1 = Stream.create(), s2 = Stream.create();
    const a = DeviceBuffer.alloc(n, { stream: s1 }), b = DeviceBuffer.alloc(n, { stream: s1 });
    s1.fill(a, 0xaa);
    s1.fill(b, 0xbb);
    await s1.synchronize();
    const wrong = [];
    for (let trial = 0; trial < 40; trial++) {
      const array = new Uint8Array(n);
      const across = trial % 2 === 1;
      s1.copy(array, a);
      const second = across ? s2 : s1;
      if (across) { const event = Event.create(); event.record(s1); s2.waitEvent(event); event.destroy(); }
      second.copy(array, b, { byteLength: tail, dstOffset: n - tail });
      const how = ['await', 'sync', 'device'][trial % 3];
      if (how === 'await') { await second.synchronize(); await s1.synchronize(); }
      else if (how === 'sync') { second.synchronizeSync(); s1.synchronizeSync(); }
      else await Device.get(0).synchronize();
      if (array[n - tail] !== 0xbb || array[n - 1] !== 0xbb || array[n - tail - 1] !== 0xaa) wrong.push({ trial, across, how });
    }
    a.free(); b.free(); s1.destroy(); s2.destroy();
    console.log(JSON.stringify(wrong));
  `, { SIMULATED_DRIVER_COPY_BYTES_PER_US: '2000' }, 120_000);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), []);
});
