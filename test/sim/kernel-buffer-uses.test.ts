// A DeviceBuffer passed to kernel launches on other streams than its own: the free waits for every launch, the first
// on a stream and the later ones, which the buffer does not report to the native layer again; lease views of pool
// streams and destroyed streams still count as what they are. The simulated driver faults on any operation that
// touches freed memory, so a free that ran early fails the busy stream's wait.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collectGarbage, needsCompiler, simulatedJson } from '../support/simulated-driver.js';

const load = `
  import { readFileSync } from 'node:fs';
  import { DeviceBuffer, Module, Stream, StreamPool, DestroyedError } from 'cuda-stream-pool';
  const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
  const fill = tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
  // Holds a stream back: 20 fills of a buffer of its own, each after the simulator's operation delay.
  const delay = (stream) => { const b = DeviceBuffer.alloc(64, { stream }); for (let i = 0; i < 20; i++) stream.fill(b, i); b.free(); };`;

test('a free waits for the later launches of a buffer on another stream, not only the first', needsCompiler, async () => {
  const result = await simulatedJson<{ words: number[]; faulted: boolean }>(
    `${load}
     const [home, busy] = [Stream.create(), Stream.create()];
     const buffer = DeviceBuffer.alloc(1024 * 4, { stream: home });
     const probe = DeviceBuffer.alloc(1024 * 4, { stream: busy });
     fill.launch({ grid: 32, block: 32, stream: busy }, buffer, 1, 1024);
     delay(busy);
     for (let i = 2; i <= 5; i++) fill.launch({ grid: 32, block: 32, stream: busy }, buffer, i, 1024);
     busy.copy(probe, buffer);
     buffer.free(); // on home, which has nothing queued: the free must wait for busy's launches and copy
     let faulted = false;
     try { await busy.synchronize(); } catch { faulted = true; }
     const words = faulted ? [] : [...new Set(await probe.toArray(Uint32Array, { stream: busy }))];
     console.log(JSON.stringify({ words, faulted }));`,
    { operationDelayUs: 5000 },
  );
  assert.deepEqual(result, { words: [5], faulted: false });
});

test('launches through lease views of two pool streams both delay the free; a destroyed stream is refused on a later launch', needsCompiler, async () => {
  const result = await simulatedJson<{ sameStream: boolean; faulted: boolean; destroyed: string }>(
    `${load}
     const pool = new StreamPool({ size: 2 });
     const home = Stream.create();
     const buffer = DeviceBuffer.alloc(1024 * 4, { stream: home });
     const first = pool.tryAcquire();
     fill.launch({ grid: 32, block: 32, stream: first.stream }, buffer, 1, 1024);
     const second = pool.tryAcquire();
     const sameStream = first.stream.id === second.stream.id;
     first.release();
     delay(second.stream);
     // Only these launches tell the buffer about the second stream (a copy would note it too).
     fill.launch({ grid: 32, block: 32, stream: second.stream }, buffer, 2, 1024);
     fill.launch({ grid: 32, block: 32, stream: second.stream }, buffer, 3, 1024);
     buffer.free();
     let faulted = false;
     try { await second.stream.synchronize(); } catch { faulted = true; }
     second.release();
     const other = Stream.create();
     const kept = DeviceBuffer.alloc(1024 * 4, { stream: home });
     fill.launch({ grid: 32, block: 32, stream: other }, kept, 1, 1024);
     other.destroy();
     let destroyed = 'accepted';
     try { fill.launch({ grid: 32, block: 32, stream: other }, kept, 2, 1024); } catch (e) { destroyed = e instanceof DestroyedError ? 'DestroyedError' : String(e); }
     kept.free();
     await home.synchronize();
     pool.destroy();
     console.log(JSON.stringify({ sameStream, faulted, destroyed }));`,
    { operationDelayUs: 5000 },
  );
  assert.deepEqual(result, { sameStream: false, faulted: false, destroyed: 'DestroyedError' });
});

test('launches with a long-lived buffer keep neither dropped streams nor forgotten leases alive', needsCompiler, async () => {
  const result = await simulatedJson<{ streamsLeft: number; reclaimed: string }>(
    `${collectGarbage}
     ${load}
     import { cuda } from 'cuda-stream-pool';
     const weights = DeviceBuffer.alloc(64 * 4);
     const before = cuda.liveObjects().streams;
     await (async () => {
       for (let i = 0; i < 20; i++) {
         const dropped = Stream.create();
         fill.launch({ grid: 1, block: 16, stream: dropped }, weights, i, 16);
         fill.launch({ grid: 1, block: 16, stream: dropped }, weights, i, 16);
         await dropped.synchronize();
       }
     })();
     await collectUntil(() => cuda.liveObjects().streams === before);
     const streamsLeft = cuda.liveObjects().streams - before;
     const pool = new StreamPool({ size: 1 });
     await (async () => {
       const lease = await pool.acquire(); // never released
       fill.launch({ grid: 1, block: 16, stream: lease.stream }, weights, 1, 16);
       await lease.stream.synchronize();
     })();
     let reclaimed = 'no';
     const collecting = setInterval(gc, 20);
     try {
       const lease = await pool.acquire({ signal: AbortSignal.timeout(5000) });
       reclaimed = 'yes';
       lease.release();
     } catch (e) { reclaimed = e.name; }
     clearInterval(collecting);
     weights.free();
     pool.destroy();
     console.log(JSON.stringify({ streamsLeft, reclaimed }));`,
  );
  assert.deepEqual(result, { streamsLeft: 0, reclaimed: 'yes' });
});
