// Driver calls that fail, injected by the simulated driver (SIMULATED_DRIVER_FAIL): each call of the library that
// meets a failure throws a typed error naming the driver call, leaves cuda.liveObjects() as it was, lets a later call
// succeed, and never leaves queued work touching memory that was freed or reused (the simulated driver reports any
// such touch on stderr, which simulatedJson() checks).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { benchCli, repositoryRoot } from '../support/paths.js';
import { collectGarbage, failOnce, issuer, needsCompiler, simulatedEnv, simulatedJson } from '../support/simulated-driver.js';

const ptx = `'.version 8.0\\n.target sm_80\\n.address_size 64\\n.visible .entry noop()\\n{\\n ret;\\n}\\n'`;

for (const [what, fail, call, attempt] of [
  ['Stream.create()', 'cuStreamCreateWithPriority:1=CUDA_ERROR_OUT_OF_MEMORY', 'cuStreamCreateWithPriority', 'Stream.create()'],
  ['Event.create()', 'cuEventCreate:1=CUDA_ERROR_OUT_OF_MEMORY', 'cuEventCreate', 'Event.create()'],
  ['DeviceBuffer.alloc()', 'cuMemAllocFromPoolAsync:1=CUDA_ERROR_OUT_OF_MEMORY', 'cuMemAllocFromPoolAsync', 'DeviceBuffer.alloc(4096)'],
  ['PinnedBuffer.alloc()', 'cuMemHostAlloc:1=CUDA_ERROR_OUT_OF_MEMORY', 'cuMemHostAlloc', 'PinnedBuffer.alloc(4096)'],
  ['new StreamPool() failing at its fifth stream', 'cuStreamCreateWithPriority:5=CUDA_ERROR_OUT_OF_MEMORY', 'cuStreamCreateWithPriority', 'new StreamPool({ size: 8 })'],
  // Modules load on a thread of libuv's pool, whichever takes the job: counted over all threads.
  ['Module.load()', 'cuModuleLoadDataEx@any:1=CUDA_ERROR_INVALID_PTX', 'cuModuleLoadDataEx', `Module.load(${ptx})`],
] as const) {
  test(`${what}: a failed ${call} throws a CudaError naming it, leaves the live objects as they were, and a retry succeeds`, needsCompiler, async () => {
    const result = await simulatedJson<{ name: string; code: string; call: string; before: number[]; afterFailure: number[]; retried: boolean }>(
      failOnce('', attempt),
      { fail },
    );
    const code = fail.split('=')[1];
    assert.deepEqual({ name: result.name, code: result.code, call: result.call }, { name: 'CudaError', code, call });
    assert.deepEqual(result.afterFailure, result.before);
    assert.equal(result.retried, true);
  });
}

