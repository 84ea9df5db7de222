// Objects that become garbage together, on the simulated driver: their finalizers release every driver object, in an
// order that never uses one after its release (the simulated driver reports any such use on stderr).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collectGarbage, needsCompiler, simulatedJson } from '../support/simulated-driver.js';


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
