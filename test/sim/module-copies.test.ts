// A second evaluation of the library's modules in one thread (a bundler's second copy, a test runner that reloads
// modules, a URL with a query) shares the addon, and with it the thread's native state: the scratch arrays that
// launches write and the completion channel that settles waits. Each copy must keep working beside the other.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson } from '../support/simulated-driver.js';

/** Source that defines `copyOf(file)`: a second evaluation of the library's module at `file` (relative to its dist). */
const copies = `
  import { readFileSync } from 'node:fs';
  import { DeviceBuffer, Module, Stream } from 'cuda-stream-pool';
  const library = new URL(import.meta.resolve('cuda-stream-pool'));
  const moduleUrl = (file, search = '') => {
    const url = new URL(library);
    url.pathname = url.pathname.replace(/index\\.js$/, file);
    url.search = search;
    return url.href;
  };
  const copyOf = (file) => import(moduleUrl(file, '?copy=2'));`;

test('a second evaluation of the binding module in one thread shares its scratch arrays, so launches keep their shape', needsCompiler, async () => {
  const result = await simulatedJson<{ sameLaunch: boolean; sameArguments: boolean; sameFacts: boolean; filled: number }>(
    `${copies}
     const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
     const first = await import(moduleUrl('binding/binding.js'));
     const second = await copyOf('binding/binding.js');
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(1024 * 4, { stream });
     stream.fill(words, 0, { elementSize: 4 });
     tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']).launch({ grid: 4, block: 64, stream }, words, 1, 1024);
     const filled = (await words.toArray(Uint32Array, { stream })).filter((w) => w === 1).length;
     console.log(JSON.stringify({ sameLaunch: first.launchShape === second.launchShape, sameArguments: first.launchArguments === second.launchArguments,
                                  sameFacts: first.facts === second.facts, filled }));`,
  );
  assert.deepEqual(result, { sameLaunch: true, sameArguments: true, sameFacts: true, filled: 256 });
});

test('waits of two evaluations of the completion module in one thread all settle', needsCompiler, async () => {
  // The addon has one completion channel per thread: a second copy that opened its own channel, or counted its own
  // wait tokens, left the first copy's waits pending for ever.
  const result = await simulatedJson<{ outcomes: string[] }>(
    `${copies}
     const { streams } = await import(moduleUrl('internal/handles.js'));
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(1 << 16, { stream });
     for (let i = 0; i < 3; i++) { stream.fill(words, i); await stream.synchronize(); } // the first copy's tokens move on
     const second = await copyOf('stream/completion.js');
     const hung = (name) => new Promise((resolve) => setTimeout(() => resolve(name + ': pending after 5 s'), 5000).unref());
     const outcome = (name, promise) => Promise.race([promise.then(() => name + ': settled', (e) => name + ': ' + e.name), hung(name)]);
     stream.fill(words, 7);
     const other = Stream.create();
     other.fill(words, 8);
     const outcomes = await Promise.all([
       outcome('first copy', stream.synchronize()),
       outcome('second copy', second.waitFor('stream', streams.ref(other, 'synchronize'), 'synchronize', () => 'the other stream')),
       outcome('first copy again', other.synchronize()),
     ]);
     console.log(JSON.stringify({ outcomes }));`,
    { env: { SIMULATED_DRIVER_OPERATION_DELAY_US: '20000' } },
  );
  assert.deepEqual(result, { outcomes: ['first copy: settled', 'second copy: settled', 'first copy again: settled'] });
});
