// A sticky fault on one device reaches the streams of another device that waited on its work (waitStream, waitEvent,
// a peer copy reading its memory): their waits reject with that device's fault instead of reporting bytes that were
// never written. On a GPU such a wait never completes; the simulated driver releases it once the device faults, so
// device 0 runs on and only the library's record of the dependency can tell. Note [cross-device dependencies].
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { issuer, needsCompiler, simulatedJson } from '../support/simulated-driver.js';

const BYTES = 64 << 10;
// Each operation's delay: the JS thread makes its calls after the fill long before the fill runs and faults device 1,
// even on a loaded machine (at 500 µs a call after the fill could meet the fault already and throw).
const DELAY_US = 5000;
const FAULT = `cuMemsetD8Async@${issuer}:1=fault:CUDA_ERROR_ILLEGAL_ADDRESS`; // the one fill, device 1's

// Device 1 fills `b` (the fill faults device 1); device 0 waits on that work as `how` says, copies `b` into `c` and
// `c` into `out`; then `wait` settles. Prints what the wait gave, whether `out` took the copy, and the devices' health.
function program(how: 'waitStream' | 'waitEvent' | 'peerCopyOnly', wait: string): string {
  return `import { Device, DeviceBuffer, Event, Stream } from 'cuda-stream-pool';
     const [s0, s1] = [Stream.create({ device: 0 }), Stream.create({ device: 1 })];
     const b = DeviceBuffer.alloc(${BYTES}, { stream: s1 });
     const c = DeviceBuffer.alloc(${BYTES}, { stream: s0 });
     await Promise.all([s0.synchronize(), s1.synchronize()]);
     s1.fill(b, 7);
     ${how === 'waitStream' ? 's0.waitStream(s1);' : how === 'waitEvent' ? 's0.waitEvent(Event.create({ device: 1 }).record(s1));' : 'await new Promise((resolve) => setTimeout(resolve, 50));'}
     s0.copy(c, b);
     const out = new Uint8Array(${BYTES}).fill(0xaa);
     s0.copy(out, c);
     let settled;
     try {
       await (${wait});
       settled = { result: 'resolved' };
     } catch (e) {
       settled = { result: e.name, code: e.code, sticky: e.sticky, message: e.message };
     }
     const untouched = out.every((v) => v === 0xaa);
     console.log(JSON.stringify({ ...settled, untouched, healthy: [Device.get(0).healthy, Device.get(1).healthy] }));
     process.exit(0);`;
}

const waits: [string, string][] = [
  ['await stream.synchronize() while the stream is busy', 's0.synchronize()'],
  ['await stream.synchronize() once the stream is idle', 'new Promise((resolve) => setTimeout(resolve, 100)).then(() => s0.synchronize())'],
  ['stream.synchronizeSync()', 'Promise.resolve().then(() => s0.synchronizeSync())'],
  ['stream.query() once the stream is idle', 'new Promise((resolve) => setTimeout(resolve, 100)).then(() => { if (!s0.query()) throw new Error("busy"); })'],
  ['an event recorded after the copy', 'Event.create({ device: 0 }).record(s0).synchronize()'],
  ['await device.synchronize() of device 0', 'Device.get(0).synchronize()'],
  ['device.synchronizeSync() of device 0', 'Promise.resolve().then(() => Device.get(0).synchronizeSync())'],
];

for (const [name, wait] of waits) {
  test(`device 1 faults after device 0's stream waited on its work: ${name} rejects with device 1's fault, and the copy never lands`, needsCompiler, async () => {
    const result = await simulatedJson<{ result: string; code: string; sticky: boolean; message: string; untouched: boolean; healthy: boolean[] }>(
      program('waitStream', wait),
      { devices: 2, fail: FAULT, operationDelayUs: DELAY_US },
    );
    assert.equal(result.result, 'CudaError', JSON.stringify(result));
    assert.equal(result.code, 'CUDA_ERROR_ILLEGAL_ADDRESS');
    assert.equal(result.sticky, true);
    assert.match(result.message, /on device 0\b.*\(waiting on device 1, which faulted\)/);
    assert.equal(result.untouched, true, 'bytes copied from device 1 after its fault reached the array');
    assert.deepEqual(result.healthy, [true, false]);
  });
}

for (const how of ['waitEvent', 'peerCopyOnly'] as const) {
  test(`device 1 faults, and device 0's stream depends on its work through ${how === 'waitEvent' ? 'stream.waitEvent() of an event of device 1' : 'a peer copy that reads its memory'}: buffer.toArray() rejects`, needsCompiler, async () => {
    const result = await simulatedJson<{ result: string; code: string; message: string; untouched: boolean; healthy: boolean[] }>(
      program(how, 'c.toArray(Uint8Array, { stream: s0 }).then((bytes) => { if (bytes.every((v) => v === 7)) throw new Error("unwritten bytes"); })'),
      { devices: 2, fail: FAULT, operationDelayUs: DELAY_US },
    );
    assert.equal(result.result, 'CudaError', JSON.stringify(result));
    assert.equal(result.code, 'CUDA_ERROR_ILLEGAL_ADDRESS');
    assert.match(result.message, /\(waiting on device 1, which faulted\)/);
    assert.equal(result.untouched, true);
    assert.deepEqual(result.healthy, [true, false]);
  });
}

