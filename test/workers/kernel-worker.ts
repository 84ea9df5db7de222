// Worker for test/gpu/kernel/kernel.test.ts: borrows the stream the main thread created (by its handle), compiles a kernel with
// NVRTC, launches it on that stream, and reports the values it wrote and the stream's id.
// When StreamPool lands (packages/cuda-stream-pool/src/pool/pool.ts), this takes a SharedStreamPool and uses pool.getStream(index) instead.
import { parentPort, workerData } from 'node:worker_threads';

import { DeviceBuffer, Program, Stream } from 'cuda-stream-pool';

const { handle } = workerData as { handle: bigint };
try {
  const stream = Stream.fromHandle(handle, 0);
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
  stream.destroy(); // borrowed: retires this wrapper only
  parentPort!.postMessage({ ok: true, values: [...values], streamId });
} catch (error) {
  parentPort!.postMessage({ ok: false, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
}
