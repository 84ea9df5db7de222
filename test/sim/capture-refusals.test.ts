// Frees and captures on the simulated driver, which invalidates a capture that a free or an event record on the
// capturing stream reaches. A free refused because a stream captures names that stream by the id its wrapper knows,
// also where the native layer never learned it (here: cuStreamGetId failed when the stream was made, and the wrapper
// asked again later), and says when the capturing stream is not the free's own but one that used the buffer. A buffer
// forgotten and collected during a capture is freed once the capture is over, not into it; a capture whose stream
// wrapper is forgotten, or whose thread ends, is abandoned. The capture guard reports what is open and what waits.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collectGarbage, needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('a free refused during a capture names the capturing stream, whose id only its wrapper knows, and whether it is the free\'s own', needsCompiler, async () => {
  const result = await simulatedJson<{ id: string; refusals: { operation: string; streamId: string; message: string }[]; freedAfter: boolean[] }>(
    `import { CaptureError, DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
     const capturing = Stream.create(); // its cuStreamGetId fails: the native layer does not know its id
     const other = Stream.create();
     const id = capturing.id; // asked again, now from the driver
     const onIt = DeviceBuffer.alloc(64, { stream: capturing });
     const freedElsewhere = DeviceBuffer.alloc(64, { stream: capturing });
     const elsewhere = DeviceBuffer.alloc(64, { stream: other });
     const used = DeviceBuffer.alloc(64, { stream: other });
     const pinned = PinnedBuffer.alloc(64);
     capturing.copy(used, pinned); // a use on the stream that will capture
     await capturing.synchronize();
     await other.synchronize();
     capturing.beginCapture();
     const refusals = [];
     for (const free of [() => onIt.free(), () => elsewhere.free({ stream: capturing }), () => used.free(), () => freedElsewhere.free({ stream: other })]) {
       try { free(); refusals.push('freed'); } catch (e) {
         refusals.push(e instanceof CaptureError ? { operation: e.operation, streamId: String(e.streamId), message: e.message } : String(e));
       }
     }
     capturing.endCapture().destroy();
     const freedAfter = [onIt, elsewhere, used, freedElsewhere].map((b) => { b.free(); return b.freed; });
     console.log(JSON.stringify({ id: String(id), refusals, freedAfter }));`,
    { fail: 'cuStreamGetId:1=CUDA_ERROR_UNKNOWN' },
  );
  assert.notEqual(result.id, '0');
  assert.equal(result.refusals.length, 4);
  for (const refusal of result.refusals) {
    assert.equal(refusal.operation, 'DeviceBuffer.free()');
    assert.equal(refusal.streamId, result.id);
  }
  assert.match(result.refusals[0]!.message, /not allowed while the stream is capturing a graph/);
  assert.match(result.refusals[1]!.message, /not allowed while the stream is capturing a graph/);
  assert.match(result.refusals[2]!.message, /not allowed while a stream that used the buffer is capturing a graph/);
  // Freed on another stream, the allocation stream that captures is not the free's own.
  assert.match(result.refusals[3]!.message, /not allowed while a stream that used the buffer is capturing a graph/);
  assert.deepEqual(result.freedAfter, [true, true, true, true]);
});

test('a buffer forgotten and collected while its stream captures is freed after the capture, which ends intact', needsCompiler, async () => {
  const MiB = 1 << 20;
  const result = await simulatedJson<{ duringCapture: number; nodes: number; afterCapture: number; ran: number[] }>(
    `${collectGarbage}
     import { cuda, DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';
     import { liveHandles } from '#library/binding/native-ref-lifetime.js';
     const stream = Stream.create();
     const pinned = PinnedBuffer.alloc(64);
     const kept = DeviceBuffer.alloc(64, { stream });
     (() => {
       const forgotten = DeviceBuffer.alloc(${MiB}, { stream });
       stream.copy(forgotten, pinned); // a use on the stream that will capture
     })();
     await stream.synchronize();
     const before = cuda.liveObjects().deviceBytes;
     const handles = liveHandles();
     stream.beginCapture();
     stream.fill(kept, 7);
     await collectUntil(() => liveHandles() < handles); // the forgotten buffer's slot released: its forget action ran
     if (liveHandles() >= handles) throw new Error('the forgotten buffer was not collected');
     const duringCapture = before - cuda.liveObjects().deviceBytes; // 0: not freed into the capture
     const graph = stream.endCapture();
     const nodes = graph.nodeCount;
     const exec = graph.instantiate();
     exec.launch(stream);
     await stream.synchronize();
     await collectUntil(() => cuda.liveObjects().deviceBytes < before);
     const afterCapture = before - cuda.liveObjects().deviceBytes;
     const ran = [...new Set(await kept.toArray(Uint8Array, { stream }))];
     exec.destroy();
     graph.destroy();
     console.log(JSON.stringify({ duringCapture, nodes, afterCapture, ran }));`,
  );
  assert.equal(result.duringCapture, 0, 'the forgotten buffer was freed during the capture');
  assert.equal(result.nodes, 1, 'the capture holds the fill alone');
  assert.equal(result.afterCapture, MiB);
  assert.deepEqual(result.ran, [7]);
});

