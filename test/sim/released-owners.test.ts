// Objects made and destroyed in turn (alloc then free, create then destroy) are held by nothing once destroyed: the
// handle nursery that waits to register new objects with the FinalizationRegistry lets a destroyed newest owner go at
// once, so that it dies young instead of surviving a scavenge. Older owners still wait for the nursery's flush.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collectGarbage, needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('an Event, a ManagedBuffer and a DeviceBuffer freed by await using are collected at the next gc too', needsCompiler, async () => {
  const result = await simulatedJson<{ event: boolean; managed: boolean; disposed: boolean }>(
    `${collectGarbage}
     import { DeviceBuffer, Event, ManagedBuffer, Stream } from 'cuda-stream-pool';
     const home = Stream.create();
     const eventRef = (() => { const e = Event.create(); e.destroy(); return new WeakRef(e); })();
     const managedRef = (() => { const m = ManagedBuffer.alloc(4096); m.free(); return new WeakRef(m); })();
     const disposedRef = await (async () => {
       const b = DeviceBuffer.alloc(4096, { stream: home });
       await b[Symbol.asyncDispose]();
       return new WeakRef(b);
     })();
     await new Promise((resolve) => setImmediate(resolve));
     gc();
     console.log(JSON.stringify({ event: eventRef.deref() === undefined, managed: managedRef.deref() === undefined,
                                  disposed: disposedRef.deref() === undefined }));
     home.destroy();`,
  );
  assert.deepEqual(result, { event: true, managed: true, disposed: true });
});

test('a freed DeviceBuffer and a destroyed Stream are collected at the next gc, before any nursery flush', needsCompiler, async () => {
  const result = await simulatedJson<{ buffer: boolean; stream: boolean; kept: boolean; older: boolean }>(
    `${collectGarbage}
     import { DeviceBuffer, Stream, cuda } from 'cuda-stream-pool';
     const home = Stream.create();
     // Made in functions, so that no variable holds them after.
     const freed = () => { const b = DeviceBuffer.alloc(4096, { stream: home }); b.free(); return new WeakRef(b); };
     const destroyed = () => { const s = Stream.create(); s.destroy(); return new WeakRef(s); };
     const bufferRef = freed();
     const streamRef = destroyed();
     // An owner that is not the newest when it is destroyed stays until the flush (100 ms or 1,024 owners later).
     let newer;
     const olderRef = (() => { const older = Stream.create(); newer = Stream.create(); older.destroy(); return new WeakRef(older); })();
     const keptRef = (() => { globalThis.kept = DeviceBuffer.alloc(4096, { stream: home }); return new WeakRef(globalThis.kept); })();
     await new Promise((resolve) => setImmediate(resolve)); // no flush yet: its timer waits 100 ms
     gc();
     console.log(JSON.stringify({ buffer: bufferRef.deref() === undefined, stream: streamRef.deref() === undefined,
                                  kept: keptRef.deref() !== undefined, older: olderRef.deref() !== undefined }));
     newer.destroy();
     globalThis.kept.free();
     home.destroy();`,
  );
  assert.deepEqual(result, { buffer: true, stream: true, kept: true, older: true });
});
