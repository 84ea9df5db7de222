// Objects that become garbage together, on the simulated driver: their finalizers release every driver object, in an
// order that never uses one after its release (the simulated driver reports any such use on stderr).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collectGarbage, needsCompiler, simulatedJson, simulatedJsonWithCalls } from '../support/simulated-driver.js';


test('200 streams dropped with a buffer allocated on each: every stream and buffer is released', needsCompiler, async () => {
  const result = await simulatedJson<{ before: number[]; after: number[] }>(
    `${collectGarbage}
     import { cuda, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const count = () => { const o = cuda.liveObjects(); return [o.streams, o.deviceBytes]; };
     const before = count();
     (() => {
       for (let i = 0; i < 200; i++) {
         const stream = Stream.create();
         const buffer = DeviceBuffer.alloc(256, { stream });
         stream.fill(buffer, i);
       }
     })();
     await collectUntil(() => count().every((n, i) => n === before[i]));
     console.log(JSON.stringify({ before, after: count() }));`,
    { operationDelayUs: 50 },
  );
  assert.deepEqual(result.after, result.before);
});

test('streams dropped after using a long-lived buffer are destroyed while the buffer lives, and the buffer lets them go', needsCompiler, async () => {
  // The buffer remembers every stream it was used on, so that its free follows their work: a dropped stream must be
  // destroyed all the same, and the buffer must not keep its object (and an event) for the rest of its life.
  const { result, calls } = await simulatedJsonWithCalls<{ before: number; during: number; after: number; last: number[] }>(
    `${collectGarbage}
     import { cuda, Device, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const before = cuda.liveObjects().streams;
     const buffer = DeviceBuffer.alloc(64);
     let during = 0;
     // In a function: a module's top-level loop keeps its last iteration's stream reachable.
     await (async () => {
       for (let i = 1; i <= 200; i++) {
         const stream = Stream.create();
         stream.fill(buffer, i, { type: 'u32' });
         await stream.synchronize();
         during = Math.max(during, cuda.liveObjects().streams - before);
       }
     })();
     await collectUntil(() => cuda.liveObjects().streams === before);
     const after = cuda.liveObjects().streams;
     // The buffer forgets a destroyed stream whose work is done when it next meets a new stream: the device's
     // synchronize makes sure the dropped streams' last work (their retirement records) is done by then, which a
     // loaded machine running the simulator's stream threads could otherwise leave for later.
     await Device.get(0).synchronize();
     const next = Stream.create();
     next.fill(buffer, 201, { type: 'u32' });
     const last = Array.from(await buffer.toArray(Uint32Array, { stream: next })).slice(0, 4);
     next.destroy();
     console.log(JSON.stringify({ before, during, after, last }));
     process.exit(0); // with the buffer alive: the driver's counts are those of a buffer still in use`,
    { operationDelayUs: 20 },
  );
  assert.equal(result.after, result.before, 'every dropped stream is destroyed while the buffer lives');
  assert.ok(result.during >= 1);
  assert.deepEqual(result.last, [201, 201, 201, 201]);
  assert.ok((calls.cuStreamDestroy ?? 0) >= 200, `cuStreamDestroy ran ${calls.cuStreamDestroy} times for 200 dropped streams`);
  const eventsAlive = (calls.cuEventCreate ?? 0) - (calls.cuEventDestroy ?? 0);
  assert.ok(eventsAlive < 50, `${eventsAlive} events still alive at exit: the buffer kept the dropped streams' retirement events`);
});

test('a Stream.fromHandle() wrapper of a created stream refuses calls, and says it is destroyed, once that stream is collected', needsCompiler, async () => {
  const result = await simulatedJson<{ streams: number[]; error: string; destroyed: boolean[] }>(
    `${collectGarbage}
     import { cuda, Stream } from 'cuda-stream-pool';
     const before = cuda.liveObjects().streams;
     const borrowed = (() => Stream.fromHandle(Stream.create().handle))();
     const aliveBefore = borrowed.destroyed;
     await collectUntil(() => cuda.liveObjects().streams === before);
     let error = 'none';
     try { borrowed.query(); } catch (e) { error = e.name; }
     console.log(JSON.stringify({ streams: [before, cuda.liveObjects().streams], error, destroyed: [aliveBefore, borrowed.destroyed] }));`,
  );
  assert.equal(result.streams[1], result.streams[0]);
  assert.equal(result.error, 'DestroyedError');
  assert.deepEqual(result.destroyed, [false, true]);
});

test('a Stream.fromHandle() wrapper says it is destroyed once the library stream it is tied to is, however that ends', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, boolean[]>>(
    `import { Stream, StreamPool } from 'cuda-stream-pool';
     const created = Stream.create();
     const ofCreated = Stream.fromHandle(created.handle);
     const pool = new StreamPool({ size: 2 });
     const ofPool = Stream.fromHandle(pool.getStream().handle);
     const before = [ofCreated.destroyed, ofPool.destroyed];
     created.destroy();
     pool.destroy();
     const own = Stream.fromHandle(Stream.create().handle);
     own.destroy(); // the wrapper itself
     console.log(JSON.stringify({ before, after: [ofCreated.destroyed, ofPool.destroyed], own: [own.destroyed] }));`,
  );
  assert.deepEqual(result, { before: [false, false], after: [true, true], own: [true] });
});

test('a free on a Stream.fromHandle() wrapper whose library stream was destroyed is refused, and the buffer stays usable', needsCompiler, async () => {
  // The native free would fall back to the allocation stream without a word; the wrapper's other calls throw.
  const result = await simulatedJson<{ refused: string[]; freedAfter: boolean; deviceBytes: number }>(
    `import { DeviceBuffer, Stream, cuda } from 'cuda-stream-pool';
     const home = Stream.create();
     const lender = Stream.create();
     const wrapper = Stream.fromHandle(lender.handle);
     const buffer = DeviceBuffer.alloc(64, { stream: home });
     lender.destroy();
     let refused;
     try { buffer.free({ stream: wrapper }); } catch (error) { refused = [error.name, error.message, String(buffer.freed)]; }
     home.fill(buffer, 1);
     buffer.free();
     await home.synchronize();
     console.log(JSON.stringify({ refused, freedAfter: buffer.freed, deviceBytes: cuda.liveObjects().deviceBytes }));`,
  );
  assert.deepEqual(result, { refused: ['DestroyedError', 'DeviceBuffer.free(): the Stream was destroyed', 'false'], freedAfter: true, deviceBytes: 0 });
});
