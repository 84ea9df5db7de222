// Device partitions on a real GPU: the split reports what the driver gave, kernels on a partition's streams run only
// on its multiprocessors (their %smid values), and a pool in a partition does what any pool does: leases, copies,
// events across partitions, a captured graph replayed on a partition's stream, device.synchronize() covering it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CudaError, Device, DeviceBuffer, Program, Stream, StreamPool, type DevicePartition, type Kernel } from 'cuda-stream-pool';
import { gpu, gpuNotSimulated, testKernels } from '../../support/gpu.js';

const SOURCE = String.raw`
// Each block holds its multiprocessor for 'ns' nanoseconds (so that blocks spread over every multiprocessor they may
// use), then writes the multiprocessor's id.
extern "C" __global__ void multiprocessor_ids(unsigned long long ns, unsigned int* out) {
  unsigned int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); while (now - start < ns);
  if (threadIdx.x == 0) out[blockIdx.x] = id;
}
`;

let split: readonly DevicePartition[] | undefined;
function partitions(): readonly DevicePartition[] {
  split ??= Device.get(0).partition([16]);
  return split;
}

let compiled: Promise<Kernel> | undefined;
function idsKernel(): Promise<Kernel> {
  compiled ??= Program.compile(SOURCE, { name: 'partition-test.cu' }).then((m) => m.getFunction('multiprocessor_ids', ['u64', 'ptr']));
  return compiled;
}

async function multiprocessorsUsed(stream: Stream): Promise<Set<number>> {
  const kernel = await idsKernel();
  const blocks = 4 * Device.get(0).multiprocessorCount;
  using out = DeviceBuffer.alloc(blocks * 4, { stream });
  kernel.launch({ grid: blocks, block: 64, stream }, 100_000n, out);
  return new Set(await out.toArray(Uint32Array, { stream }));
}

test('a split of 16 multiprocessors gets 16 and leaves the rest to a second partition, once per process', gpu, () => {
  const device = Device.get(0);
  const [small, rest] = partitions();
  assert.equal(small!.multiprocessorCount, 16);
  assert.equal(small!.requestedMultiprocessors, 16);
  assert.equal(rest!.multiprocessorCount, device.multiprocessorCount - 16);
  assert.equal(rest!.requestedMultiprocessors, undefined);
  assert.equal(device.partitions, partitions());
  assert.equal(device.partition([16]), partitions());
  assert.throws(() => device.partition([32]), { code: 'ERR_INVALID_STATE' });
});

test('kernels on a partition run only on its multiprocessors; on the other partition, only on the others', gpuNotSimulated('nvrtc'), async () => {
  const [small, rest] = partitions();
  using a = Stream.create({ partition: small });
  using b = Stream.create({ partition: rest });
  using whole = Stream.create();
  const inSmall = await multiprocessorsUsed(a);
  const inRest = await multiprocessorsUsed(b);
  const everywhere = await multiprocessorsUsed(whole);
  assert.equal(inSmall.size, 16);
  assert.equal(inRest.size, rest!.multiprocessorCount);
  assert.deepEqual([...inSmall].filter((id) => inRest.has(id)), [], 'the partitions share no multiprocessor');
  assert.equal(everywhere.size, Device.get(0).multiprocessorCount);
});

test('a pool in a partition leases, copies, waits across partitions and replays a captured graph', gpu, async () => {
  const [small, rest] = partitions();
  const { fillU32 } = await testKernels();
  await using pool = new StreamPool({ partition: small, size: 4 });
  assert.equal(pool.partition, small);
  const results = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map((value) => pool.run(async (stream) => {
    using words = DeviceBuffer.alloc(4096 * 4, { stream });
    fillU32.launch({ grid: 16, block: 256, stream }, words, value, 4096);
    using other = Stream.create({ partition: rest });
    other.waitStream(stream);
    const out = await words.toArray(Uint32Array, { stream: other });
    return out.every((w) => w === value);
  })));
  assert.deepEqual(results, new Array(8).fill(true));
  // A graph captured on a partition's stream, launched there again.
  using stream = Stream.create({ partition: small });
  using words = DeviceBuffer.alloc(1024 * 4, { stream });
  stream.beginCapture();
  fillU32.launch({ grid: 4, block: 256, stream }, words, 77, 1024);
  using graph = stream.endCapture();
  using exec = graph.instantiate();
  stream.fill(words, 0);
  exec.launch(stream);
  await Device.get(0).synchronize(); // covers the partition's work
  assert.deepEqual(new Set(await words.toArray(Uint32Array, { stream })), new Set([77]));
});

test('a cooperative launch on a partition may have only the blocks the partition holds at once', gpu, async () => {
  const [small] = partitions();
  const { fillU32 } = await testKernels();
  using stream = Stream.create({ partition: small });
  const { minGridSize, blockSize } = fillU32.maxPotentialBlockSize();
  const perMultiprocessor = minGridSize / Device.get(0).multiprocessorCount;
  const limit = perMultiprocessor * small!.multiprocessorCount;
  using words = DeviceBuffer.alloc((limit + 1) * blockSize * 4, { stream });
  fillU32.launch({ grid: limit, block: blockSize, stream, cooperative: true }, words, 3, limit * blockSize);
  let refused: unknown;
  try {
    fillU32.launch({ grid: limit + 1, block: blockSize, stream, cooperative: true }, words, 4, (limit + 1) * blockSize);
  } catch (error) {
    refused = error;
  }
  await stream.synchronize().catch((error: unknown) => { refused ??= error; });
  assert.ok(refused instanceof CudaError, `a cooperative grid of ${limit + 1} blocks on ${small!.multiprocessorCount} multiprocessors was accepted`);
  assert.equal(refused.code, 'CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE');
});
