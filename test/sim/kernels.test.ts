// The project's kernels on the simulated driver's CPU: the test kernels and the benchmark's kernel, loaded from their
// committed PTX, write what the GPU writes, spin kernels of two streams overlap by their %globaltimer stamps, and a
// write through an unallocated address is a sticky fault.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

const load = `
  import { readFileSync } from 'node:fs';
  import { DeviceBuffer, Module, Stream } from 'cuda-stream-pool';
  const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
  const bench = await Module.load(readFileSync('packages/cuda-stream-pool-bench/kernels/bench.ptx', 'utf8'));`;

test('fill_u32 fills n words of a grid that covers them, and fma_steps applies fmaf step by step', needsCompiler, async () => {
  const result = await simulatedJson<{ filled: number[]; fma: number[] }>(
    `${load}
     import { fmaf } from '#bench/fmaf.js';
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(64 * 4, { stream });
     stream.fill(words, 0, { elementSize: 4 });
     tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']).launch({ grid: 1, block: 32, stream }, words, 7, 40); // 32 threads
     const filled = [...new Set(await words.toArray(Uint32Array, { stream }))];
     const input = Float32Array.from({ length: 100 }, (_, i) => i / 7);
     const data = DeviceBuffer.from(input, { stream });
     bench.getFunction('fma_steps', ['ptr', 'u32', 'u32', 'f32', 'f32']).launch({ grid: 1, block: 128, stream }, data, 100, 5, 1.0001, 0.5);
     const out = await data.toArray(Float32Array, { stream });
     const fma = [...out].map((v, i) => { let e = input[i]; for (let s = 0; s < 5; s++) e = fmaf(e, Math.fround(1.0001), 0.5); return v === e ? 1 : 0; });
     console.log(JSON.stringify({ filled, fma: [...new Set(fma)] }));`,
  );
  assert.deepEqual(result, { filled: [7, 0], fma: [1] });
});

test('a buffer whose address is above 4 GiB, and a subarray of it, reach the kernel at their own addresses', needsCompiler, async () => {
  // The simulator maps large allocations high, as a GPU's addresses are: both 32-bit halves of the argument count.
  const result = await simulatedJson<{ high: boolean; words: number[] }>(
    `${load}
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(8 << 20, { stream });
     stream.fill(buffer, 0);
     const fill = tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
     fill.launch({ grid: 1, block: 32, stream }, buffer.subarray(16), 9, 2);
     fill.launch({ grid: 1, block: 32, stream }, buffer, 5, 1);
     const words = [...(await buffer.toArray(Uint32Array, { stream })).subarray(0, 8)];
     console.log(JSON.stringify({ high: buffer.ptr >= 2n ** 32n, words }));`,
  );
  assert.deepEqual(result, { high: true, words: [5, 0, 0, 0, 9, 9, 0, 0] });
});

test('a launch made from a getter of another launch of the same kernel leaves the outer launch its own shape', needsCompiler, async () => {
  const result = await simulatedJson<{ outer: number; inner: number; outerArray: number; innerArray: number }>(
    `${load}
     const stream = Stream.create();
     const fill = tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
     const buffers = Array.from({ length: 4 }, () => DeviceBuffer.alloc(1024 * 4, { stream }));
     for (const buffer of buffers) stream.fill(buffer, 0, { elementSize: 4 });
     const [a, b, c, d] = buffers;
     // 256 threads, whose shared-memory getter first launches 32 threads into b.
     fill.launch({ grid: 4, block: 64, stream, get dynamicSharedMemBytes() { fill.launch({ grid: 1, block: 32, stream }, b, 2, 1024); return 0; } }, a, 1, 1024);
     // 128 threads, whose grid's second element launches 96 threads into d as it is read.
     const grid = [2];
     Object.defineProperty(grid, 1, { enumerable: true, get() { fill.launch({ grid: 3, block: 32, stream }, d, 4, 1024); return 1; } });
     fill.launch({ grid, block: 64, stream }, c, 3, 1024);
     const count = async (buffer, value) => (await buffer.toArray(Uint32Array, { stream })).filter((w) => w === value).length;
     console.log(JSON.stringify({ outer: await count(a, 1), inner: await count(b, 2), outerArray: await count(c, 3), innerArray: await count(d, 4) }));`,
  );
  assert.deepEqual(result, { outer: 256, inner: 32, outerArray: 128, innerArray: 96 });
});

