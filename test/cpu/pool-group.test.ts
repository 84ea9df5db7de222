// The device-spreading group of stream pools, tested on the CPU (CI has no GPU): the group's policy (GroupCore, what
// StreamPoolGroup delegates to) runs over real pool policies (PoolCore) whose streams are fakes, one pool per
// "device". On GPUs: test/gpu/device/multi-device.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { cuda, currentStream, CudaUnavailableError, DestroyedError, Device, StreamPool } from 'cuda-stream-pool';
import { PoolCore, type PoolCounters, type PoolStreams } from '#library/pool/pool-policy.js';
import type { StreamLease } from '#library/pool/stream-lease.js';
import { GroupCore, type PoolGroupMember } from '#library/pool/group-policy.js';
import { poolLayout } from '#library/pool/pool-words.js';
import { enterScope } from '#library/stream/scope.js';

/** A fake stream: says which device and stream index it is. */
interface Fake {
  fakeDevice: number;
  streamIndex: number;
}
const fake = (fakeDevice: number, streamIndex: number): Fake => ({ fakeDevice, streamIndex });

type Member = PoolGroupMember<Fake, StreamLease<Fake>, PoolCounters>;

/** Each fake device's memory limit (bytes). */
const MEMORY_LIMIT = 100;

/** A pool policy over `size` fake streams of device `device`, as a group member. */
function member(device: number, size: number): Member & { core: PoolCore<Fake> } {
  const poolStreams: PoolStreams<Fake> = {
    streams: Array.from({ length: size }, (_, streamIndex) => fake(device, streamIndex)),
    leaseView: (streamIndex) => fake(device, streamIndex),
    retire: () => {},
    isIdle: () => true,
    used: () => false,
    scope: enterScope,
    drain: async () => {},
  };
  const core = new PoolCore<Fake>(new Int32Array(new SharedArrayBuffer(poolLayout(size).words * 4)), size, 1, poolStreams, MEMORY_LIMIT);
  return {
    core,
    getStream: (index) => core.getStream(index),
    tryAcquire: (options) => core.tryAcquire(options),
    acquire: (options) => core.acquire(options),
    stats: () => core.counters(),
  };
}

/** A group over `sizes.length` fake devices with `sizes[d]` streams each. */
function group(...sizes: number[]) {
  const members = sizes.map((size, device) => member(device, size));
  return { members, group: new GroupCore<Fake, StreamLease<Fake>, PoolCounters>(members, enterScope) };
}

const where = (stream: Fake) => [stream.fakeDevice, stream.streamIndex];

test('a memory budget goes to each device\'s pool: a device where it does not fit is skipped, and the wait is for memory there', async () => {
  const { group: g, members } = group(2, 2);
  const first = g.tryAcquire({ memoryBytes: 70 })!;
  assert.equal(where(first.stream)[0], 0);
  const second = g.tryAcquire({ memoryBytes: 70 })!;
  assert.equal(where(second.stream)[0], 1, 'device 1 takes it');
  assert.equal(g.tryAcquire({ memoryBytes: 40 }), undefined, 'fits on neither device now');
  const waiting = g.acquire({ memoryBytes: 40 });
  const small = g.tryAcquire({ memoryBytes: 30 })!;
  assert.ok(small, 'a budget that fits beside one of them is granted');
  assert.deepEqual(members.map((m) => m.core.counters().memoryWaiters), [1, 0], 'the wait queued on the device whose turn it was');
  first.release();
  const granted = await waiting;
  assert.deepEqual([where(granted.stream)[0], granted.memoryBytes], [0, 40]);
  assert.throws(() => g.tryAcquire({ memoryBytes: 101 }), { code: 'ERR_OUT_OF_RANGE', message: /memory limit, 100 bytes/ });
  await assert.rejects(g.acquire({ memoryBytes: -1 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => g.tryAcquire({ memory: 1 } as never), { code: 'ERR_INVALID_ARG_VALUE' });
  for (const lease of [second, small, granted]) lease.release();
  assert.deepEqual(members.map((m) => m.core.counters().memoryAdmittedBytes), [0, 0]);
});

test('getStream() goes round-robin over the devices, then over each device\'s streams', () => {
  const { group: g } = group(3, 3);
  const got = Array.from({ length: 7 }, () => where(g.getStream()));
  assert.deepEqual(got, [[0, 0], [1, 0], [0, 1], [1, 1], [0, 2], [1, 2], [0, 0]]);
});

test('getStream() with devices of different sizes walks each device\'s streams in its own pool order', () => {
  const { group: g } = group(1, 2, 3);
  const got = Array.from({ length: 9 }, () => where(g.getStream()));
  assert.deepEqual(got, [[0, 0], [1, 0], [2, 0], [0, 0], [1, 1], [2, 1], [0, 0], [1, 0], [2, 2]]);
});

test('getStream(index) is stream floor(index / devices) % size of device index % devices, the same on every call', () => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 4 }), fc.nat(1_000_000), (sizes, index) => {
      const { group: g } = group(...sizes);
      const device = index % sizes.length;
      const expected = [device, Math.floor(index / sizes.length) % sizes[device]!];
      assert.deepEqual(where(g.getStream(index)), expected);
      assert.deepEqual(where(g.getStream(index)), expected);
    }),
  );
});

test('getStream(index) counts in the device pool\'s explicit hand-outs, not its round-robin cursor', () => {
  const { group: g, members } = group(2, 2);
  g.getStream(3); // device 1, stream 1
  assert.deepEqual(members[1]!.stats().handOuts, [0, 1]);
  assert.deepEqual(members[0]!.stats().handOuts, [0, 0]);
  assert.deepEqual(where(g.getStream()), [0, 0]);
});

