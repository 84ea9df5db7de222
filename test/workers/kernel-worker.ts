// Worker for test/kernel.test.ts: attaches the shared pool it is given, compiles a kernel with NVRTC, launches it on
// the pool stream at workerData.index, and reports the values it wrote and the stream's id.
import { parentPort, workerData } from 'node:worker_threads';

import { DeviceBuffer, Program, StreamPool, type SharedStreamPool } from 'cuda-stream-pool';

const { pool: shared, index } = workerData as { pool: SharedStreamPool; index: number };
try {
  const pool = StreamPool.attach(shared);
  const stream = pool.getStream(index);
  const module = await Program.compile(
    'extern "C" __global__ void answer(unsigned int* out, unsigned int n) { if (threadIdx.x < n) out[threadIdx.x] = 42u; }',
    { name: 'worker.cu' },
  );
  const answer = module.getFunction('answer', ['ptr', 'u32']);
  const out = DeviceBuffer.alloc(16, { stream });
  answer.launch({ grid: 1, block: 32, stream }, out, 4);
  const values = new Uint32Array(4);
  stream.copy(values, out, { byteLength: 16 });
  await stream.synchronize();
  out.free({ stream });
  await stream.synchronize();
  module.unload();
  const streamId = String(stream.id);
  pool.destroy(); // on an attached pool: detaches this thread only
  parentPort!.postMessage({ ok: true, values: [...values], streamId });
} catch (error) {
  parentPort!.postMessage({ ok: false, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
}
