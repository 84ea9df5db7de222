// Worker for test/device-buffer.test.ts. workerData.mode:
//  'read'       attach workerData.shared, copy it to a JS array on a stream of this thread, post the bytes
//  'hold'       attach workerData.shared, queue a 300 ms spin and then a copy of it to pinned memory on a stream of this
//               thread, post 'queued', wait for the copy, post the bytes (the owner frees meanwhile)
//  'allocate'   allocate on a stream of the shared pool workerData.pool (or, without a StreamPool in this build, on a
//               stream of its own), copy in and out, free, post the bytes read back
import { parentPort, workerData } from 'node:worker_threads';

import * as library from 'cuda-stream-pool';
import { DeviceBuffer, PinnedBuffer, Stream, type SharedDeviceBuffer } from 'cuda-stream-pool';
import { MS, testKernels } from '../support/gpu.js';

const data = workerData as { mode: string; shared?: SharedDeviceBuffer; pool?: unknown; bytes?: number };
const port = parentPort!;

/** The StreamPool of this build, if the pool work has landed (it is written beside the memory work). */
type PoolLike = { getStream(index?: number): Stream };
const StreamPool = (library as unknown as { StreamPool?: { attach(shared: unknown): PoolLike } }).StreamPool;

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
  // TODO(pool): drop the fallback once StreamPool (src/pool.ts) is in every build.
  const pool = StreamPool && data.pool ? StreamPool.attach(data.pool) : undefined;
  const stream = pool ? pool.getStream(1) : Stream.create();
  const bytes = data.bytes!;
  const input = Uint8Array.from({ length: bytes }, (_, i) => (i * 13 + 1) & 0xff);
  const buffer = DeviceBuffer.alloc(bytes, { stream });
  stream.copy(buffer, input);
  const out = new Uint8Array(bytes);
  stream.copy(out, buffer);
  buffer.free();
  await stream.synchronize();
  if (!pool) stream.destroy();
  port.postMessage({ bytes: out, pooled: pool !== undefined });
}
