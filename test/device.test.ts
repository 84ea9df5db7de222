import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cuda, Device } from 'cuda-stream-pool';
import { gpu } from './support/gpu.js';

test('Device.count() is a non-negative integer and matches cuda.available', () => {
  const count = Device.count();
  assert.ok(Number.isInteger(count) && count >= 0);
  assert.equal(count > 0, cuda.available);
});

test('Device.get() rejects non-integer ordinals with ERR_INVALID_ARG_TYPE', () => {
  assert.throws(() => Device.get('0' as unknown as number), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
});

test('Device.get() returns the same object on every call and reports real properties', gpu, () => {
  const device = Device.get(0);
  assert.equal(Device.get(0), device);
  assert.equal(device.ordinal, 0);
  assert.match(device.name, /\S/);
  assert.ok(device.computeCapability.major >= 5);
  assert.ok(device.multiprocessorCount > 0);
  assert.ok(device.totalMemoryBytes > 2 ** 30);
  assert.ok(device.asyncEngineCount >= 1);
  assert.ok(device.streamPriorityRange.greatest <= device.streamPriorityRange.least);
  assert.equal(device.healthy, true);
  assert.equal(typeof cuda.driverVersion, 'number');
  assert.ok(cuda.driverVersion! >= 12000);
});

test('Device.get() with an ordinal past the visible devices is ERR_OUT_OF_RANGE naming the range', gpu, () => {
  assert.throws(() => Device.get(Device.count()), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: new RegExp(`"ordinal" must be an integer from 0 to ${Device.count() - 1}.*received ${Device.count()}`),
  });
});

test('Device.get() rejects negative, fractional and NaN ordinals with ERR_OUT_OF_RANGE, GPU or not', () => {
  for (const ordinal of [-1, 1.5, NaN, Infinity])
    assert.throws(() => Device.get(ordinal), {
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: new RegExp(`"ordinal" must be a non-negative integer \\(a device ordinal\\); received ${ordinal}`),
    });
});

test('Device, MemoryPool, Kernel and StreamLease have no public constructor', async () => {
  const { MemoryPool, Kernel, StreamLease } = await import('cuda-stream-pool');
  for (const [Class, factory] of [[Device, 'Device.get'], [MemoryPool, 'device.memoryPool'], [Kernel, 'module.getFunction'], [StreamLease, 'pool.acquire']] as const)
    assert.throws(() => new (Class as unknown as new () => unknown)(), {
      name: 'TypeError',
      code: 'ERR_ILLEGAL_CONSTRUCTOR',
      message: new RegExp(`^${Class.name} has no public constructor; use ${factory.replace('.', '\\.')}`),
    });
});