// A capture whose stream wrapper is gone can never be ended; it must not stay open, holding back the device-wide calls
// of every thread (a device synchronize is refused while a capture is open) and, with a buffer the stream used
// waiting to be freed after it, keeping that stream and buffer alive.
const abandoned = (setup: string, ordinal = 0) => `
  ${collectGarbage}
  import { cuda, Device } from 'cuda-stream-pool';
  const device = Device.get(${ordinal});
  await device.synchronize();
  const before = cuda.liveObjects();
  ${setup}
  await collectUntil(() => cuda.liveObjects().streams === before.streams && cuda.liveObjects().deviceBytes === before.deviceBytes);
  const after = cuda.liveObjects();
  let synchronize = 'resolved';
  try { await device.synchronize(); } catch (e) { synchronize = e.code; }
  console.log(JSON.stringify({ streams: after.streams - before.streams, deviceBytes: after.deviceBytes - before.deviceBytes, synchronize }));`;

for (const [devices, ordinal] of [[1, 0], [2, 1]] as const) {
  test(`a worker terminated while Graph.capture() awaits on device ${ordinal} of ${devices}: its capture is abandoned, and its stream and the buffer the stream used are freed`, needsCompiler, async () => {
    const result = await simulatedJson<{ streams: number; deviceBytes: number; synchronize: string }>(
      abandoned(`
        const { Worker } = await import('node:worker_threads');
        const worker = new Worker(\`
          import { parentPort } from 'node:worker_threads';
          import { DeviceBuffer, Graph, Stream } from 'cuda-stream-pool';
          const stream = Stream.create({ nonBlocking: true, device: ${ordinal} });
          const buffer = DeviceBuffer.alloc(1 << 20, { stream });
          stream.fill(buffer, 3);
          await stream.synchronize();
          setInterval(() => {}, 1000); // alive until terminated
          await Graph.capture(stream, async () => {
            parentPort.postMessage('capturing');
            await new Promise(() => {});
          }, { mode: 'relaxed' });\`, { eval: true });
        await new Promise((resolve) => worker.once('message', resolve));
        let during = 'resolved';
        try { await device.synchronize(); } catch (e) { during = e.code; }
        if (during !== 'CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED') throw new Error('the capture was not open: ' + during);
        await worker.terminate();`, ordinal),
      { devices },
    );
    assert.deepEqual(result, { streams: 0, deviceBytes: 0, synchronize: 'resolved' });
  });
}

test('a stream and the buffer it used, forgotten while the stream captures: the capture is abandoned and both are freed', needsCompiler, async () => {
  const result = await simulatedJson<{ streams: number; deviceBytes: number; synchronize: string }>(
    abandoned(`
      const { DeviceBuffer, Stream } = await import('cuda-stream-pool');
      await (async () => {
        const stream = Stream.create();
        const buffer = DeviceBuffer.alloc(1 << 20, { stream });
        stream.fill(buffer, 3);
        await stream.synchronize();
        stream.beginCapture();
      })();`),
  );
  assert.deepEqual(result, { streams: 0, deviceBytes: 0, synchronize: 'resolved' });
});

test('a stream forgotten while its capture holds a buffer that its recorded work uses: the capture is abandoned and its record lets the buffer go', needsCompiler, async () => {
  const result = await simulatedJson<{ streams: number; deviceBytes: number; synchronize: string }>(
    abandoned(`
      const { DeviceBuffer, Stream } = await import('cuda-stream-pool');
      await (async () => {
        const home = Stream.create();
        const buffer = DeviceBuffer.alloc(1 << 20, { stream: home });
        await home.synchronize();
        const stream = Stream.create();
        stream.beginCapture();
        stream.fill(buffer, 3); // recorded: the capture holds the buffer
      })();`),
  );
  assert.deepEqual(result, { streams: 0, deviceBytes: 0, synchronize: 'resolved' });
});

test('the capture guard reports each device\'s open captures and the frees waiting for them, for leak reports', needsCompiler, async () => {
  const result = await simulatedJson<{ idle: number[]; open: number[]; waiting: number[]; closed: number[] }>(
    `${collectGarbage}
     import { cuda, DeviceBuffer, Stream } from 'cuda-stream-pool';
     import { native } from '#library/binding/binding.js';
     const stream = Stream.create({ device: 1 });
     (() => { const forgotten = DeviceBuffer.alloc(4096, { stream }); stream.fill(forgotten, 1); })();
     await stream.synchronize();
     const idle = native.captureGuardState();
     const before = cuda.liveObjects().deviceBytes;
     stream.beginCapture();
     const open = native.captureGuardState();
     await collectUntil(() => native.captureGuardState()[2] === 1);
     const waiting = native.captureGuardState();
     stream.endCapture().destroy();
     await collectUntil(() => cuda.liveObjects().deviceBytes < before);
     console.log(JSON.stringify({ idle, open, waiting, closed: native.captureGuardState() }));`,
    { devices: 2 },
  );
  assert.deepEqual(result, { idle: [], open: [1, 1, 0], waiting: [1, 1, 1], closed: [] });
});
