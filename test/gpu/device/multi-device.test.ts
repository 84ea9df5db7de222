// Several GPUs in one process: peer access, copies between devices, waits across devices, frees after another
// device's use, the current context under calls interleaved from three threads, and the device-spreading pool. Tests
// that need two GPUs skip with "needs 2 GPUs" where there are fewer; `npm run test:gpu` accepts exactly that skip.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CudaError, Device, DeviceBuffer, Event, Stream, StreamPool } from 'cuda-stream-pool';
import { gpu, gpus, MS, overlaps, testKernels } from '../../support/gpu.js';
import { interleave } from '../../support/interleave.js';
import { Stamps } from '../../support/stamps.js';
import { startWorker } from '../../support/worker.js';

const two = gpus(2);
const workerUrl = new URL('../../workers/multi-device-worker.js', import.meta.url);

/** `length` bytes that differ from one `seed` to the next. */
const pattern = (length: number, seed: number) => Uint8Array.from({ length }, (_, i) => (i * 31 + seed * 7 + 1) & 0xff);

test('the peer methods refuse the device itself, another type and an ordinal outside the visible devices', gpu, () => {
  const device = Device.get(0);
  for (const call of [() => device.canAccessPeer(device), () => device.enablePeerAccess(0), () => device.peerAccessEnabled(device)])
    assert.throws(call, { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE', message: /^"other" is device 0, the device itself/ });
  assert.throws(() => device.canAccessPeer('1' as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /"other" must be a Device or a device ordinal/ });
  assert.throws(() => device.enablePeerAccess(Device.count()), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' });
});

// Before any test that enables peer access, which stays enabled for the rest of the process.
test('stream.copy() between devices copies the bytes on a stream of either device, staged without peer access and direct with it', two, async () => {
  const [a, b] = [Device.get(0), Device.get(1)];
  assert.equal(a.peerAccessEnabled(b), false);
  assert.equal(b.peerAccessEnabled(a), false);
  using onStreamA = Stream.create({ device: a });
  using onStreamB = Stream.create({ device: b });
  const length = (1 << 20) + 3;
  const roundTrip = async (seed: number) => {
    const source = pattern(length, seed);
    using onA = DeviceBuffer.from(source, { stream: onStreamA });
    using onB = DeviceBuffer.alloc(length, { stream: onStreamB });
    using back = DeviceBuffer.alloc(length, { stream: onStreamA });
    using part = DeviceBuffer.alloc(4096, { stream: onStreamB });
    onStreamB.waitStream(onStreamA); // onA's bytes are written on A's stream
    onStreamB.copy(onB, onA); // device 0 -> device 1, ordered on device 1's stream
    onStreamB.copy(part, onA, { srcOffset: 7, dstOffset: 96, byteLength: 4000 });
    onStreamA.waitStream(onStreamB);
    onStreamA.copy(back, onB); // device 1 -> device 0, ordered on device 0's stream
    assert.deepEqual(await onB.toArray(Uint8Array, { stream: onStreamB }), source);
    assert.deepEqual(await back.toArray(Uint8Array, { stream: onStreamA }), source);
    const partial = await part.toArray(Uint8Array, { stream: onStreamB });
    assert.deepEqual(partial.subarray(96), source.subarray(7, 4007));
  };
  await roundTrip(1);
  assert.ok(a.canAccessPeer(b) && b.canAccessPeer(a), 'the two GPUs have no peer path: the direct half of this test cannot run');
  a.enablePeerAccess(b);
  b.enablePeerAccess(a);
  assert.equal(a.peerAccessEnabled(b), true);
  assert.equal(b.peerAccessEnabled(a), true);
  await roundTrip(2);
});

test('with peer access, a kernel on device 1 writes a DeviceBuffer of device 0 through its address', two, async () => {
  const [a, b] = [Device.get(0), Device.get(1)];
  a.enablePeerAccess(b);
  b.enablePeerAccess(a);
  const { fillU32 } = await testKernels(1);
  using onStreamA = Stream.create({ device: a });
  using onStreamB = Stream.create({ device: b });
  const n = 1 << 16;
  using onA = DeviceBuffer.alloc(4 * n, { stream: onStreamA });
  onStreamA.fill(onA, 0);
  onStreamB.waitStream(onStreamA);
  onA.recordStream(onStreamB); // a raw address on another device's stream: announced, so the free waits for it
  fillU32.launch({ grid: n / 256, block: 256, stream: onStreamB }, onA.ptr, 0xc0ffee, n);
  onStreamA.waitStream(onStreamB);
  const values = await onA.toArray(Uint32Array, { stream: onStreamA });
  assert.equal(values.filter((v) => v === 0xc0ffee).length, n, 'the peer kernel\'s writes reached device 0\'s memory');
});

test('enablePeerAccess() is idempotent and one-way: peerAccessEnabled() reports each direction', two, () => {
  const [a, b] = [Device.get(0), Device.get(1)];
  if (!a.canAccessPeer(b)) {
    assert.throws(() => a.enablePeerAccess(b), (error) => error instanceof CudaError && error.code === 'CUDA_ERROR_PEER_ACCESS_UNSUPPORTED');
    assert.equal(a.peerAccessEnabled(b), false);
    return;
  }
  a.enablePeerAccess(b);
  a.enablePeerAccess(1);
  assert.equal(a.peerAccessEnabled(b), true);
  assert.equal(a.canAccessPeer(1), true);
});

test('copies of host memory, fills and frees still refuse a buffer of another device than the stream\'s', two, () => {
  using onStreamA = Stream.create({ device: 0 });
  using onStreamB = Stream.create({ device: 1 });
  using onB = DeviceBuffer.alloc(64, { stream: onStreamB });
  assert.throws(() => onStreamA.copy(onB, new Uint8Array(64)), { code: 'ERR_INVALID_ARG_VALUE', message: '"dst" is a DeviceBuffer on device 1, but the stream is on device 0.' });
  assert.throws(() => onStreamA.copy(new Uint8Array(64), onB), { code: 'ERR_INVALID_ARG_VALUE', message: '"src" is a DeviceBuffer on device 1, but the stream is on device 0.' });
  assert.throws(() => onStreamA.fill(onB, 0), { code: 'ERR_INVALID_ARG_VALUE', message: '"dst" is a DeviceBuffer on device 1, but the stream is on device 0.' });
  assert.throws(() => onB.free({ stream: onStreamA }), { code: 'ERR_INVALID_ARG_VALUE' });
});

test('stream.waitEvent() with an event of another device orders a kernel on B after a kernel on A (device-side timestamps)', two, async () => {
  await Promise.all([testKernels(0), testKernels(1)]); // loaded before timing starts
  using onStreamA = Stream.create({ device: 0 });
  using onStreamB = Stream.create({ device: 1 });
  const stampsA = new Stamps(1, onStreamA);
  const stampsB = new Stamps(1, onStreamB);
  using seenOnB = DeviceBuffer.alloc(16, { stream: onStreamB });
  onStreamB.fill(seenOnB, 0);
  await Promise.all([onStreamA.synchronize(), onStreamB.synchronize()]);
  await stampsA.spin(onStreamA, 100n * MS, 0);
  using done = onStreamA.recordEvent();
  onStreamB.waitEvent(done);
  await stampsB.spin(onStreamB, 1n * MS, 0);
  onStreamB.copy(seenOnB, stampsA.buffer); // reads A's stamps on B's stream, after the wait
  await onStreamB.synchronize(); // awaiting B's side
  assert.equal(done.query(), true, 'B\'s work finished before the event of A it waits for');
  const [[a0, a1]] = await stampsA.read(onStreamA);
  const [[b0]] = await stampsB.read(onStreamB);
  assert.ok(a1 - a0 >= 100n * MS);
  assert.deepEqual([...(await seenOnB.toArray(BigUint64Array, { stream: onStreamB }))], [a0, a1], 'B read A\'s stamps before A wrote them');
  // The %globaltimer clocks of two GPUs may differ slightly: a 1 ms margin, against the ~100 ms early start of B
  // without the wait (the next test).
  assert.ok(b0 + MS >= a1, `the kernel on B started at ${b0} ns, before the kernel on A ended at ${a1} ns`);
  stampsA.free();
  stampsB.free();
});

test('without a wait, kernels on two devices overlap, as their device-side timestamps show', two, async () => {
  await Promise.all([testKernels(0), testKernels(1)]);
  using onStreamA = Stream.create({ device: 0 });
  using onStreamB = Stream.create({ device: 1 });
  const stampsA = new Stamps(1, onStreamA);
  const stampsB = new Stamps(1, onStreamB);
  await Promise.all([onStreamA.synchronize(), onStreamB.synchronize()]);
  await stampsA.spin(onStreamA, 100n * MS, 0);
  await stampsB.spin(onStreamB, 20n * MS, 0);
  const [[a0, a1], [b0, b1]] = [(await stampsA.read(onStreamA))[0]!, (await stampsB.read(onStreamB))[0]!];
  assert.ok(overlaps([a0, a1], [b0, b1]), `A ran ${a0}..${a1} ns, B ${b0}..${b1} ns`);
  stampsA.free();
  stampsB.free();
});

test('stream.waitStream() across devices orders later work both ways, and awaiting either side settles', two, async () => {
  await Promise.all([testKernels(0), testKernels(1)]);
  using onStreamA = Stream.create({ device: 0 });
  using onStreamB = Stream.create({ device: 1 });
  const stampsA = new Stamps(2, onStreamA);
  const stampsB = new Stamps(2, onStreamB);
  await Promise.all([onStreamA.synchronize(), onStreamB.synchronize()]);
  await stampsA.spin(onStreamA, 50n * MS, 0);
  onStreamB.waitStream(onStreamA);
  await stampsB.spin(onStreamB, 50n * MS, 0); // after A's first kernel
  onStreamA.waitStream(onStreamB);
  await stampsA.spin(onStreamA, 1n * MS, 1); // after B's kernel
  await onStreamA.synchronize(); // A's side: B's kernel is done too
  assert.equal(onStreamB.query(), true);
  await onStreamB.synchronize();
  const [[a0, a1], [a2]] = await stampsA.read(onStreamA);
  const [[b0, b1]] = await stampsB.read(onStreamB);
  assert.ok(b0 + MS >= a1, `B's kernel started at ${b0} ns, before A's first kernel ended at ${a1} ns (it began at ${a0})`);
  assert.ok(a2! + MS >= b1, `A's second kernel started at ${a2} ns, before B's kernel ended at ${b1} ns`);
  stampsA.free();
  stampsB.free();
});

test('Event.elapsedMs() refuses events of two devices; event.record() refuses a stream of another device', two, async () => {
  using onStreamA = Stream.create({ device: 0 });
  using onStreamB = Stream.create({ device: 1 });
  using start = Event.create({ device: 0, timing: true });
  using end = Event.create({ device: 1, timing: true });
  start.record(onStreamA);
  end.record(onStreamB);
  await Promise.all([start.synchronize(), end.synchronize()]);
  assert.throws(() => Event.elapsedMs(start, end), { code: 'ERR_INVALID_ARG_VALUE', message: '"end" is on device 1, but "start" is on device 0; elapsed time is measured between events of one device.' });
  assert.throws(() => start.record(onStreamB), { code: 'ERR_INVALID_ARG_VALUE', message: '"stream" is on device 1, but the event is on device 0.' });
});

test('a free on device A waits for a stream of device B that still reads the buffer', two, async () => {
  const { spin } = await testKernels(1);
  using onStreamA = Stream.create({ device: 0 });
  using onStreamB = Stream.create({ device: 1 });
  const source = pattern(1 << 16, 9);
  const onA = DeviceBuffer.from(source, { stream: onStreamA });
  using onB = DeviceBuffer.alloc(source.length, { stream: onStreamB });
  onStreamB.waitStream(onStreamA);
  spin.launch({ grid: 1, block: 1, stream: onStreamB }, 200n * MS, 0n); // B is busy for 200 ms ...
  onStreamB.copy(onB, onA); // ... then reads A's buffer
  await onA[Symbol.asyncDispose](); // frees on A, and resolves once the free was reached
  assert.equal(onStreamB.query(), true, 'the free on device 0 was reached while device 1 had yet to read the buffer');
  using reuse = DeviceBuffer.alloc(source.length, { stream: onStreamA }); // may get the freed memory back
  onStreamA.fill(reuse, 0xee);
  await onStreamA.synchronize();
  assert.deepEqual(await onB.toArray(Uint8Array, { stream: onStreamB }), source);
});

test('calls on two devices interleaved from the main thread and two workers each find their device\'s context current and give right results', two, async () => {
  const workers = [1, 2].map((seed) => startWorker(workerUrl, { mode: 'interleave', seed, rounds: 40 }));
  const mine = await interleave(0, 40);
  const theirs = await Promise.all(workers.map(async (w) => ((await w.next()) as { failures: string[] }).failures));
  assert.deepEqual([mine, ...theirs], [[], [], []]);
  assert.deepEqual(await Promise.all(workers.map((w) => w.exit)), [0, 0]);
});

test('StreamPool.forDevices() over one device hands out its default pool\'s streams and refuses a device named twice', gpu, () => {
  const group = StreamPool.forDevices([Device.get(0)]);
  const pool = StreamPool.default(0);
  assert.deepEqual(group.devices, [Device.get(0)]);
  const index = 5;
  assert.equal(group.getStream(index), pool.getStream(index));
  const next = group.getStream();
  assert.equal(next.device, Device.get(0));
  assert.ok(Array.from({ length: pool.size }, (_, i) => pool.getStream(i)).includes(next));
  assert.throws(() => StreamPool.forDevices([0, Device.get(0)]), { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE', message: '"devices[1]" is device 0 again; name each device once.' });
  group.destroy();
  assert.equal(pool.destroyed, false);
  assert.equal(pool.getStream(0).device, Device.get(0));
});

test('StreamPool.forDevices() spreads getStream() and run() over the devices, and allocations in run() land on the leased stream\'s device', two, async () => {
  const group = StreamPool.forDevices();
  assert.deepEqual(group.devices.map((device) => device.ordinal), Array.from({ length: Device.count() }, (_, i) => i));
  using pair = StreamPool.forDevices([1, 0]);
  const handed = Array.from({ length: 4 }, () => pair.getStream());
  assert.deepEqual(handed.map((stream) => stream.device.ordinal), [1, 0, 1, 0]);
  assert.notEqual(handed[0], handed[2]); // the device's next stream
  const leasesBefore = pair.stats().map((stats) => stats.leaseCounts.reduce((sum, n) => sum + n, 0));
  const results = await Promise.all(
    Array.from({ length: 8 }, (_, task) =>
      pair.run(async (stream) => {
        using buffer = DeviceBuffer.alloc(4 * 256); // no stream, no device: the leased stream's
        stream.fill(buffer, task + 1, { type: 'u32' });
        const values = await buffer.toArray(Uint32Array, { stream });
        return { device: stream.device.ordinal, bufferDevice: buffer.device.ordinal, right: values.every((v) => v === task + 1) };
      }),
    ),
  );
  assert.deepEqual(results.map((r) => r.device), [1, 0, 1, 0, 1, 0, 1, 0]);
  assert.deepEqual(results.map((r) => r.bufferDevice), [1, 0, 1, 0, 1, 0, 1, 0]);
  assert.ok(results.every((r) => r.right));
  const leasesAfter = pair.stats().map((stats) => stats.leaseCounts.reduce((sum, n) => sum + n, 0));
  assert.deepEqual(leasesAfter.map((n, i) => n - leasesBefore[i]!), [4, 4]);
  assert.deepEqual(pair.stats().map((stats) => stats.device), [1, 0]);
});

test('a worker\'s StreamPool.forDevices() spreads over the same default pools: its leases count in this thread\'s stats()', two, async () => {
  using group = StreamPool.forDevices([0, 1]);
  const leases = () => group.stats().map((stats) => stats.leaseCounts.reduce((sum, n) => sum + n, 0));
  const before = leases();
  const worker = startWorker(workerUrl, { mode: 'group' });
  const { tasks } = (await worker.next()) as { tasks: [number, number, boolean][] };
  assert.equal(await worker.exit, 0);
  assert.deepEqual(tasks, [[0, 0, true], [1, 1, true], [0, 0, true], [1, 1, true]]);
  assert.deepEqual(leases().map((n, i) => n - before[i]!), [2, 2]);
});

test('DeviceBuffer.alloc() with a stream of device 1 and no device allocates on device 1', two, () => {
  using stream = Stream.create({ device: 1 });
  using buffer = DeviceBuffer.alloc(256, { stream });
  assert.equal(buffer.device, Device.get(1));
  assert.throws(() => DeviceBuffer.alloc(256, { stream, device: 0 }), { code: 'ERR_INVALID_ARG_VALUE', message: '"options.stream" is on device 1, but "options.device" is device 0.' });
});

test('Stream.fromHandle() of a library stream on device 1 takes its device when none is given and refuses another', two, () => {
  const owner = Stream.create({ device: 1 });
  const wrapper = Stream.fromHandle(owner.handle);
  assert.equal(wrapper.device.ordinal, 1);
  assert.equal(wrapper.id, owner.id);
  assert.throws(() => Stream.fromHandle(owner.handle, 0), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /"device" is device 0, but the handle is of a stream this library created on device 1/,
  });
  owner.destroy();
  assert.throws(() => wrapper.query(), { name: 'DestroyedError' }, 'tied to the library stream, not a foreign handle');
});
