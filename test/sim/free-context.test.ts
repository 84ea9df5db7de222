// A free of a buffer used on two devices' streams meets a failed cuCtxSetCurrent: the free reports the driver's own
// result, and the next free of such a buffer works. Found by the fault sweep (test/fault-sweep): when making the
// buffer's device current again failed, the device's library stream was made in the other device's context, and
// every later free through it failed with CUDA_ERROR_INVALID_CONTEXT from cuStreamWaitEvent.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

// Eight cuCtxSetCurrent calls come before the first free: the free makes device 0 current (9), device 1 for the
// peer copy's stream (10), and device 0 again before it reaches for the library stream (11).
for (const call of [9, 10, 11]) {
  test(`a free whose cuCtxSetCurrent call ${call} fails throws that failure, and a later free works`, needsCompiler, async () => {
    const result = await simulatedJson<{ first: string; second: string }>(
      `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
       const s0 = Stream.create({ device: 0 });
       const s1 = Stream.create({ device: 1 });
       const make = () => {
         const a = DeviceBuffer.alloc(4096, { stream: s0 });
         const b = DeviceBuffer.alloc(4096, { stream: s1 });
         s1.copy(b, a); // a is used on device 1's stream: its free goes through device 0's library stream
         return [a, b];
       };
       const [a, b] = make();
       const [c, d] = make();
       await Promise.all([s0.synchronize(), s1.synchronize()]);
       let first = 'freed';
       try { a.free(); } catch (e) { first = e.code + ' ' + e.call; }
       let second = 'freed';
       try { c.free(); } catch (e) { second = e.code + ' ' + e.call; }
       b.free();
       d.free();
       await Promise.all([s0.synchronize(), s1.synchronize()]);
       s0.destroy();
       s1.destroy();
       console.log(JSON.stringify({ first, second }));`,
      { devices: 2, operationDelayUs: 100, fail: `cuCtxSetCurrent:${call}=CUDA_ERROR_OUT_OF_MEMORY` },
    );
    assert.deepEqual(result, { first: 'CUDA_ERROR_OUT_OF_MEMORY cuCtxSetCurrent', second: 'freed' });
  });
}
