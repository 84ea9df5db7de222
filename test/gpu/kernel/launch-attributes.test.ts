// Launch attributes on a real GPU (kernels compiled by NVRTC for the device): blocks of a cluster see their rank in
// it, a cooperative grid has every block resident at once and one larger than the device holds is refused, and a
// kernel launched with programmatic dependent launch starts before the kernel ahead of it ends (device timestamps)
// yet reads what that kernel wrote.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CudaError, Device, DeviceBuffer, Program, Stream, type Kernel, type Module } from 'cuda-stream-pool';
import { gpu, gpuNotSimulated } from '../../support/gpu.js';

const SOURCE = String.raw`
__device__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread 0 of each block writes the block's rank in its cluster and its cluster's x index.
extern "C" __global__ void cluster_ranks(unsigned int* rank, unsigned int* cluster) {
  unsigned int r, c;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(c));
  if (threadIdx.x == 0) {
    rank[blockIdx.x] = r;
    cluster[blockIdx.x] = c;
  }
}

// Thread 0 of each block arrives, then waits until every block of the grid has arrived: only a grid whose blocks
// are all resident at once gets through. Each block then writes how many it saw.
extern "C" __global__ void all_arrive(unsigned int* arrived, unsigned int* seen) {
  if (threadIdx.x != 0) return;
  atomicAdd(arrived, 1u);
  while (atomicAdd(arrived, 0u) < gridDim.x) {}
  seen[blockIdx.x] = atomicAdd(arrived, 0u);
}

// The first of a chain: lets its dependent start at once, works for 'ns' nanoseconds, writes 'data', and stamps its end.
extern "C" __global__ void primary(unsigned long long ns, unsigned int* data, unsigned long long* stamps) {
  asm volatile("griddepcontrol.launch_dependents;");
  unsigned long long start = now();
  while (now() - start < ns) {}
  data[threadIdx.x] = threadIdx.x * 3u + 1u;
  __syncthreads();
  if (threadIdx.x == 0) stamps[0] = now();
}

// The second: stamps its start, waits for the primary's memory, and copies what it wrote, plus one.
extern "C" __global__ void secondary(const unsigned int* data, unsigned int* out, unsigned long long* stamps) {
  if (threadIdx.x == 0) stamps[1] = now();
  asm volatile("griddepcontrol.wait;" ::: "memory");
  out[threadIdx.x] = data[threadIdx.x] + 1u;
}
`;

let compiled: Promise<Module> | undefined;
async function kernels(): Promise<Record<'clusterRanks' | 'allArrive' | 'primary' | 'secondary', Kernel>> {
  compiled ??= Program.compile(SOURCE, { name: 'launch-attributes.cu' });
  const module = await compiled;
  return {
    clusterRanks: module.getFunction('cluster_ranks', ['ptr', 'ptr']),
    allArrive: module.getFunction('all_arrive', ['ptr', 'ptr']),
    primary: module.getFunction('primary', ['u64', 'ptr', 'ptr']),
    secondary: module.getFunction('secondary', ['ptr', 'ptr', 'ptr']),
  };
}

test('the device reports clusters and cooperative launch (an H100/H200 has both)', gpu, () => {
  const device = Device.get(0);
  assert.equal(device.clusterLaunch, device.computeCapability.major >= 9);
  assert.equal(typeof device.cooperativeLaunch, 'boolean');
});

test('blocks launched in clusters of 4 see their rank and cluster; without clusters each block is a cluster of one', gpuNotSimulated('nvrtc'), async () => {
  const { clusterRanks } = await kernels();
  using stream = Stream.create();
  using rank = DeviceBuffer.alloc(16 * 4, { stream });
  using cluster = DeviceBuffer.alloc(16 * 4, { stream });
  clusterRanks.launch({ grid: 16, block: 64, stream, cluster: 4 }, rank, cluster);
  const clustered = { rank: [...(await rank.toArray(Uint32Array, { stream }))], cluster: [...(await cluster.toArray(Uint32Array, { stream }))] };
  assert.deepEqual(clustered.rank, Array.from({ length: 16 }, (_, i) => i % 4));
  assert.deepEqual(clustered.cluster, Array.from({ length: 16 }, (_, i) => Math.floor(i / 4)));
  clusterRanks.launch({ grid: 16, block: 64, stream }, rank, cluster);
  assert.deepEqual([...(await rank.toArray(Uint32Array, { stream }))], new Array(16).fill(0));
  assert.deepEqual([...(await cluster.toArray(Uint32Array, { stream }))], Array.from({ length: 16 }, (_, i) => i));
});

test('a cooperative grid of as many blocks as the device holds passes a grid-wide barrier; one block more is refused at the call', gpuNotSimulated('nvrtc'), async () => {
  const { allArrive } = await kernels();
  using stream = Stream.create();
  // The fewest blocks that fill every multiprocessor at this block size: exactly what a cooperative launch may have.
  const { minGridSize, blockSize } = allArrive.maxPotentialBlockSize();
  using arrived = DeviceBuffer.alloc(4, { stream });
  using seen = DeviceBuffer.alloc(minGridSize * 4, { stream });
  stream.fill(arrived, 0);
  allArrive.launch({ grid: minGridSize, block: blockSize, stream, cooperative: true }, arrived, seen);
  assert.deepEqual(new Set(await seen.toArray(Uint32Array, { stream })), new Set([minGridSize]));
  assert.throws(
    () => allArrive.launch({ grid: minGridSize + 1, block: blockSize, stream, cooperative: true }, arrived, seen),
    (e: unknown) => {
      assert.ok(e instanceof CudaError);
      assert.equal(e.code, 'CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE');
      assert.equal(e.call, 'cuLaunchKernelEx');
      assert.match(e.message, new RegExp(`room for at most ${minGridSize} blocks at once`));
      return true;
    },
  );
  await stream.synchronize(); // the refusal left the stream usable
});

test('with programmatic dependent launch the second kernel starts before the first ends, and still reads what it wrote', gpuNotSimulated('nvrtc'), async () => {
  const { primary, secondary } = await kernels();
  using stream = Stream.create();
  using data = DeviceBuffer.alloc(128 * 4, { stream });
  using out = DeviceBuffer.alloc(128 * 4, { stream });
  using stamps = DeviceBuffer.alloc(16, { stream });
  const run = async (programmaticDependentLaunch: boolean) => {
    stream.fill(data, 0);
    primary.launch({ grid: 1, block: 128, stream }, 2_000_000n, data, stamps); // 2 ms
    secondary.launch({ grid: 1, block: 128, stream, programmaticDependentLaunch }, data, out, stamps);
    const [primaryEnd, secondaryStart] = await stamps.toArray(BigUint64Array, { stream });
    return { earlyNs: Number(primaryEnd! - secondaryStart!), out: await out.toArray(Uint32Array, { stream }) };
  };
  const expected = Uint32Array.from({ length: 128 }, (_, i) => i * 3 + 2);
  const serialized = await run(false);
  assert.deepEqual(serialized.out, expected);
  assert.ok(serialized.earlyNs <= 0, `without the attribute the second kernel started ${serialized.earlyNs} ns before the first ended`);
  const overlapped = await run(true);
  assert.deepEqual(overlapped.out, expected);
  // It may start as soon as the first kernel began: well over half of the first kernel's 2 ms before its end.
  assert.ok(overlapped.earlyNs > 1_000_000, `with the attribute the second kernel started only ${overlapped.earlyNs} ns before the first ended`);
});
