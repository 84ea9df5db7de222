// The simulated driver's memory pools: a stream-ordered free returns its block to the device's pool, the next
// allocation that fits reuses it with the bytes it held (as a GPU's pool does: a buffer's first read can show another
// task's data), and the reserved and used counters follow, down to a trim.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('a freed block is reused with its old bytes, and the pool counts and trims what it reserves', needsCompiler, async () => {
  const result = await simulatedJson(
    `import { Device, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const pool = Device.get(0).memoryPool;
     pool.releaseThresholdBytes = Infinity; // else a synchronizing call gives the freed block back
     const stream = Stream.create();
     const bytes = 1 << 20;
     const first = DeviceBuffer.alloc(bytes, { stream });
     const fresh = [...new Set(await first.toArray(Uint8Array, { stream }))];
     const usedWhileLive = pool.usedBytes;
     stream.fill(first, 0x11);
     first.free();
     await stream.synchronize();
     const afterFree = { used: usedWhileLive - pool.usedBytes, reserved: pool.reservedBytes >= bytes };
     const second = DeviceBuffer.alloc(bytes, { stream });
     const reused = [...new Set(await second.toArray(Uint8Array, { stream }))];
     second.free();
     await stream.synchronize();
     pool.trim(0);
     console.log(JSON.stringify({ fresh, afterFree, reused, reservedAfterTrim: pool.reservedBytes }));`,
  );
  assert.deepEqual(result, {
    fresh: [0xa5], // never-used memory holds the simulator's fill pattern
    afterFree: { used: 1 << 20, reserved: true },
    reused: [0x11], // the first buffer's bytes
    reservedAfterTrim: 0,
  });
});
