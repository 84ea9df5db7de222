// Worker for test/gpu/stream/completion.test.ts. workerData.mode:
//  'batch'         warms up, posts 'ready', waits for a message, then 16 streams each run a 20 ms spin once a 200 ms
//                  spin on another stream ends; reports the wake-ups and waits delivered to this thread
//  'exit-pending'  queues 300 ms spins with pending synchronize() promises, reports them, then exits at once
import { parentPort, workerData } from 'node:worker_threads';

import { completionStats, cuda, Stream } from 'cuda-stream-pool';
import { MS, spinBehindGate, testKernels } from '../support/gpu.js';

const { spin } = await testKernels();
const mode = (workerData as { mode: string }).mode;
if (mode === 'batch') {
  const streams = Array.from({ length: 16 }, () => Stream.create());
  // The first launch of a kernel in a thread loads it (lazy loading), which can wait for other threads' kernels:
  // warm up, then start together with the other workers.
  spin.launch({ grid: 1, block: 1, stream: streams[0]! }, 0n, 0n);
  streams[0]!.synchronizeSync();
  parentPort!.postMessage('ready');
  await new Promise((resolve) => parentPort!.once('message', resolve));
  const before = completionStats();
  const start = performance.now();
  const gate = spinBehindGate(spin, streams, 20n * MS);
  const launchedMs = performance.now() - start;
  const busy = streams.filter((stream) => !stream.query()).length;
  await Promise.all(streams.map((stream) => stream.synchronize()));
  const after = completionStats();
  parentPort!.postMessage({
    wakeups: after.wakeups - before.wakeups,
    delivered: after.delivered - before.delivered,
    busy,
    launchedMs,
    settledMs: performance.now() - start,
  });
  for (const stream of streams) stream.destroy();
  gate.destroy();
} else if (mode === 'exit-pending') {
  const streams = Array.from({ length: 4 }, () => Stream.create());
  for (const stream of streams) {
    spin.launch({ grid: 1, block: 1, stream }, 300n * MS, 0n);
    void stream.synchronize();
  }
  cuda.flush(); // with deferred submission, the waits reach the poller once their markers are issued
  parentPort!.postMessage({ pending: completionStats().processPending });
  process.exit(0);
}
