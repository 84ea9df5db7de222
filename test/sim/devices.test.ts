// Two simulated devices, whose driver refuses work queued on a stream while another device's context is current:
// every call of the library makes the right context current for each driver call it makes, and leaves its device's
// context current afterwards.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('pinned blocks fenced on device 1 and reused by a copy on device 0: the copy runs under device 0\'s context', needsCompiler, async () => {
  // The pinned cache checks the fences of retiring blocks when it hands one out; those fences are device 1's events.
  const result = await simulatedJson<{ current: number; values: number[] }>(
    `import { DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
     import { native } from '#library/binding/binding.js';
     const [zero, one] = [Stream.create({ device: 0 }), Stream.create({ device: 1 })];
     const onOne = DeviceBuffer.alloc(1 << 16, { stream: one });
     for (let i = 0; i < 4; i++) {
       const pinned = PinnedBuffer.alloc(1 << 16);
       one.copy(onOne, pinned);
       pinned.free(); // retiring, fenced by an event of device 1
     }
     await one.synchronize();
     const onZero = DeviceBuffer.alloc(1 << 16, { stream: zero });
     zero.fill(onZero, 4);
     const pinned = PinnedBuffer.alloc(1 << 16); // collects the retiring blocks
     const current = native.currentDevice();
     zero.copy(pinned, onZero);
     await zero.synchronize();
     console.log(JSON.stringify({ current, values: [...new Set(pinned.bytes)] }));`,
    { devices: 2, operationDelayUs: 200 },
  );
  assert.deepEqual(result, { current: 0, values: [4] });
});
