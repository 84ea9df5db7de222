// Many waits can share one AbortSignal (a request's signal for all its waits). Its abort rejects the pending ones with
// its reason and leaves the settled ones alone; Node.js is not made to warn of a listener leak, which one listener
// per wait did from the 11th wait on.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, runSimulated } from '../support/simulated-driver.js';

test('100 waits on one AbortSignal: the abort rejects the pending ones with its reason, and Node.js prints no warning', needsCompiler, async () => {
  const run = await runSimulated(
    `import { DeviceBuffer, Event, PinnedBuffer, Stream } from 'cuda-stream-pool';
     const [quick, slow] = [Stream.create(), Stream.create()];
     const source = PinnedBuffer.alloc(1 << 20), target = DeviceBuffer.alloc(1 << 20, { stream: slow });
     const controller = new AbortController();
     const reason = new Error('request cancelled');
     quick.fill(DeviceBuffer.alloc(16, { stream: quick }), 1);
     const early = Array.from({ length: 50 }, () => quick.synchronize({ signal: controller.signal }));
     await Promise.all(early); // settled before the abort, which must leave them resolved
     slow.copy(target, source); // about 350 ms
     const event = Event.create();
     event.record(slow);
     const late = [
       ...Array.from({ length: 40 }, () => slow.synchronize({ signal: controller.signal })),
       ...Array.from({ length: 10 }, () => event.synchronize({ signal: controller.signal })),
     ];
     const outcomes = Promise.allSettled(late);
     setTimeout(() => controller.abort(reason), 20);
     const settled = await outcomes;
     const rejectedWithReason = settled.filter((o) => o.status === 'rejected' && o.reason === reason).length;
     const after = await slow.synchronize({ signal: new AbortController().signal }).then(() => 'resolved');
     console.log(JSON.stringify({ rejectedWithReason, after }));`,
    { env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '3' } },
  );
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout.trim()), { rejectedWithReason: 50, after: 'resolved' });
  assert.doesNotMatch(run.stderr, /MaxListenersExceededWarning|Warning/, run.stderr);
});

test('30 pool.acquire() and 20 device.synchronize() on one AbortSignal: the abort rejects them all, with no warning', needsCompiler, async () => {
  const run = await runSimulated(
    `import { Device, DeviceBuffer, PinnedBuffer, StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 1 });
     const held = await pool.acquire();
     const source = PinnedBuffer.alloc(1 << 20), target = DeviceBuffer.alloc(1 << 20, { stream: held.stream });
     held.stream.copy(target, source); // about 350 ms, so that the device is busy when the signal aborts
     const controller = new AbortController();
     const reason = new Error('request cancelled');
     const waits = [
       ...Array.from({ length: 30 }, () => pool.acquire({ signal: controller.signal })),
       ...Array.from({ length: 20 }, () => Device.get(0).synchronize({ signal: controller.signal })),
     ];
     const outcomes = Promise.allSettled(waits);
     setTimeout(() => controller.abort(reason), 20);
     const rejectedWithReason = (await outcomes).filter((o) => o.status === 'rejected' && o.reason === reason).length;
     held.release();
     const again = await pool.acquire({ signal: new AbortController().signal });
     again.release();
     await pool.destroy();
     console.log(JSON.stringify({ rejectedWithReason }));`,
    { env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '3' } },
  );
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout.trim()), { rejectedWithReason: 50 });
  assert.doesNotMatch(run.stderr, /MaxListenersExceededWarning|Warning/, run.stderr);
});
