// The fault sweep's worker (workloads/pool.ts): attaches the shared pool and buffer, fills the buffer on a pool
// stream, copies it back, detaches, and posts what it read or the error it met.
import { parentPort, workerData } from 'node:worker_threads';

import { describeError } from './workload.js';
import { DeviceBuffer, StreamPool, type SharedDeviceBuffer, type SharedStreamPool } from 'cuda-stream-pool';

const { pool: sharedPool, buffer: sharedBuffer } = workerData as { pool: SharedStreamPool; buffer: SharedDeviceBuffer };

let pool: StreamPool | undefined;
let buffer: DeviceBuffer | undefined;
try {
  pool = StreamPool.attach(sharedPool);
  const stream = pool.getStream(1);
  buffer = DeviceBuffer.attach(sharedBuffer, { stream });
  stream.fill(buffer, 0x3c);
  const bytes = await buffer.toArray(Uint8Array, { stream });
  parentPort!.postMessage({ bytes });
} catch (error) {
  parentPort!.postMessage({ error: describeError(error) });
} finally {
  try {
    buffer?.free();
  } finally {
    pool?.destroy();
  }
}
