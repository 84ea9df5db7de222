// What a lease's stream wrapper tells its pool when the lease ends (Note [known idle] in pool/pool-policy.ts): nothing
// was called, every call was followed by a wait that succeeded (the stream is known idle, and the next lease takes it
// without asking), or calls came after the last such wait. On the simulated driver, whose streams run their work
// later, so that a wait can still be pending.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

test('a lease view is "waited" after a wait that succeeded covered its last call, and "pending" otherwise', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, string>>(
    `import { DeviceBuffer, Stream, StreamPool } from 'cuda-stream-pool';
     import { wasUsed } from '#library/stream/stream.js';
     const pool = new StreamPool({ size: 1 });
     const buffer = DeviceBuffer.alloc(4096, { stream: Stream.create() });
     await buffer.stream.synchronize();
     const out = {};
     const lease = async (name, body) => {
       const held = pool.tryAcquire() ?? await pool.acquire();
       const stream = held.stream;
       await body(stream);
       out[name] = wasUsed(stream);
       held.release();
     };
     await lease('unused', async () => {});
     await lease('synchronize', async (s) => { s.fill(buffer, 1); await s.synchronize(); });
     await lease('fill after the wait', async (s) => { s.fill(buffer, 1); await s.synchronize(); s.fill(buffer, 2); });
     await lease('wait begun before the last fill', async (s) => { s.fill(buffer, 1); const done = s.synchronize(); s.fill(buffer, 2); await done; });
     await lease('synchronizeSync', async (s) => { s.fill(buffer, 1); s.synchronizeSync(); });
     await lease('query', async (s) => { s.fill(buffer, 1); while (!s.query()) await new Promise((r) => setTimeout(r, 1)); });
     await lease('aborted wait', async (s) => {
       s.fill(buffer, 1);
       const controller = new AbortController();
       const wait = s.synchronize({ signal: controller.signal }).catch((e) => e.name);
       controller.abort();
       await wait;
     });
     await pool.getStream().synchronize();
     console.log(JSON.stringify(out));`,
    { operationDelayUs: 2000 },
  );
  assert.deepEqual(result, {
    unused: 'unused',
    synchronize: 'waited',
    'fill after the wait': 'pending',
    'wait begun before the last fill': 'pending',
    synchronizeSync: 'waited',
    query: 'waited',
    'aborted wait': 'pending',
  });
});
