// Worker for test/gpu/graph/graph.test.ts: attaches to a pool shared by the main thread, whose stream 0 the main thread is
// capturing under a lease, and reports what query() and synchronize() of its getStream(0) wrapper threw.
// workerData: { shared }. Posts { errors: [{ name, code, operation, streamId }] } (streamId as a string).
import { parentPort, workerData } from 'node:worker_threads';

import { CaptureError, StreamPool, type SharedStreamPool } from 'cuda-stream-pool';

const pool = StreamPool.attach((workerData as { shared: SharedStreamPool }).shared);
const stream = pool.getStream(0);
const errors: unknown[] = [];
const note = (error: unknown) =>
  errors.push(
    error instanceof CaptureError
      ? { name: error.name, code: error.code, operation: error.operation, streamId: String(error.streamId) }
      : { name: (error as Error).name, message: (error as Error).message },
  );
try {
  stream.query();
} catch (error) {
  note(error);
}
await stream.synchronize().catch(note);
pool.destroy();
parentPort!.postMessage({ errors });
