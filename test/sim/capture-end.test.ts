// A failed end of a capture leaves the stream usable: where the driver's failure left the stream capturing, the
// library ends the capture once more, so that later work on the stream runs instead of failing (found by the fault
// sweep: the next free on the stream failed with a capture error).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('after cuStreamEndCapture fails, the stream is not capturing and its later work runs', needsCompiler, async () => {
  const result = await simulatedJson(
    `import { cuda, CudaError, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const stream = Stream.create();
     const start = cuda.liveObjects().graphs;
     stream.beginCapture();
     stream.fill(DeviceBuffer.alloc(64, { stream: Stream.create() }), 0); // not on the capturing stream
     let thrown;
     try { stream.endCapture(); } catch (error) { thrown = error instanceof CudaError ? error.code : String(error); }
     const buffer = DeviceBuffer.from(new Uint32Array(16).fill(7), { stream });
     const out = await buffer.toArray(Uint32Array, { stream });
     buffer.free();
     await stream.synchronize();
     console.log(JSON.stringify({ thrown, capturing: stream.capturing, out: [...new Set(out)], graphs: cuda.liveObjects().graphs - start }));`,
    { fail: 'cuStreamEndCapture:1=CUDA_ERROR_OUT_OF_MEMORY' },
  );
  assert.deepEqual(result, { thrown: 'CUDA_ERROR_OUT_OF_MEMORY', capturing: false, out: [7], graphs: 0 });
});
