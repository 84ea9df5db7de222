// Deferred submission (CUDA_STREAM_POOL_SUBMISSION=deferred) on a GPU, or the simulator: program order over many
// rounds, and a graph captured from the calls that record in deferred mode giving the bytes the recorded calls give.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { gpu } from '../../support/gpu.js';
import { runChild } from '../../support/child.js';

const deferred = { CUDA_STREAM_POOL_SUBMISSION: 'deferred' };

const load = `
  import { readFileSync } from 'node:fs';
  import { cuda, DeviceBuffer, Graph, Module, PinnedBuffer, Stream } from 'cuda-stream-pool';
  const bench = await Module.load(readFileSync('packages/cuda-stream-pool-bench/kernels/bench.ptx', 'utf8'));
  const fma = bench.getFunction('fma_steps', ['ptr', 'u32', 'u32', 'f32', 'f32']);`;

test('deferred: 10,000 rounds of copy in, a kernel reading it and copy out on 16 streams give every round its bytes', gpu, async () => {
  const result = await runChild(
    `${load}
     const rounds = 10_000, elements = 256, streams = Array.from({ length: 16 }, () => Stream.create());
     const buffers = streams.map((stream) => DeviceBuffer.alloc(elements * 4, { stream }));
     const input = PinnedBuffer.alloc(rounds * elements * 4), output = PinnedBuffer.alloc(rounds * elements * 4);
     const inView = input.view(Float32Array), outView = output.view(Float32Array);
     for (let r = 0; r < rounds; r++) {
       const s = r % streams.length, stream = streams[s], at = r * elements * 4;
       for (let e = 0; e < elements; e++) inView[r * elements + e] = (r % 1000) + e;
       stream.copy(buffers[s], input, { srcOffset: at, byteLength: elements * 4 });
       fma.launch({ grid: 1, block: elements, stream }, buffers[s], elements, 1, 2, 1); // x * 2 + 1
       stream.copy(output, buffers[s], { dstOffset: at, byteLength: elements * 4 });
     }
     await Promise.all(streams.map((stream) => stream.synchronize()));
     let wrong = 0, first = '';
     for (let r = 0; r < rounds; r++)
       for (let e = 0; e < elements; e++) {
         const expected = ((r % 1000) + e) * 2 + 1;
         if (outView[r * elements + e] !== expected) { wrong++; first ||= 'round ' + r + ' element ' + e + ': ' + outView[r * elements + e] + ', not ' + expected; }
       }
     const { mode, recorded, issued } = cuda.submission();
     console.log(JSON.stringify({ wrong, first, mode, recorded, issued }));`,
    deferred,
    240_000,
  );
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  assert.equal(out.mode, 'deferred');
  assert.deepEqual({ wrong: out.wrong, first: out.first }, { wrong: 0, first: '' });
  assert.ok(out.recorded >= 30_000, `${out.recorded} operations recorded`);
  assert.equal(out.issued, out.recorded);
});

test('deferred: a graph captured from copies and a kernel replays the bytes those calls give when recorded', gpu, async () => {
  const result = await runChild(
    `${load}
     const elements = 4096, stream = Stream.create();
     const work = DeviceBuffer.alloc(elements * 4, { stream });
     const input = PinnedBuffer.alloc(elements * 4), recorded = PinnedBuffer.alloc(elements * 4), replayed = PinnedBuffer.alloc(elements * 4);
     input.view(Float32Array).forEach((_, i, a) => { a[i] = i % 97; });
     const steps = (out) => {
       stream.copy(work, input);
       fma.launch({ grid: elements / 256, block: 256, stream }, work, elements, 3, 1.5, 0.25);
       stream.copy(out, work);
     };
     steps(recorded);
     const recordedOps = cuda.submission().recorded;
     await stream.synchronize();
     const graph = await Graph.capture(stream, () => steps(replayed));
     const exec = graph.instantiate();
     for (let i = 0; i < 3; i++) exec.launch(stream);
     await stream.synchronize();
     const a = recorded.view(Float32Array), b = replayed.view(Float32Array);
     const same = a.every((v, i) => v === b[i]);
     const changed = a.some((v, i) => v !== input.view(Float32Array)[i]);
     exec.destroy(); graph.destroy();
     console.log(JSON.stringify({ same, changed, recordedOps }));`,
    deferred,
    120_000,
  );
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { same: true, changed: true, recordedOps: 3 });
});
