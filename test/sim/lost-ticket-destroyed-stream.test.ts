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

// A streamed copy that takes a staging chunk whose last copy ran on another stream waits for that copy's marker. With
// the marker's ticket lost and that stream destroyed, the stream could not be asked whether it was idle, and the
// streamed copy (and its stream, held at its gate) waited for good. The stream was synchronized after the copy:
// that is remembered past its destroy, and settles the chunk.
test('a streamed copy behind a chunk whose marker was lost on a stream since synchronized and destroyed goes on', needsCompiler, async () => {
  const result = await simulatedJson<{ settled: string; wrong: number }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const chunk = 256 << 10;
     const first = Stream.create(), second = Stream.create();
     const x = DeviceBuffer.alloc(chunk, { stream: first });
     const y = DeviceBuffer.alloc(2 * chunk, { stream: second });
     first.synchronizeSync();
     second.synchronizeSync();
     first.copy(x, new Uint8Array(chunk).fill(1)); // through the only chunk; its marker's ticket is lost
     first.synchronizeSync();
     first.destroy();
     second.copy(y, new Uint8Array(2 * chunk).fill(2)); // streamed through that chunk
     const timeout = new Promise((resolve) => setTimeout(() => resolve('still pending after 3 s'), 3000).unref());
     const settled = await Promise.race([second.synchronize().then(() => 'settled'), timeout]);
     const back = new Uint8Array(2 * chunk);
     if (settled === 'settled') {
       second.copy(back, y);
       second.synchronizeSync();
     }
     console.log(JSON.stringify({ settled, wrong: back.reduce((count, value) => count + (value !== 2), 0) }));
     process.exit(0);`,
    { fail: 'cuStreamWriteValue64:1=lost', env: { CUDA_STREAM_POOL_STAGING_BYTES: String(256 << 10) } },
  );
  assert.deepEqual(result, { settled: 'settled', wrong: 0 });
});
