// A completion ticket that never lands on a stream destroyed while its wait is pending: the poller asks the stream
// whether it is idle, which needs the stream's driver handle. Found by the fault sweep (graphs workload, a lost
// ticket): the handle was released by destroy(), the stream could not be asked, and the wait, and with it the
// process, stayed pending for good. A pending wait now keeps the handle until it settles.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('a lost ticket on a stream destroyed while its wait is pending: the wait settles, and the stream is released after it', needsCompiler, async () => {
  const result = await simulatedJson<{ settled: string; aliveWhilePending: number; aliveAfter: number; lost: boolean }>(
    `import { completionStats, cuda, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(4096, { stream });
     stream.fill(buffer, 1);
     const wait = stream.synchronize().then(() => 'resolved', (e) => e.code);
     stream.destroy();
     const aliveWhilePending = cuda.liveObjects().streams;
     const timeout = new Promise((resolve) => setTimeout(() => resolve('still pending after 3 s'), 3000).unref());
     const settled = await Promise.race([wait, timeout]);
     buffer.free();
     console.log(JSON.stringify({ settled, aliveWhilePending, aliveAfter: cuda.liveObjects().streams, lost: completionStats().lostTickets > 0 }));`,
    { fail: 'cuStreamWriteValue64@any:1+=lost', operationDelayUs: 500 },
  );
  assert.equal(result.settled, 'resolved');
  assert.equal(result.lost, true, 'the ticket was lost, and found lost');
  assert.equal(result.aliveWhilePending, 1, 'the destroyed stream\'s handle is kept while its wait is pending');
  assert.equal(result.aliveAfter, 0, 'and released once the wait settled');
});
