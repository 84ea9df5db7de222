// The native layer's own range checks, a backstop behind the TypeScript validation: called directly with ranges the
// TypeScript layer would refuse, it throws a RangeError instead of handing the driver memory beyond the buffer (the
// simulated driver would fault on that, or a GPU write past it). Managed copies to and from DeviceBuffers keep the
// buffer's use, so its free waits for them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('fills, prefetches and advice beyond their buffer are refused natively, wrapping sizes included', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, string>>(
    `import { DeviceBuffer, ManagedBuffer, Stream } from 'cuda-stream-pool';
     import { native } from '#library/binding/binding.js';
     import { deviceBuffers, managedBuffers, streams } from '#library/internal/handles.js';
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(4096, { stream });
     const managed = ManagedBuffer.alloc(4096);
     const sb = streams.ref(stream, 'test');
     const db = deviceBuffers.ref(buffer, 'test');
     const mb = managedBuffers.ref(managed, 'test');
     const outcome = (f) => { try { f(); return 'accepted'; } catch (e) { return e.constructor.name; } };
     const out = {
       fillWrapping: outcome(() => native.memoryFill(sb, db, 0, 7, 2 ** 62, 4)),
       fillBeyond: outcome(() => native.memoryFill(sb, db, 0, 7, 1025, 4)),
       fillExact: outcome(() => native.memoryFill(sb, db, 0, 7, 1024, 4)),
       prefetchBeyond: outcome(() => native.managedPrefetch(mb, 4000, 100, 0, sb)),
       adviseBeyond: outcome(() => native.managedAdvise(mb, 0, 4097, 1, 0)),
       copyBeyond: outcome(() => native.managedCopy(sb, mb, 0, db, 4000, true, 100)),
     };
     await stream.synchronize();
     console.log(JSON.stringify(out));`,
  );
  assert.deepEqual(result, {
    fillWrapping: 'RangeError', fillBeyond: 'RangeError', fillExact: 'accepted',
    prefetchBeyond: 'RangeError', adviseBeyond: 'RangeError', copyBeyond: 'RangeError',
  });
});

test('a copy between a ManagedBuffer and a DeviceBuffer on another stream: the DeviceBuffer\'s free waits for it', needsCompiler, async () => {
  const result = await simulatedJson<{ values: number[] }>(
    `import { DeviceBuffer, ManagedBuffer, Stream } from 'cuda-stream-pool';
     const [home, busy] = [Stream.create(), Stream.create()];
     const buffer = DeviceBuffer.alloc(65536, { stream: home });
     const managed = ManagedBuffer.alloc(65536);
     const other = DeviceBuffer.alloc(4096, { stream: busy });
     home.fill(buffer, 3);
     await home.synchronize();
     for (let i = 0; i < 20; i++) busy.fill(other, i); // the copy runs after these
     busy.copy(managed, buffer.subarray(4096), { byteLength: 4096 });
     buffer.free();
     await busy.synchronize();
     console.log(JSON.stringify({ values: [...new Set(managed.bytes.subarray(0, 4096))] }));`,
    { operationDelayUs: 5000 },
  );
  assert.deepEqual(result, { values: [3] });
});