test('a launch reads each option once, so a getter runs once and the value checked is the value used', needsCompiler, async () => {
  const result = await simulatedJson<{ reads: Record<string, number>; filled: number }>(
    `${load}
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(1024 * 4, { stream });
     stream.fill(words, 0, { elementSize: 4 });
     const reads = {};
     const values = { grid: 4, block: 64, stream, dynamicSharedMemBytes: 0, cluster: [2], cooperative: false, programmaticDependentLaunch: false };
     const options = {};
     for (const [key, value] of Object.entries(values))
       Object.defineProperty(options, key, { enumerable: true, get() { reads[key] = (reads[key] ?? 0) + 1; return value; } });
     tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']).launch(options, words, 5, 1024);
     const filled = (await words.toArray(Uint32Array, { stream })).filter((w) => w === 5).length;
     console.log(JSON.stringify({ reads, filled }));`,
  );
  assert.deepEqual(result, {
    reads: { grid: 1, block: 1, stream: 1, dynamicSharedMemBytes: 1, cluster: 1, cooperative: 1, programmaticDependentLaunch: 1 },
    filled: 256,
  });
});

test('launch shapes past the device limits are refused at the call, and a shared-memory limit raised through one Kernel holds for another Kernel of the same function', needsCompiler, async () => {
  const result = await simulatedJson<{ refused: string[]; raised: number }>(
    `${load}
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(1024 * 4, { stream });
     stream.fill(words, 0, { elementSize: 4 });
     const fill = tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
     const other = tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
     const code = (options) => { try { fill.launch({ stream, ...options }, words, 9, 1024); return 'launched'; } catch (e) { return e.code; } };
     const refused = [
       code({ grid: 1, block: [1, 1, 65] }),
       code({ grid: [1, 65536], block: 1 }),
       code({ grid: 1, block: 32, dynamicSharedMemBytes: 48 * 1024 + 1 }),
       code({ grid: 1, block: 32, dynamicSharedMemBytes: 2 ** 31 }),
     ];
     other.launch({ grid: 1, block: 32, stream, dynamicSharedMemBytes: 1024 }, words, 1, 1024); // reads its limits
     fill.setMaxDynamicSharedMemBytes(64 * 1024);
     other.launch({ grid: 1, block: 32, stream, dynamicSharedMemBytes: 64 * 1024 }, words, 2, 1024);
     const raised = (await words.toArray(Uint32Array, { stream })).filter((w) => w === 2).length;
     console.log(JSON.stringify({ refused, raised }));`,
  );
  assert.deepEqual(result, { refused: Array(4).fill('CUDA_ERROR_INVALID_VALUE'), raised: 32 });
});

test('spin kernels of two streams overlap, as their %globaltimer stamps show', needsCompiler, async () => {
  const result = await simulatedJson<{ overlapNs: number; lengthsNs: number[] }>(
    `${load}
     const spin = tests.getFunction('spin', ['u64', 'ptr']);
     const [a, b] = [Stream.create(), Stream.create()];
     const stamps = [DeviceBuffer.alloc(16, { stream: a }), DeviceBuffer.alloc(16, { stream: b })];
     spin.launch({ grid: 1, block: 1, stream: a }, 200_000_000n, stamps[0]);
     spin.launch({ grid: 1, block: 1, stream: b }, 200_000_000n, stamps[1]);
     const [x, y] = await Promise.all([stamps[0].toArray(BigUint64Array, { stream: a }), stamps[1].toArray(BigUint64Array, { stream: b })]);
     const overlapNs = Number((x[1] < y[1] ? x[1] : y[1]) - (x[0] > y[0] ? x[0] : y[0]));
     console.log(JSON.stringify({ overlapNs, lengthsNs: [Number(x[1] - x[0]), Number(y[1] - y[0])] }));`,
  );
  // 200 ms each, so that the second spin may start up to 100 ms late on a loaded machine.
  for (const length of result.lengthsNs) assert.ok(length >= 200_000_000, `a spin of ${length} ns`);
  assert.ok(result.overlapNs > 100_000_000, `the spins overlapped ${result.overlapNs} ns of 200 ms`);
});

test('write_invalid faults the device: the wait rejects with CUDA_ERROR_ILLEGAL_ADDRESS and the driver says where', needsCompiler, async () => {
  const { runSimulated } = await import('../support/simulated-driver.js');
  const result = await runSimulated(
    `${load}
     const stream = Stream.create();
     tests.getFunction('write_invalid', ['u64']).launch({ grid: 1, block: 1, stream }, 0x10n);
     console.log(await stream.synchronize().then(() => 'resolved', (e) => e.code));`,
  );
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout.trim(), 'CUDA_ERROR_ILLEGAL_ADDRESS');
  assert.match(result.stderr, /simulated driver: kernel write_invalid on device 0: 4 bytes at 0x10 are not allocated/);
});
