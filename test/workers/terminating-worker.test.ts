// A worker can be terminated while it is inside a native call that throws. Its environment then refuses new JS
// exceptions, and node-addon-api, unless told to drop an exception it cannot throw, throws a second C++ exception
// from its own handler, which nothing catches: the whole process aborted. The build defines
// NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS, so the worker just ends. No GPU needed: a call with a bad argument throws
// from C++ as well as a failing driver call does.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';

import { runChild } from '../support/child.js';
import { gpu } from '../support/gpu.js';
import { libraryDist } from '../support/paths.js';

test('terminating workers in the middle of native calls that throw leaves the process running', async () => {
  // Without the define, 16 workers terminated at random within 5 ms aborted the process in the first round.
  const result = await runChild(`
    import { Worker } from 'node:worker_threads';
    let terminated = 0;
    for (let round = 0; round < 5; round++) {
      const ended = [];
      for (let i = 0; i < 16; i++) {
        const worker = new Worker(\`
          import { parentPort } from 'node:worker_threads';
          const { native } = await import(${JSON.stringify(path.join(libraryDist, 'binding', 'binding.js'))});
          parentPort.postMessage('ready');
          for (;;) {
            try { native.poolDestroy('not a pool handle'); } catch {}
          }\`, { eval: true });
        ended.push(new Promise((resolve) => worker.once('message', () => {
          setTimeout(() => worker.terminate().then(() => { terminated++; resolve(); }), Math.random() * 5);
        })));
      }
      await Promise.all(ended);
    }
    console.log(JSON.stringify({ terminated }));
  `, {}, 110_000); // 80 worker starts: about 5 s on x64, 20 s under qemu arm64 emulation, more on a loaded host (the runner allows 120 s)
  assert.equal(result.signal, null, `the process died with ${result.signal}: ${result.stderr}`);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { terminated: 80 });
});

test('workers terminated while they create streams, events and device buffers leave no driver object behind', gpu, async () => {
  // An object whose JS handle cannot be made any more (the worker is being terminated) must be destroyed at once:
  // once it leaked its stream or memory, and the process's live-object counts never came back.
  const result = await runChild(`
    import { Worker } from 'node:worker_threads';
    const { cuda, Device } = await import(${JSON.stringify(path.join(libraryDist, 'index.js'))});
    Device.get(0);
    const start = JSON.stringify(cuda.liveObjects());
    for (let round = 0; round < 4; round++) {
      const ended = [];
      for (let i = 0; i < 8; i++) {
        const worker = new Worker(\`
          import { parentPort } from 'node:worker_threads';
          const { DeviceBuffer, Event, Stream } = await import(${JSON.stringify(path.join(libraryDist, 'index.js'))});
          const kept = [];
          parentPort.postMessage('ready');
          for (let n = 0; ; n++) {
            const stream = Stream.create();
            kept[n % 64] = [stream, Event.create(), DeviceBuffer.alloc(4096, { stream })];
          }\`, { eval: true });
        ended.push(new Promise((resolve) => worker.once('message', () => {
          setTimeout(() => worker.terminate().then(resolve), 5 + Math.random() * 20);
        })));
      }
      await Promise.all(ended);
    }
    let now = '';
    for (let i = 0; i < 100 && (now = JSON.stringify(cuda.liveObjects())) !== start; i++) await new Promise((r) => setTimeout(r, 50));
    console.log(JSON.stringify({ same: now === start, start: JSON.parse(start), now: JSON.parse(now), failures: cuda.callbackFailures().count }));
  `, {}, 110_000);
  assert.equal(result.signal, null, `the process died with ${result.signal}: ${result.stderr}`);
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout) as { same: boolean; start: object; now: object; failures: number };
  assert.deepEqual(out.now, out.start, 'cuda.liveObjects() is back where it started');
  assert.equal(out.failures, 0, 'no callback caught a failure');
});
