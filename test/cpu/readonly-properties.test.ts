// The `readonly` properties of the public classes are read-only at run time too: an assignment throws a TypeError
// in strict mode (every ES module is strict) and changes nothing the library reads back. On the CPU through the
// null driver (scripts/null-driver.cc) in a child process.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runChild } from '../support/child.js';
import { nativeCheck, needsCompiler } from '../support/native-check.js';

const driver = nativeCheck('libcuda.so.1', { source: 'scripts/null-driver.cc', shared: true, level: '-O2' });

test('assigning a readonly property throws a TypeError and leaves the value and the object\'s behaviour as they were', needsCompiler, async () => {
  const result = await runChild(
    `import { Device, DeviceBuffer, Event, ManagedBuffer, Module, PinnedBuffer, Stream, StreamPool } from 'cuda-stream-pool';
     const out = {};
     // Assigns each property a decoy; records [TypeError thrown, value unchanged] per property.
     const check = (label, object, decoys) => {
       for (const [key, decoy] of Object.entries(decoys)) {
         const before = object[key];
         let threw = false;
         try { object[key] = decoy; } catch (e) { threw = e instanceof TypeError; }
         out[label + '.' + key] = [threw, object[key] === before];
       }
     };
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(64, { stream });
     check('DeviceBuffer', buffer, { byteLength: 1 << 20, ptr: 1n, device: {} });
     out.subarray = buffer.subarray(0).byteLength;
     out.share = buffer.share().byteLength;
     const pool = new StreamPool({ size: 2 });
     check('StreamPool', pool, { size: 64, device: {}, priority: -5, nonBlocking: false });
     out.stats = [pool.stats().size, pool.stats().device];
     check('ManagedBuffer', ManagedBuffer.alloc(32), { byteLength: 4096, ptr: 1n, device: {} });
     check('PinnedBuffer', PinnedBuffer.alloc(16), { byteLength: 4096 });
     check('MemoryPool', Device.get(0).memoryPool, { device: {} });
     const module = await Module.load('.version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k() { ret; }');
     check('Module', module, { device: {}, ptx: 'x', cubin: new Uint8Array(1) });
     check('Kernel', module.getFunction('k', []), { name: 'other', signature: ['u32'] });
     check('StreamPoolGroup', StreamPool.forDevices(), { devices: [] });
     check('Device', Device.get(0), { ordinal: 3, name: 'x', computeCapability: {}, multiprocessorCount: 1, totalMemoryBytes: 1, asyncEngineCount: 9, streamPriorityRange: {}, memoryPoolsSupported: false });
     check('Stream', stream, { device: {}, id: 7n, priority: -3, nonBlocking: false });
     check('Event', Event.create(), { device: {}, timing: true });
     out.ordinalUsed = DeviceBuffer.alloc(64).device.ordinal;
     console.log(JSON.stringify(out));`,
    { CUDA_STREAM_POOL_LIBCUDA: driver() },
  );
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout.trim()) as Record<string, unknown>;
  const { subarray, share, stats, ordinalUsed, ...checked } = out;
  assert.equal(Object.keys(checked).length, 32);
  for (const [property, outcome] of Object.entries(checked)) assert.deepEqual(outcome, [true, true], property);
  assert.equal(subarray, 64);
  assert.equal(share, 64);
  assert.deepEqual(stats, [2, 0]);
  assert.equal(ordinalUsed, 0);
});