test('a failure code the driver cannot name keeps its number in the CudaError instead of another code\'s name', needsCompiler, async () => {
  const result = await simulatedJson<{ code: string; result: number; description: string; message: string }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     try { DeviceBuffer.alloc(4096, { stream }); } catch (e) {
       console.log(JSON.stringify({ code: e.code, result: e.result, description: e.description, message: e.message }));
     }`,
    { fail: 'cuMemAllocFromPoolAsync:1=1000' }, // no driver names 1000, and it lies within the CUresult enum's range
  );
  assert.equal(result.code, 'CUresult 1000');
  assert.equal(result.result, 1000);
  assert.equal(result.description, 'the driver has no description of this code');
  assert.match(result.message, /^CUresult 1000: cuMemAllocFromPoolAsync failed on /);
});

test('a free the driver refuses throws a CudaError naming cuMemFreeAsync, and its bytes move from deviceBytes to leakedDeviceBytes', needsCompiler, async () => {
  const result = await simulatedJson<{ name: string; call: string; before: number[]; after: number[]; next: number[] }>(
    `import { cuda, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const bytes = () => { const o = cuda.liveObjects(); return [o.deviceBytes, o.leakedDeviceBytes]; };
     const buffer = DeviceBuffer.alloc(4096, { stream });
     const before = bytes();
     let error;
     try { buffer.free(); } catch (e) { error = e; }
     const after = bytes();
     DeviceBuffer.alloc(8192, { stream }).free(); // the next free is not refused: nothing more leaks
     console.log(JSON.stringify({ name: error?.name, call: error?.call, before, after, next: bytes() }));`,
    { fail: 'cuMemFreeAsync:1=CUDA_ERROR_INVALID_VALUE' },
  );
  assert.deepEqual({ name: result.name, call: result.call }, { name: 'CudaError', call: 'cuMemFreeAsync' });
  assert.deepEqual(result.before, [4096, 0]);
  assert.deepEqual(result.after, [0, 4096]);
  assert.deepEqual(result.next, [0, 4096]);
});

test('a garbage-collected buffer whose free the driver refuses leaks its bytes into leakedDeviceBytes and counts a callback failure naming the call', needsCompiler, async () => {
  const result = await simulatedJson<{ before: number[]; after: number[]; failures: number; last: string }>(
    `${collectGarbage}
     import { cuda, DeviceBuffer, Stream } from 'cuda-stream-pool';
     import { flushNursery } from '#library/binding/native-ref-lifetime.js';
     const stream = Stream.create();
     const bytes = () => { const o = cuda.liveObjects(); return [o.deviceBytes, o.leakedDeviceBytes]; };
     (() => DeviceBuffer.alloc(4096, { stream }))(); // forgotten at once
     flushNursery();
     const before = bytes();
     const failuresBefore = cuda.callbackFailures().count;
     await collectUntil(() => cuda.liveObjects().deviceBytes === 0);
     const { count, last } = cuda.callbackFailures();
     console.log(JSON.stringify({ before, after: bytes(), failures: count - failuresBefore, last }));`,
    { fail: 'cuMemFreeAsync:1=CUDA_ERROR_INVALID_VALUE' },
  );
  assert.deepEqual(result.before, [4096, 0]);
  assert.deepEqual(result.after, [0, 4096]);
  assert.equal(result.failures, 1);
  assert.equal(result.last, 'freeing a garbage-collected DeviceBuffer: cuMemFreeAsync failed with CUDA_ERROR_INVALID_VALUE freeing 4096 bytes on device 0; they stay allocated');
});

// The copy is queued on `busy`, behind slow work; the buffer belongs to `home`, where it is freed at once. The free
// must wait for the queued copy although the call that queued it failed afterwards.
for (const [what, fail, copy] of [
  ['a host-to-device copy through staging whose completion marker fails', 'cuStreamWriteValue64:1=CUDA_ERROR_UNKNOWN', 'busy.copy(buffer, new Uint8Array(65536).fill(7))'],
  ['a device-to-host copy through staging whose completion marker fails', 'cuStreamWriteValue64:1=CUDA_ERROR_UNKNOWN', 'busy.copy(new Uint8Array(65536), buffer, { byteLength: 65536 })'],
  ['a copy from a PinnedBuffer whose fence fails', `cuEventRecord@${issuer}:1=CUDA_ERROR_UNKNOWN`, 'busy.copy(buffer, pinned)'],
  // 7 MiB: device copies of 2, 2, 2 and 1 MiB (neighbouring chunks of one slab, at most 2 MiB a copy)
  ['a staged copy in four parts whose third part fails', 'cuMemcpyHtoDAsync:3=CUDA_ERROR_UNKNOWN', 'busy.copy(buffer, new Uint8Array(7 << 20).fill(7))'],
] as const) {
  test(`${what}: the buffer's free waits for what was queued`, needsCompiler, async () => {
    const result = await simulatedJson<{ code: string }>(
      `import { DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
       const home = Stream.create();
       const busy = Stream.create();
       const buffer = DeviceBuffer.alloc(8 << 20, { stream: home });
       const pinned = PinnedBuffer.alloc(65536);
       const other = DeviceBuffer.alloc(4096, { stream: busy });
       await home.synchronize();
       for (let i = 0; i < 20; i++) busy.fill(other, i); // the copy runs after these
       let code;
       try { ${copy}; } catch (e) { code = e.code; }
       buffer.free();
       // A recorded copy (deferred submission) reports its failure at the next wait instead.
       await busy.synchronize().catch((e) => { code ??= e.code; });
       await home.synchronize();
       console.log(JSON.stringify({ code }));`,
      { fail, operationDelayUs: 5000 },
    );
    assert.equal(result.code, fail.split('=')[1]);
  });
}

test('bench: a launch the driver refuses exits 1 with the CudaError naming the kernel, and no stack trace', needsCompiler, () => {
  const r = spawnSync(process.execPath, [benchCli, 'bench', '--elements', '1024', '--tasks', '8', '--runs', '1', '--mode', 'pool'], {
    cwd: repositoryRoot,
    env: { ...process.env, ...simulatedEnv({ fail: 'cuLaunchKernel@any:3=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES' }) },
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^cuda-stream-pool bench failed: CudaError: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: cuLaunchKernel failed on kernel "\w+"/m);
  assert.doesNotMatch(r.stderr, /^\s+at /m);
});

test('bench --workers 2: a fault in a worker exits 1 with the CudaError and the worker it came from, and no stack trace', needsCompiler, () => {
  const r = spawnSync(process.execPath, [benchCli, 'bench', '--elements', '4096', '--tasks', '64', '--runs', '1', '--mode', 'pool', '--workers', '2'], {
    cwd: repositoryRoot,
    env: { ...process.env, ...simulatedEnv({ fail: 'cuMemcpyDtoHAsync@any:50=fault:CUDA_ERROR_ILLEGAL_ADDRESS' }) },
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /^cuda-stream-pool bench failed: CudaError: CUDA_ERROR_ILLEGAL_ADDRESS: .* \(in worker [12]\)$/m);
  assert.doesNotMatch(r.stderr, /^\s+at /m);
});
