// HostRegistration on a device: a registered ArrayBuffer's bytes go to the device and back byte for byte as pinned
// copies (read when the copy runs, not at the call), a transferred registered buffer is refused while its memory
// stays registered, and unregistering while copies are queued leaves them correct.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cuda, DeviceBuffer, HostRegistration, PinnedBuffer, Stream } from 'cuda-stream-pool';
import { gpu, spinBehindGate, testKernels } from '../../support/gpu.js';

const BYTES = 16 << 20;

test('a registered ArrayBuffer goes to the device and back byte for byte, and a copy reads it when it runs', gpu, async () => {
  using stream = Stream.create();
  using device = DeviceBuffer.alloc(BYTES, { stream });
  const source = Uint32Array.from({ length: BYTES / 4 }, (_, i) => (i * 2654435761) >>> 0);
  const back = new Uint32Array(BYTES / 4);
  using a = HostRegistration.register(source);
  using b = HostRegistration.register(back);
  assert.ok(a.registered && b.registered && cuda.liveObjects().registeredBytes >= 2 * BYTES);
  stream.copy(device, source);
  stream.copy(back, device);
  await stream.synchronize();
  assert.deepEqual(back, source);
  // Behind a gate, the copy has not run yet when the source changes: a pinned copy takes the bytes of when it runs.
  const { spin } = await testKernels();
  const gate = spinBehindGate(spin, [stream], 50_000_000n);
  stream.copy(device, source);
  source.fill(7);
  gate.destroy();
  stream.copy(back, device);
  await stream.synchronize();
  assert.deepEqual(new Set(back), new Set([7]));
});

test('a transferred registered buffer is refused, its memory stays registered, and unregistering under queued copies is safe', gpu, async () => {
  using stream = Stream.create();
  using device = DeviceBuffer.alloc(BYTES, { stream });
  const memory = new ArrayBuffer(BYTES);
  new Uint8Array(memory).fill(5);
  const registration = HostRegistration.register(memory);
  for (let i = 0; i < 8; i++) stream.copy(device, memory);
  const moved = structuredClone(memory, { transfer: [memory] });
  assert.throws(() => stream.copy(device, memory), { code: 'ERR_INVALID_ARG_VALUE', message: /^"src" is an ArrayBuffer that is detached/ });
  registration.unregister(); // the eight copies are still queued: the pages stay locked until they are done
  const out = await device.toArray(Uint8Array, { stream });
  assert.deepEqual(new Set(out), new Set([5]));
  await stream.synchronize();
  PinnedBuffer.cacheInfo();
  assert.equal(cuda.liveObjects().registeredBytes, 0);
  assert.equal(moved.byteLength, BYTES);
});
