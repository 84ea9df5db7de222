// The completion poller's thread cannot start (CUDA_STREAM_POOL_FAIL_THREAD_START=csp-poller, a test seam that fails
// that thread's pthread_create as if the system had no thread left): waits reject with an error that says so instead
// of hanging, nothing they held is kept, and a streamed copy that nothing can feed opens its gates, so its stream is
// not left waiting forever.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('without a poller thread, waits and staged copies reject at once, hold nothing, and no stream is wedged', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, unknown>>(
    `import { completionStats, cuda, DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(4 << 20, { stream });
     for (let i = 0; i < 100; i++) stream.fill(buffer, 1); // 200 ms of work: the waits below find it pending
     const message = (e) => e.code + ': ' + e.message;
     const wait = await stream.synchronize().then(() => 'resolved', message);
     const event = Event.create();
     event.record(stream);
     const eventWait = await event.synchronize().then(() => 'resolved', message);
     // The upload is streamed (larger than the staging cap) and abandoned, keeping its chunks; the download then
     // goes through a pinned block, whose landing cannot be watched either.
     let upload = 'copied';
     try { stream.copy(buffer, new Uint8Array(4 << 20).fill(2)); } catch (e) { upload = message(e); }
     let download = 'copied';
     try { stream.copy(new Uint8Array(4 << 20), buffer); } catch (e) { download = message(e); }
     const started = performance.now();
     stream.synchronizeSync(); // returns: the streamed copies' gates were opened
     const syncMs = performance.now() - started;
     event.destroy();
     buffer.free();
     stream.destroy();
     await new Promise((resolve) => setTimeout(resolve, 50));
     console.log(JSON.stringify({ wait, eventWait, download, upload, syncBelow1s: syncMs < 1000,
       pending: completionStats().processPending, events: cuda.liveObjects().events }));`,
    { operationDelayUs: 2000, env: { CUDA_STREAM_POOL_FAIL_THREAD_START: 'csp-poller', CUDA_STREAM_POOL_STAGING_BYTES: String(1 << 20) } },
  );
  const refused = 'EAGAIN: cuda-stream-pool could not start its completion poller thread, so nothing can wait for GPU work without blocking: Resource temporarily unavailable';
  assert.deepEqual(result, {
    wait: refused, eventWait: refused, download: refused, upload: refused, syncBelow1s: true, pending: 0, events: 0,
  });
});

test('without a device synchronizer thread, device.synchronize() rejects each time, naming it, and nothing waits', needsCompiler, async () => {
  const result = await simulatedJson<string[]>(
    `import { Device } from 'cuda-stream-pool';
     const device = Device.get(0);
     const outcomes = [];
     for (let i = 0; i < 2; i++) outcomes.push(await device.synchronize().then(() => 'resolved', (e) => e.code + ': ' + e.message));
     console.log(JSON.stringify(outcomes));`,
    { env: { CUDA_STREAM_POOL_FAIL_THREAD_START: 'csp-synchronize' } },
  );
  const refused = 'EAGAIN: cuda-stream-pool could not start the synchronizer thread of device 0, which serves device.synchronize(): Resource temporarily unavailable';
  assert.deepEqual(result, [refused, refused]);
});
