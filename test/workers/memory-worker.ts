// Worker for test/gpu/memory/device-buffer.test.ts. workerData.mode:
//  'read'       attach workerData.shared, copy it to a JS array on a stream of this thread, post the bytes
//  'hold'       attach workerData.shared, queue a 300 ms spin and then a copy of it to pinned memory on a stream of this
//               thread, post 'queued', wait for the copy, post the bytes (the owner frees meanwhile)
//  'allocate'   allocate on a stream of the shared pool workerData.pool, copy in and out, free, post the bytes read
//               back
import { parentPort, workerData } from 'node:worker_threads';

import { DeviceBuffer, PinnedBuffer, Stream, StreamPool, type SharedDeviceBuffer, type SharedStreamPool } from 'cuda-stream-pool';
import { MS, testKernels } from '../support/gpu.js';

const data = workerData as { mode: string; shared?: SharedDeviceBuffer; pool?: SharedStreamPool; bytes?: number };
const port = parentPort!;

if (data.mode === 'read') {
  const stream = Stream.create();
  const view = DeviceBuffer.attach(data.shared!, { stream });
  const out = new Uint8Array(view.byteLength);
  stream.copy(out, view);
  await stream.synchronize();
  view.free();
  stream.destroy();
  port.postMessage({ bytes: out, borrowed: view.borrowed });
} else if (data.mode === 'hold') {
  const { spin } = await testKernels();
  const stream = Stream.create();
  const view = DeviceBuffer.attach(data.shared!, { stream });
  const pinned = PinnedBuffer.alloc(view.byteLength);
  spin.launch({ grid: 1, block: 1, stream }, 300n * MS, 0n);
  stream.copy(pinned, view);
  port.postMessage('queued');
  await stream.synchronize();
  port.postMessage({ bytes: pinned.bytes.slice() });
  pinned.free();
  stream.destroy();
} else if (data.mode === 'allocate') {
  const pool = StreamPool.attach(data.pool!);
  const stream = pool.getStream(1);
  const bytes = data.bytes!;
  const input = Uint8Array.from({ length: bytes }, (_, i) => (i * 13 + 1) & 0xff);
  const buffer = DeviceBuffer.alloc(bytes, { stream });
  stream.copy(buffer, input);
  const out = new Uint8Array(bytes);
  stream.copy(out, buffer);
  buffer.free();
  await stream.synchronize();
  pool.destroy(); // detaches this thread only
  port.postMessage({ bytes: out });
}
