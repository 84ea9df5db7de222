// JS holds native refs as numbers naming slots of its thread's handle table. A number that names no slot of the
// kind asked for is a TypeError, a handle whose object was destroyed is a DestroyedError (also once its slot holds
// another object), and every slot is released: at destroy, or once a forgotten object is collected. On the CPU
// through the null driver (scripts/null-driver.cc) in a child process.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runChild } from '../support/child.js';
import { nativeCheck, needsCompiler } from '../support/native-check.js';

const driver = nativeCheck('libcuda.so.1', { source: 'scripts/null-driver.cc', shared: true, level: '-O2' });

async function childJson<T>(source: string): Promise<T> {
  const result = await runChild(source, { CUDA_STREAM_POOL_LIBCUDA: driver() });
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout.trim().split('\n').at(-1)!) as T;
}

test('a forged handle is a TypeError and a stale one a DestroyedError, also after its slot was reused', needsCompiler, async () => {
  const out = await childJson<Record<string, string>>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     import { native } from '#library/binding/binding.js';
     import { deviceBuffers } from '#library/internal/handles.js';
     import { streamRef } from '#library/stream/stream.js';
     const outcome = (fn) => { try { return 'returned ' + fn(); } catch (e) { return e.name + ': ' + e.message; } };
     const stream = Stream.create();
     const ref = streamRef(stream, 'test');
     const buffer = DeviceBuffer.alloc(64, { stream });
     const out = {
       live: outcome(() => native.streamStatus(ref)),
       neverIssued: outcome(() => native.streamStatus(ref + 7 * 2 ** 24 + 1000)),
       fraction: outcome(() => native.streamStatus(ref + 0.5)),
       // Numbers this table holds no handle for: negative, past a double's integers, not finite, the largest integer.
       outside: [-ref, 2 ** 60, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53 - 1].map((value) => outcome(() => native.streamStatus(value))),
       object: outcome(() => native.streamStatus({})),
       otherKind: outcome(() => native.streamStatus(deviceBuffers.ref(buffer, 'test'))),
     };
     buffer.free();
     stream.destroy();
     out.stale = outcome(() => native.streamStatus(ref));
     const next = Stream.create(); // takes the slot just released, with the next generation
     const nextRef = streamRef(next, 'test');
     out.sameSlot = String(nextRef % 2 ** 24 === ref % 2 ** 24 && nextRef !== ref);
     out.staleAfterReuse = outcome(() => native.streamStatus(ref));
     out.next = outcome(() => native.streamStatus(nextRef));
     console.log(JSON.stringify(out));`,
  );
  assert.equal(out.live, 'returned 0');
  const forged = 'TypeError: cuda-stream-pool internal: expected a Stream handle made in this thread';
  assert.equal(out.neverIssued, forged);
  assert.equal(out.fraction, forged);
  assert.deepEqual(out.outside, Array(5).fill(forged));
  assert.equal(out.object, forged);
  assert.equal(out.otherKind, 'TypeError: cuda-stream-pool internal: expected a Stream handle, got a handle of another kind');
  assert.equal(out.stale, 'DestroyedError: Stream.use(): the Stream was destroyed');
  assert.equal(out.sameSlot, 'true');
  assert.equal(out.staleAfterReuse, 'DestroyedError: Stream.use(): the Stream was destroyed');
  assert.equal(out.next, 'returned 0');
});

test('every handle is released: at destroy and free, and for forgotten objects once they are collected, which frees what they held', needsCompiler, async () => {
  const out = await childJson<Record<string, number>>(
    `import v8 from 'node:v8';
     import vm from 'node:vm';
     import { cuda, DeviceBuffer, Event, PinnedBuffer, Stream } from 'cuda-stream-pool';
     import { liveHandles } from '#library/binding/native-ref-lifetime.js';
     v8.setFlagsFromString('--expose-gc');
     const gc = vm.runInNewContext('gc');
     const stream = Stream.create();
     const baseline = { handles: liveHandles(), ...cuda.liveObjects() };
     for (let i = 0; i < 3000; i++) {
       DeviceBuffer.alloc(256, { stream }).free();
       Stream.create().destroy();
       Event.create().destroy();
       PinnedBuffer.alloc(64).free();
     }
     const afterDestroyed = liveHandles() - baseline.handles;
     (() => {
       for (let i = 0; i < 3000; i++) {
         DeviceBuffer.alloc(256, { stream });
         Stream.create();
         Event.create();
         DeviceBuffer.alloc(128, { stream }).subarray(16);
       }
     })();
     const whileForgotten = liveHandles() - baseline.handles;
     const streamsWhileForgotten = cuda.liveObjects().streams - baseline.streams;
     const deadline = Date.now() + 10_000;
     while (liveHandles() !== baseline.handles && Date.now() < deadline) {
       gc();
       await new Promise((resolve) => setTimeout(resolve, 20));
     }
     const now = cuda.liveObjects();
     console.log(JSON.stringify({
       afterDestroyed, whileForgotten, streamsWhileForgotten,
       afterCollection: liveHandles() - baseline.handles,
       streams: now.streams - baseline.streams,
       events: now.events - baseline.events,
       deviceBytes: now.deviceBytes - baseline.deviceBytes,
     }));`,
  );
  assert.equal(out.afterDestroyed, 0, 'destroy() and free() release their handles at once');
  assert.equal(out.whileForgotten, 12000, 'a forgotten object keeps its handle until it is collected (a view shares its buffer\'s)');
  assert.equal(out.streamsWhileForgotten, 3000);
  assert.equal(out.afterCollection, 0);
  assert.equal(out.streams, 0, 'collected streams are destroyed');
  assert.equal(out.events, 0);
  assert.equal(out.deviceBytes, 0, 'collected buffers are freed');
});
