// Work recorded on a pool stream in one worker and used in another after a message keeps its order in both
// submission modes, as direct driver calls do: device-side timestamps of a kernel in each worker show it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { gpu } from '../../support/gpu.js';
import { runChild } from '../../support/child.js';

// How worker B follows pool stream 0: a stream wait, a blocking synchronize, or a blocking synchronize through a
// wrapper borrowed from the stream's handle (Stream.fromHandle), which names the same library stream.
type How = 'waitStream' | 'synchronizeSync' | 'borrowed synchronizeSync';
const follow: Record<How, string> = {
  waitStream: 's1.waitStream(s0);',
  synchronizeSync: 's0.synchronizeSync();',
  'borrowed synchronizeSync': 'Stream.fromHandle(s0.handle).synchronizeSync();',
};

// Worker A queues 300 small kernels and then a 2 ms spin on pool stream 0 and tells the main thread at once; worker B
// is then told to follow that stream (`how`) and to run a short spin on pool stream 1. Each spin writes its start
// and end from the device's clock; B's must start after A's ends. Reports the rounds where it did not.
const acrossWorkers = (how: How) => `
  import { Worker } from 'node:worker_threads';
  import { StreamPool } from 'cuda-stream-pool';
  const pool = new StreamPool({ size: 2 });
  const shared = pool.share();
  const common = \`
    import { readFileSync } from 'node:fs';
    import { parentPort, workerData } from 'node:worker_threads';
    import { DeviceBuffer, Module, PinnedBuffer, Stream, StreamPool } from 'cuda-stream-pool';
    const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
    const spin = tests.getFunction('spin', ['u64', 'ptr']);
    const fill = tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
    const pool = StreamPool.attach(workerData.shared);
    const s0 = pool.getStream(0), s1 = pool.getStream(1);
    const stamps = DeviceBuffer.alloc(16, { stream: s0 });
    const scratch = DeviceBuffer.alloc(4096, { stream: s0 });
    const out = PinnedBuffer.alloc(16);
    await s0.synchronize();
    const report = async (stream, round) => {
      stream.copy(out, stamps);
      await stream.synchronize();
      parentPort.postMessage({ round, stamps: [...out.view(BigUint64Array)].map(String) });
    };\`;
  const a = new Worker(\`\${common}
    parentPort.on('message', async (round) => {
      for (let i = 0; i < 300; i++) fill.launch({ grid: 1, block: 32, stream: s0 }, scratch, i, 32);
      spin.launch({ grid: 1, block: 1, stream: s0 }, 2_000_000n, stamps);
      parentPort.postMessage({ round, queued: true });
      await report(s0, round);
    });
    parentPort.postMessage('ready');\`, { eval: true, workerData: { shared } });
  const b = new Worker(\`\${common}
    parentPort.on('message', async (round) => {
      ${follow[how]}
      spin.launch({ grid: 1, block: 1, stream: s1 }, 10_000n, stamps);
      await report(s1, round);
    });
    parentPort.postMessage('ready');\`, { eval: true, workerData: { shared } });
  const next = (w) => new Promise((resolve) => w.once('message', resolve));
  await Promise.all([next(a), next(b)]);
  const early = [];
  for (let round = 0; round < 20; round++) {
    a.postMessage(round);
    await next(a); // queued
    b.postMessage(round);
    const [ra, rb] = await Promise.all([next(a), next(b)]);
    if (BigInt(rb.stamps[0]) < BigInt(ra.stamps[1])) early.push(round);
  }
  await a.terminate();
  await b.terminate();
  pool.destroy();
  console.log(JSON.stringify(early));`;

for (const mode of ['direct', 'deferred']) {
  for (const how of Object.keys(follow) as How[]) {
    test(`${mode} submission: a pool stream's work queued in one worker is followed by ${how}() in another after a message`, gpu, async () => {
      const result = await runChild(acrossWorkers(how), { CUDA_STREAM_POOL_SUBMISSION: mode }, 120_000);
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(JSON.parse(result.stdout), [], 'rounds where the second worker ran before the first one\'s kernel ended');
    });
  }
}
