// Worker for test/gpu/stream/stream.test.ts. workerData.mode:
//  'use'       create a stream, spin, synchronize, report the stream id, exit
//  'sync-loop' call synchronizeSync() on its own streams in a loop until told to stop, report the count
//  'pending'   queue long spins with pending synchronize() promises and report 'queued' (then gets terminated)
//  'block'     attach workerData.shared, spin 1 s on its stream 0, report 'blocking', then synchronizeSync() on it
//              and report { ms } (how long it blocked)
//  'wait-stream' call waitStream() 1 time, then 200 times, and report how many waitStream events the thread holds and
//              how many live events there were
import { parentPort, workerData } from 'node:worker_threads';

import { cuda, Stream, StreamPool, type SharedStreamPool } from 'cuda-stream-pool';
import { native } from '#library/binding/binding.js';
import { MS, testKernels } from '../support/gpu.js';

const { spin } = await testKernels();
const mode = (workerData as { mode: string }).mode;
if (mode === 'use') {
  const stream = Stream.create();
  spin.launch({ grid: 1, block: 1, stream }, 5n * MS, 0n);
  await stream.synchronize();
  parentPort!.postMessage({ id: stream.id.toString(), idle: stream.query() });
  stream.destroy();
} else if (mode === 'sync-loop') {
  const streams = [Stream.create(), Stream.create()];
  let stop = false;
  let count = 0;
  parentPort!.once('message', () => (stop = true)); // once: a listener left on the port would keep the worker alive
  parentPort!.postMessage('started');
  while (!stop) {
    for (const stream of streams) {
      spin.launch({ grid: 1, block: 1, stream }, 1n * MS, 0n);
      stream.synchronizeSync();
      count++;
    }
    await new Promise((resolve) => setImmediate(resolve)); // lets the stop message in
  }
  parentPort!.postMessage({ count });
  for (const stream of streams) stream.destroy();
} else if (mode === 'wait-stream') {
  const [a, b] = [Stream.create(), Stream.create()];
  const before = cuda.liveObjects().events;
  const held = [native.streamWaitEventCount()];
  b.waitStream(a);
  held.push(native.streamWaitEventCount());
  for (let i = 0; i < 200; i++) (i % 2 === 0 ? b : a).waitStream(i % 2 === 0 ? a : b);
  held.push(native.streamWaitEventCount());
  const liveEventsAdded = cuda.liveObjects().events - before;
  b.synchronizeSync();
  a.destroy();
  b.destroy();
  parentPort!.postMessage({ held, liveEventsAdded });
} else if (mode === 'pending') {
  const streams = Array.from({ length: 4 }, () => Stream.create());
  for (const stream of streams) {
    spin.launch({ grid: 1, block: 1, stream }, 500n * MS, 0n);
    void stream.synchronize();
  }
  parentPort!.postMessage('queued');
}
else if (mode === 'block') {
  const pool = StreamPool.attach((workerData as { shared: SharedStreamPool }).shared);
  const stream = pool.getStream(0);
  spin.launch({ grid: 1, block: 1, stream }, 1000n * MS, 0n);
  parentPort!.postMessage('blocking');
  const start = performance.now();
  stream.synchronizeSync();
  parentPort!.postMessage({ ms: performance.now() - start });
}