test('getStream(index) refuses a negative, fractional or non-number index', () => {
  const { group: g } = group(2, 2);
  assert.throws(() => g.getStream(-1), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /"index" must be an integer from 0 to 9007199254740991; received -1/ });
  assert.throws(() => g.getStream(1.5), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => g.getStream('1' as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
});

test('tryAcquire() takes turns between the devices and skips a device whose streams are all leased', () => {
  const { group: g } = group(1, 2);
  const first = g.tryAcquire()!;
  const second = g.tryAcquire()!;
  const third = g.tryAcquire()!; // device 0 has no free stream: device 1 again
  assert.deepEqual([where(first.stream), where(second.stream), where(third.stream)], [[0, 0], [1, 0], [1, 1]]);
  assert.equal(g.tryAcquire(), undefined);
  second.release();
  assert.deepEqual(where(g.tryAcquire()!.stream), [1, 0]);
  first.release();
  third.release();
});

test('acquire() waits on the device whose turn it is when every stream is leased, and gets that device\'s stream back', async () => {
  const { group: g } = group(1, 1);
  const a = await g.acquire();
  const b = await g.acquire();
  assert.deepEqual([where(a.stream), where(b.stream)], [[0, 0], [1, 0]]);
  const waiting = g.acquire(); // turn: device 0
  let granted: StreamLease<Fake> | undefined;
  void waiting.then((lease) => (granted = lease));
  b.release(); // device 1's stream comes back, but the wait is on device 0
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(granted, undefined);
  a.release();
  const lease = await waiting;
  assert.deepEqual(where(lease.stream), [0, 0]);
  lease.release();
});

test('acquire() rejects with the signal\'s reason when it aborts, and with a TypeError for bad options', async () => {
  const { group: g } = group(1);
  const held = g.tryAcquire()!;
  const controller = new AbortController();
  const waiting = g.acquire({ signal: controller.signal });
  controller.abort(new Error('gave up'));
  await assert.rejects(waiting, { message: 'gave up' });
  await assert.rejects(g.acquire({ signl: controller.signal } as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE', message: /did you mean "signal"/ });
  held.release();
});

test('run() makes the leased stream current inside fn, releases it afterwards and settles with fn\'s outcome', async () => {
  const { group: g, members } = group(1, 1);
  const seen: number[][] = [];
  const values = await Promise.all(
    [0, 1, 2, 3].map((i) =>
      g.run(async (stream) => {
        assert.equal(currentStream(), stream);
        await new Promise((resolve) => setTimeout(resolve, 5));
        seen.push(where(stream));
        return i * 10;
      }),
    ),
  );
  assert.deepEqual(values, [0, 10, 20, 30]);
  assert.equal(seen.filter(([device]) => device === 0).length, 2);
  assert.equal(seen.filter(([device]) => device === 1).length, 2);
  assert.deepEqual(members.map((m) => m.stats().leased), [0, 0]);
  const failure = new Error('task failed');
  await assert.rejects(g.run(() => Promise.reject(failure)), (error) => error === failure);
  await assert.rejects(g.run('fn' as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  assert.deepEqual(members.map((m) => m.stats().leased), [0, 0]);
});

test('stats() reports each device\'s pool counters in device order', async () => {
  const { group: g } = group(2, 3);
  g.getStream();
  g.getStream();
  g.getStream();
  await g.run(() => {});
  const stats = g.stats();
  assert.deepEqual(stats.map((s) => s.handOuts), [[1, 1], [1, 0, 0]]);
  assert.deepEqual(stats.map((s) => s.leaseCounts.reduce((a, b) => a + b, 0)), [1, 0]);
});

test('destroy() detaches the group only: its methods throw DestroyedError, the pools and their leases go on', async () => {
  const { group: g, members } = group(1, 1);
  const lease = g.tryAcquire()!;
  g.destroy();
  g.destroy();
  assert.equal(g.destroyed, true);
  for (const call of [() => g.getStream(), () => g.getStream(0), () => g.tryAcquire(), () => g.stats()])
    assert.throws(call, (error) => error instanceof DestroyedError && error.resource === 'StreamPoolGroup' && /detaches the group/.test(error.message));
  await assert.rejects(g.acquire(), DestroyedError);
  await assert.rejects(g.run(() => {}), DestroyedError);
  assert.equal(members[0]!.stats().leased, 1);
  lease.release();
  assert.equal(members[0]!.core.tryAcquire() !== undefined, true);
});

test('StreamPool.forDevices() checks the shape of its argument before touching the driver', () => {
  assert.throws(() => StreamPool.forDevices(0 as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /"devices" must be an array of Devices or device ordinals; received 0/ });
  assert.throws(() => StreamPool.forDevices([]), { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE', message: '"devices" must name at least one device; received an empty array.' });
  assert.throws(() => StreamPool.forDevices([-1]), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /^"devices\[0\]" must be a non-negative integer \(a device ordinal\); received -1 \(number\)\.$/ });
});

test('StreamPool.forDevices() throws CudaUnavailableError where there is no GPU, else groups every visible device', () => {
  if (!cuda.available) {
    assert.throws(() => StreamPool.forDevices(), CudaUnavailableError);
    assert.throws(() => StreamPool.forDevices([0]), CudaUnavailableError);
    return;
  }
  assert.deepEqual(StreamPool.forDevices().devices.map((device) => device.ordinal), Array.from({ length: Device.count() }, (_, i) => i));
});

test('StreamPool.forDevices() refuses a device named twice before it needs the driver', () => {
  for (const devices of [[0, 0], [1, 0, 1]])
    assert.throws(() => StreamPool.forDevices(devices), (error: NodeJS.ErrnoException) => error.code === 'ERR_INVALID_ARG_VALUE' && /devices\[\d\].*again; name each device once/.test(error.message));
});
