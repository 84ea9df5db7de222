// Launch attributes on the simulated driver: launches with thread-block clusters, cooperatively and with programmatic
// dependent launch reach cuLaunchKernelEx and write what a plain launch writes, directly and through deferred
// submission; a cooperative grid larger than the device holds, a device without the features, and a failed
// cuLaunchKernelEx each give their typed error and leave the stream usable.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { issuer, needsCompiler, simulatedJson } from '../support/simulated-driver.js';

const load = `
  import { readFileSync } from 'node:fs';
  import { cuda, Device, DeviceBuffer, Module, Stream } from 'cuda-stream-pool';
  const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
  const fill = tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
  const stream = Stream.create();
  const words = DeviceBuffer.alloc(1024 * 4, { stream });
  stream.fill(words, 0, { elementSize: 4 });
  const outcome = (f) => { try { f(); return 'queued'; } catch (e) { return { name: e.name, code: e.code, message: e.message }; } };`;

for (const submission of ['direct', 'deferred'] as const) {
  test(`with ${submission} submission, launches with a cluster, cooperatively and with programmatic dependent launch each write their words`, needsCompiler, async () => {
    const result = await simulatedJson<{ words: number[]; counts: Record<string, number> }>(
      `${load}
       fill.launch({ grid: 4, block: 64, stream, cluster: 2 }, words, 1, 256);
       fill.launch({ grid: [2, 2], block: 64, stream, cluster: [2, 2], programmaticDependentLaunch: true }, words.subarray(1024), 2, 256);
       fill.launch({ grid: 4, block: 64, stream, cooperative: true }, words.subarray(2048), 3, 256);
       fill.launch({ grid: 4, block: 64, stream, cooperative: false, programmaticDependentLaunch: false }, words.subarray(3072), 4, 256);
       const out = await words.toArray(Uint32Array, { stream });
       const counts = {};
       for (const w of out) counts[w] = (counts[w] ?? 0) + 1;
       console.log(JSON.stringify({ words: [out[0], out[300], out[600], out[1000]], counts }));`,
      { env: { CUDA_STREAM_POOL_SUBMISSION: submission } },
    );
    // The 2×2 grid of 64 threads covers 256 words in x only (the kernel indexes by x): 128 threads, 128 words.
    assert.deepEqual(result.words, [1, 2, 3, 4]);
    assert.deepEqual(result.counts, { 0: 128, 1: 256, 2: 128, 3: 256, 4: 256 });
  });

  test(`with ${submission} submission, a cooperative grid larger than the device holds is CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE at the call, naming the limit`, needsCompiler, async () => {
    // The simulated device holds 2048 threads on each of its 132 multiprocessors: 8 blocks of 256, 1056 in all.
    const result = await simulatedJson<{ refused: { name: string; code: string; message: string }; fits: string; after: number }>(
      `${load}
       const refused = outcome(() => fill.launch({ grid: 1057, block: 256, stream, cooperative: true }, words, 9, 1024));
       const fits = outcome(() => fill.launch({ grid: 1056, block: 256, stream, cooperative: true }, words, 5, 1024));
       const after = (await words.toArray(Uint32Array, { stream }))[1023];
       console.log(JSON.stringify({ refused, fits, after }));`,
      { env: { CUDA_STREAM_POOL_SUBMISSION: submission } },
    );
    assert.equal(result.refused.name, 'CudaError');
    assert.equal(result.refused.code, 'CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE');
    assert.match(result.refused.message, /^CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: cuLaunchKernelEx failed on kernel "fill_u32" with grid \[1057, 1, 1\], block \[256, 1, 1\] \(256 threads\) and 0 bytes of dynamic shared memory, cooperative, on device 0/);
    assert.match(result.refused.message, /a cooperative launch of this block size has room for at most 1056 blocks at once/);
    assert.equal(result.fits, 'queued');
    assert.equal(result.after, 5);
  });
}

test('a device without clusters, cooperative launch or compute capability 9.0 refuses each with an UnsupportedError naming the feature; plain launches still work', needsCompiler, async () => {
  const result = await simulatedJson<{ device: unknown; refused: { name: string; code: string; message: string }[]; last: number }>(
    `${load}
     const device = Device.get(0);
     const refused = [
       outcome(() => fill.launch({ grid: 2, block: 32, stream, cluster: 2 }, words, 1, 64)),
       outcome(() => fill.launch({ grid: 2, block: 32, stream, cooperative: true }, words, 1, 64)),
       outcome(() => fill.launch({ grid: 2, block: 32, stream, programmaticDependentLaunch: true }, words, 1, 64)),
     ];
     fill.launch({ grid: 2, block: 32, stream, cooperative: false }, words, 6, 64);
     const last = (await words.toArray(Uint32Array, { stream }))[63];
     console.log(JSON.stringify({ device: { major: device.computeCapability.major, clusterLaunch: device.clusterLaunch, cooperativeLaunch: device.cooperativeLaunch }, refused, last }));`,
    { env: { SIMULATED_DRIVER_NO_LAUNCH_ATTRIBUTES: '1' } },
  );
  assert.deepEqual(result.device, { major: 8, clusterLaunch: false, cooperativeLaunch: false });
  assert.deepEqual(
    result.refused.map((r) => [r.name, r.code]),
    [['UnsupportedError', 'ERR_CUDA_UNSUPPORTED'], ['UnsupportedError', 'ERR_CUDA_UNSUPPORTED'], ['UnsupportedError', 'ERR_CUDA_UNSUPPORTED']],
  );
  assert.equal(result.refused[0]!.message, 'thread-block clusters is not supported on device 0: it has compute capability 8.0; clusters need 9.0 or later (CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH is 0).');
  assert.equal(result.refused[1]!.message, 'cooperative launch is not supported on device 0: CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0.');
  assert.equal(result.refused[2]!.message, 'programmatic dependent launch is not supported on device 0: it has compute capability 8.0; programmatic dependent launch needs 9.0 or later.');
  assert.equal(result.last, 6);
});

test('a failed cuLaunchKernelEx is a CudaError naming the call and the attributes; the stream goes on', needsCompiler, async () => {
  const result = await simulatedJson<{ code: string; message: string; last: number }>(
    `${load}
     let error;
     try { fill.launch({ grid: 4, block: 32, stream, cluster: 2, programmaticDependentLaunch: true }, words, 8, 128); } catch (e) { error = e; }
     // A recorded launch (deferred submission) reports its failure at the next wait instead.
     await stream.synchronize().catch((e) => { error ??= e; });
     fill.launch({ grid: 4, block: 32, stream, cluster: 2 }, words, 7, 128);
     const last = (await words.toArray(Uint32Array, { stream }))[127];
     console.log(JSON.stringify({ code: error?.code, message: error?.message, last }));`,
    { fail: `cuLaunchKernelEx@${issuer}:1=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES` },
  );
  assert.equal(result.code, 'CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES');
  assert.match(result.message, /cuLaunchKernelEx failed on kernel "fill_u32" with grid \[4, 1, 1\], block \[32, 1, 1\] \(32 threads\) and 0 bytes of dynamic shared memory, clusters of \[2, 1, 1\] blocks, programmatic dependent launch, on device 0/);
  assert.equal(result.last, 7);
});
