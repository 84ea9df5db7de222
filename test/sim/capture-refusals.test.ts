// A free refused because a stream captures names that stream by the id its wrapper knows, also where the native layer
// never learned it (here: cuStreamGetId failed when the stream was made, and the wrapper asked again later), and says
// when the capturing stream is not the free's but one that used the buffer.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('a free refused during a capture names the capturing stream, whose id only its wrapper knows', needsCompiler, async () => {
  const result = await simulatedJson<{ id: string; refusals: { operation: string; streamId: string; message: string }[]; freedAfter: boolean[] }>(
    `import { CaptureError, DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
     const capturing = Stream.create(); // its cuStreamGetId fails: the native layer does not know its id
     const other = Stream.create();
     const id = capturing.id; // asked again, now from the driver
     const onIt = DeviceBuffer.alloc(64, { stream: capturing });
     const elsewhere = DeviceBuffer.alloc(64, { stream: other });
     const used = DeviceBuffer.alloc(64, { stream: other });
     const pinned = PinnedBuffer.alloc(64);
     capturing.copy(used, pinned); // a use on the stream that will capture
     await capturing.synchronize();
     await other.synchronize();
     capturing.beginCapture();
     const refusals = [];
     for (const free of [() => onIt.free(), () => elsewhere.free({ stream: capturing }), () => used.free()]) {
       try { free(); refusals.push('freed'); } catch (e) {
         refusals.push(e instanceof CaptureError ? { operation: e.operation, streamId: String(e.streamId), message: e.message } : String(e));
       }
     }
     capturing.endCapture().destroy();
     const freedAfter = [onIt, elsewhere, used].map((b) => { b.free(); return b.freed; });
     console.log(JSON.stringify({ id: String(id), refusals, freedAfter }));`,
    { fail: 'cuStreamGetId:1=CUDA_ERROR_UNKNOWN' },
  );
  assert.notEqual(result.id, '0');
  assert.equal(result.refusals.length, 3);
  for (const refusal of result.refusals) {
    assert.equal(refusal.operation, 'DeviceBuffer.free()');
    assert.equal(refusal.streamId, result.id);
  }
  assert.match(result.refusals[0]!.message, /not allowed while the stream is capturing a graph/);
  assert.match(result.refusals[1]!.message, /not allowed while the stream is capturing a graph/);
  assert.match(result.refusals[2]!.message, /not allowed while a stream that used the buffer is capturing a graph/);
  assert.deepEqual(result.freedAfter, [true, true, true]);
});
