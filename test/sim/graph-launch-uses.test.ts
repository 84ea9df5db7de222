// The device buffers of an executable graph count as used on every stream it is launched on: a free on another stream
// waits for those launches, also for repeated launches on one stream (which skip the look-up of the first), after
// update() gave the executable other buffers, and through another view of the same pool stream. The simulated
// driver faults on any operation that touches freed memory, so a free that ran early fails the launching stream's wait.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

const load = `
  import { readFileSync } from 'node:fs';
  import { DeviceBuffer, Graph, Module, Stream, StreamPool } from 'cuda-stream-pool';
  const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
  const fill = tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
  const capture = Stream.create();
  const graphFilling = (buffer, value) => Graph.capture(capture, () => fill.launch({ grid: 4, block: 256, stream: capture }, buffer, value, 1024));
  // Holds a stream back: 10 fills of a buffer of its own, each after the simulator's operation delay.
  const delay = (stream) => { const b = DeviceBuffer.alloc(64, { stream }); for (let i = 0; i < 10; i++) stream.fill(b, i); b.free(); };
  const faults = async (stream) => { try { await stream.synchronize(); return false; } catch { return true; } };`;

test('a free waits for repeated launches of a graph on one stream, and after update() or setKernelArguments() gave it other buffers; a freed buffer is refused', needsCompiler, async () => {
  const result = await simulatedJson<{ first: boolean; updated: boolean; inPlace: boolean; reargued: boolean; refused: string[] }>(
    `${load}
     const [home, busy] = [Stream.create(), Stream.create()];
     const first = DeviceBuffer.alloc(1024 * 4, { stream: home });
     const second = DeviceBuffer.alloc(1024 * 4, { stream: home });
     const exec = (await graphFilling(first, 1)).instantiate();
     exec.launch(busy);
     delay(busy);
     exec.launch(busy);
     exec.launch(busy);
     first.free(); // on home, which has nothing queued: it must wait for busy's launches
     const firstFaulted = await faults(busy);
     const inPlace = exec.update(await graphFilling(second, 2));
     exec.launch(busy); // the same stream as the last launch, with a buffer no launch used before
     delay(busy);
     exec.launch(busy);
     second.free();
     const updated = await faults(busy);
     exec.destroy();
     const [kept, third] = [DeviceBuffer.alloc(1024 * 4, { stream: home }), DeviceBuffer.alloc(1024 * 4, { stream: home })];
     const keptGraph = await graphFilling(kept, 3);
     const other = keptGraph.instantiate();
     other.launch(busy);
     other.setKernelArguments(keptGraph.kernelNodes()[0], third, 4, 1024);
     other.launch(busy); // the same stream again, now with the buffer setKernelArguments gave
     delay(busy);
     other.launch(busy);
     third.free();
     const reargued = await faults(busy);
     let refused;
     try { other.setKernelArguments(keptGraph.kernelNodes()[0], third, 5, 1024); } catch (error) { refused = [error.name, error.message]; }
     const lender = Stream.create();
     const borrowed = Stream.fromHandle(lender.handle);
     lender.destroy();
     const fresh = (await graphFilling(DeviceBuffer.alloc(1024 * 4, { stream: home }), 6)).instantiate();
     try { fresh.launch(borrowed); } catch (error) { refused.push(error.message); }
     console.log(JSON.stringify({ first: firstFaulted, updated, inPlace, reargued, refused }));
     other.destroy();`,
    { operationDelayUs: 3000 },
  );
  assert.deepEqual(result, {
    first: false,
    updated: false,
    inPlace: true,
    reargued: false,
    refused: ['DestroyedError', 'graphExec.setKernelArguments(): the DeviceBuffer was freed', 'graphExec.launch(): the Stream was destroyed'],
  });
});

test('a free waits for graph launches made through two lease views of one pool stream', needsCompiler, async () => {
  const result = await simulatedJson<{ same: boolean; faulted: boolean }>(
    `${load}
     const home = Stream.create();
     const pool = new StreamPool({ size: 1 });
     const buffer = DeviceBuffer.alloc(1024 * 4, { stream: home });
     const exec = (await graphFilling(buffer, 3)).instantiate();
     const lease = pool.tryAcquire();
     const firstView = lease.stream;
     exec.launch(firstView);
     lease.release();
     const again = pool.tryAcquire() ?? await pool.acquire();
     const same = again.stream.id === firstView.id && again.stream !== firstView;
     delay(again.stream);
     exec.launch(again.stream);
     buffer.free();
     const faulted = await faults(again.stream);
     again.release();
     console.log(JSON.stringify({ same, faulted }));
     exec.destroy();
     pool.destroy();`,
    { operationDelayUs: 3000 },
  );
  assert.deepEqual(result, { same: true, faulted: false });
});
