// A failed query of the library's own marker event (not sticky) is asked again, not taken as the end of the copy
// before it: a copy into a JS array still lands before the wait that follows it resolves. Found by the fault sweep
// (test/fault-sweep): the landing was dropped and toArray() resolved with the array's zeros.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, runSimulated, simulatedJson } from '../support/simulated-driver.js';

for (const [what, fail] of [
  ["the poller's first cuEventQuery fails", 'cuEventQuery@csp-poller:1=CUDA_ERROR_OUT_OF_MEMORY'],
  ["the poller's first three cuEventQuery calls fail", 'cuEventQuery@csp-poller:1=CUDA_ERROR_OUT_OF_MEMORY,cuEventQuery@csp-poller:2=CUDA_ERROR_INVALID_VALUE,cuEventQuery@csp-poller:3=CUDA_ERROR_OUT_OF_MEMORY'],
] as const) {
  test(`event markers: when ${what}, toArray() still resolves with the bytes the device holds`, needsCompiler, async () => {
    const run = await runSimulated(
      `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
       const stream = Stream.create();
       const buffer = DeviceBuffer.alloc(4096, { stream });
       stream.fill(buffer, 6);
       let result;
       try {
         const bytes = await buffer.toArray(Uint8Array, { stream });
         result = bytes.every((b) => b === 6) ? 'landed' : 'resolved without the bytes';
       } catch (e) {
         result = e.code;
       }
       buffer.free();
       stream.destroy();
       console.log(JSON.stringify({ result }));`,
      { fail, operationDelayUs: 2000, env: { SIMULATED_DRIVER_NO_64_BIT_MEMORY_OPERATIONS: '1', SIMULATED_DRIVER_TRACE: '1' } },
    );
    assert.equal(run.code, 0, run.stderr);
    // The trace shows that the failure was met; no other line of the driver's (a misuse) may appear.
    const lines = run.stderr.split('\n').filter((line) => line.startsWith('simulated driver:'));
    assert.ok(lines.some((line) => line.includes('injected into call 1 of cuEventQuery on csp-poller/1')), run.stderr);
    assert.deepEqual(lines.filter((line) => !/injected into call|calls the driver/.test(line)), []);
    assert.equal(JSON.parse(run.stdout.trim()).result, 'landed');
  });
}

test('event markers: a query that keeps failing ends the wait with its error instead of hanging', needsCompiler, async () => {
  const result = await simulatedJson<{ result: string }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(4096, { stream });
     stream.fill(buffer, 6);
     const result = await stream.synchronize().then(() => 'resolved', (e) => e.code);
     buffer.free();
     stream.destroy();
     console.log(JSON.stringify({ result }));`,
    { fail: 'cuEventQuery@csp-poller:1+=CUDA_ERROR_OUT_OF_MEMORY', operationDelayUs: 2000, env: { SIMULATED_DRIVER_NO_64_BIT_MEMORY_OPERATIONS: '1' } },
  );
  assert.equal(result.result, 'CUDA_ERROR_OUT_OF_MEMORY');
});

// A copy into a JS array of more than one part (each part lands once its marker is done) asks its part markers the
// same way: one failed query used to end the copy at once, leaving the array unwritten with no error and handing its
// staging back while the device was still writing it.
test('event markers: when the first query of a copy part fails, the copy into a JS array still lands', needsCompiler, async () => {
  const result = await simulatedJson<{ result: string; wrong: number }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const bytes = 5 << 20;
     const buffer = DeviceBuffer.alloc(bytes, { stream });
     stream.fill(buffer, 0x5a);
     const destination = new Uint8Array(bytes).fill(0x11);
     stream.copy(destination, buffer);
     const result = await stream.synchronize().then(() => 'resolved', (e) => e.code);
     const wrong = destination.reduce((count, value) => count + (value !== 0x5a), 0);
     buffer.free();
     stream.destroy();
     console.log(JSON.stringify({ result, wrong }));`,
    {
      fail: 'cuEventQuery@csp-poller:1=CUDA_ERROR_UNKNOWN',
      env: { CUDA_STREAM_POOL_COMPLETION: 'event', SIMULATED_DRIVER_COPY_BYTES_PER_US: '500' },
    },
  );
  assert.deepEqual(result, { result: 'resolved', wrong: 0 });
});

// When the queries of a streamed copy's markers keep failing (short of a fault), the copy into the JS array ends
// without landing: the array keeps its bytes, and the stream's next wait reports the failure instead of resolving as
// if the copy had landed.
test('a copy into a JS array whose markers cannot be asked reports its failure at the next wait', needsCompiler, async () => {
  const result = await simulatedJson<{ wait: string; untouched: boolean }>(
    `import { CudaError, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const bytes = 5 << 20;
     const buffer = DeviceBuffer.alloc(bytes, { stream });
     stream.synchronizeSync();
     const destination = new Uint8Array(bytes).fill(0x11);
     stream.copy(destination, buffer);
     const wait = await stream.synchronize().then(
       () => 'resolved',
       (e) => (e instanceof CudaError ? e.code + ': ' + e.message : 'not a CudaError: ' + e),
     );
     console.log(JSON.stringify({ wait, untouched: destination.every((value) => value === 0x11) }));
     process.exit(0);`,
    {
      fail: 'cuEventQuery@csp-poller:1+=CUDA_ERROR_UNKNOWN',
      env: { CUDA_STREAM_POOL_STAGING_BYTES: String(1 << 20) },
    },
  );
  assert.equal(result.untouched, true);
  assert.match(result.wait, /^CUDA_ERROR_UNKNOWN: .*a copy of 5242880 bytes from device memory into a JS array/);
});

// A copy into a JS array through a temporary pinned block (staging too small, and no stream memory operations to
// stream it) whose marker cannot be asked ends without landing; the device may still be writing the block, so it
// never goes back to the pinned cache (it was let go with the landing, and the cache took it back unfenced).
test('the pinned block of a failed copy into a JS array is not reused', needsCompiler, async () => {
  const result = await simulatedJson<{ wait: string; idleBytes: number; totalBytes: number; untouched: boolean }>(
    `import { DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const bytes = 1 << 20;
     const buffer = DeviceBuffer.alloc(bytes, { stream });
     stream.fill(buffer, 3);
     stream.synchronizeSync();
     const destination = new Uint8Array(bytes).fill(0xaa);
     stream.copy(destination, buffer);
     const wait = await stream.synchronize().then(() => 'resolved', (e) => e.code);
     await new Promise((resolve) => setTimeout(resolve, 300));
     const { idleBytes, totalBytes } = PinnedBuffer.cacheInfo();
     console.log(JSON.stringify({ wait, idleBytes, totalBytes, untouched: destination.every((v) => v === 0xaa) }));
     process.exit(0);`,
    {
      fail: 'cuEventQuery@csp-poller:1+=CUDA_ERROR_UNKNOWN',
      // Long enough that the stream is still busy when the wait begins, so that only the failing queries can end it.
      operationDelayUs: 20000,
      env: { CUDA_STREAM_POOL_STAGING_BYTES: String(256 << 10), SIMULATED_DRIVER_NO_64_BIT_MEMORY_OPERATIONS: '1' },
    },
  );
  assert.deepEqual(result, { wait: 'CUDA_ERROR_UNKNOWN', idleBytes: 0, totalBytes: 1 << 20, untouched: true });
});
