// A completion ticket that never lands on the per-thread default stream: the poller cannot ask that stream whether it
// is idle (CU_STREAM_PER_THREAD would name its own), so it asks the wait's thread, and the wait settles once the
// stream is idle, as on any other stream. Found by the fault sweep (test/fault-sweep): the wait never settled.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('a lost ticket on the per-thread default stream: the wait settles once the stream is idle, and a staged copy lands', needsCompiler, async () => {
  const result = await simulatedJson<{ settled: string; landed: boolean; lost: boolean }>(
    `import { completionStats, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const own = Stream.create();
     const buffer = DeviceBuffer.alloc(4096, { stream: own });
     await own.synchronize();
     const stream = Stream.perThread();
     stream.fill(buffer, 1);
     const destination = new Uint8Array(4096);
     stream.copy(destination, buffer);
     const timeout = new Promise((resolve) => setTimeout(() => resolve('still pending after 3 s'), 3000).unref());
     const settled = await Promise.race([stream.synchronize().then(() => 'resolved', (e) => e.code), timeout]);
     buffer.free();
     await own.synchronize();
     own.destroy();
     console.log(JSON.stringify({ settled, landed: destination.every((b) => b === 1), lost: completionStats().lostTickets > 0 }));`,
    { fail: 'cuStreamWriteValue64:1+=lost', operationDelayUs: 500 },
  );
  assert.deepEqual(result, { settled: 'resolved', landed: true, lost: true });
});