test('a dependency reaches through another stream of the same device: waitStream on a stream that waited on device 1', needsCompiler, async () => {
  const result = await simulatedJson<{ result: string; message: string }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const [s0, t0, s1] = [Stream.create({ device: 0 }), Stream.create({ device: 0 }), Stream.create({ device: 1 })];
     const b = DeviceBuffer.alloc(4096, { stream: s1 });
     const c = DeviceBuffer.alloc(4096, { stream: t0 });
     await Promise.all([t0.synchronize(), s1.synchronize()]);
     s1.fill(b, 7);
     t0.waitStream(s1);
     t0.copy(c, b);
     s0.waitStream(t0);
     let settled;
     try {
       await s0.synchronize();
       settled = { result: 'resolved' };
     } catch (e) {
       settled = { result: e.name, message: e.message };
     }
     console.log(JSON.stringify(settled));
     process.exit(0);`,
    { devices: 2, fail: FAULT, operationDelayUs: DELAY_US },
  );
  assert.equal(result.result, 'CudaError', JSON.stringify(result));
  assert.match(result.message, /\(waiting on device 1, which faulted\)/);
});

test('a dependency ends with a clean wait: device 1 faulting later leaves device 0\'s stream and device 0 usable', needsCompiler, async () => {
  const result = await simulatedJson<{ first: number[]; later: string; synchronized: string; healthy: boolean[] }>(
    `import { Device, DeviceBuffer, Stream } from 'cuda-stream-pool';
     const [s0, s1] = [Stream.create({ device: 0 }), Stream.create({ device: 1 })];
     const b = DeviceBuffer.alloc(4096, { stream: s1 });
     const c = DeviceBuffer.alloc(4096, { stream: s0 });
     s1.fill(b, 7);
     s0.waitStream(s1);
     s0.copy(c, b);
     const first = [...(await c.toArray(Uint8Array, { stream: s0 })).slice(0, 4)];
     s1.fill(b, 9); // device 1 faults here
     await s1.synchronize().catch(() => {});
     s0.fill(c, 5);
     const later = await c.toArray(Uint8Array, { stream: s0 }).then((bytes) => String(bytes[0]), (e) => e.code);
     const synchronized = await Device.get(0).synchronize().then(() => 'resolved', (e) => e.code);
     console.log(JSON.stringify({ first, later, synchronized, healthy: [Device.get(0).healthy, Device.get(1).healthy] }));
     process.exit(0);`,
    { devices: 2, fail: `cuMemsetD8Async@${issuer}:2=fault:CUDA_ERROR_ILLEGAL_ADDRESS`, operationDelayUs: DELAY_US },
  );
  assert.deepEqual(result, { first: [7, 7, 7, 7], later: '5', synchronized: 'resolved', healthy: [true, false] });
});

// A copy into a JS array queued before the stream waits on device 1's work does not depend on it, and lands once it is
// done. A blocking synchronize that ends early on device 1's fault (its poll found the fault before the stream went
// idle) did not see the stream idle: it must not land that copy then, from staging the device had not written yet.
test('a blocking synchronize that ends on another device\'s fault does not land a copy still in flight', needsCompiler, async () => {
  const result = await simulatedJson<{ result: string; atThrow: string; later: string }>(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const [s0, s1, other] = [Stream.create({ device: 0 }), Stream.create({ device: 1 }), Stream.create({ device: 0 })];
     const a = DeviceBuffer.alloc(${BYTES}, { stream: s0 });
     const b = DeviceBuffer.alloc(${BYTES}, { stream: s1 });
     await Promise.all([s0.synchronize(), s1.synchronize()]);
     s0.fill(a, 3); // issued before device 1's fill in either submission mode: the rule below counts the fills
     s0.copy(new Uint8Array(${BYTES}), a); // staging made before the timed part
     s0.synchronizeSync();
     s1.fill(b, 7); // the fill that faults device 1
     const out = new Uint8Array(${BYTES}).fill(0xaa);
     s0.copy(out, a);
     s0.waitStream(s1);
     const state = () => (out.every((v) => v === 3) ? 'copied' : out.every((v) => v === 0xaa) ? 'untouched' : 'other bytes');
     let result = 'returned';
     try {
       s0.synchronizeSync();
     } catch (e) {
       result = e.code;
     }
     other.synchronizeSync(); // lands what this thread has ready, at once
     const atThrow = state();
     await new Promise((resolve) => setTimeout(resolve, 300));
     await other.synchronize();
     console.log(JSON.stringify({ result, atThrow, later: state() }));
     process.exit(0);`,
    // The copy takes about 65 ms, long after device 1 faults.
    { devices: 2, fail: `cuMemsetD8Async@${issuer}:2=fault:CUDA_ERROR_ILLEGAL_ADDRESS`, operationDelayUs: DELAY_US, env: { SIMULATED_DRIVER_COPY_BYTES_PER_US: '1' } },
  );
  assert.equal(result.result, 'CUDA_ERROR_ILLEGAL_ADDRESS');
  assert.equal(result.atThrow, 'untouched');
  assert.equal(result.later, 'copied');
});
