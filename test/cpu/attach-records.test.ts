// StreamPool.attach and DeviceBuffer.attach given forged records: ids outside the native range are refused rather
// than truncated onto a real object, ids never given out say so, and fields that disagree with the real object are
// named. On the CPU through the null driver (scripts/null-driver.cc) in a child process.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runChild } from '../support/child.js';
import { nativeCheck, needsCompiler } from '../support/native-check.js';

const driver = nativeCheck('libcuda.so.1', { source: 'scripts/null-driver.cc', shared: true, level: '-O2' });

/** Runs `body` (which sets `out`) in a child with the null driver; returns `out`. `attempt(f)` records what `f`
 * threw: `{ name, code, message }`, or `'ok'`. */
async function inChild(body: string): Promise<Record<string, unknown>> {
  const result = await runChild(
    `import { DestroyedError, DeviceBuffer, Stream, StreamPool } from 'cuda-stream-pool';
     const attempt = (f) => { try { f(); return 'ok'; } catch (e) { return { name: e.constructor.name, code: e.code, message: e.message }; } };
     const out = {};
     ${body}
     console.log(JSON.stringify(out, (k, v) => (typeof v === 'bigint' ? String(v) : v)));`,
    { CUDA_STREAM_POOL_LIBCUDA: driver() },
  );
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout.trim()) as Record<string, unknown>;
}

test('StreamPool.attach: a wrapped, unknown or disagreeing record is refused, and the owner stays the attached object', needsCompiler, async () => {
  const out = await inChild(`
    const pool = new StreamPool({ size: 4 });
    const shared = pool.share();
    out.id = shared.id;
    out.wrapped = attempt(() => StreamPool.attach({ ...shared, id: shared.id + 2 ** 32 }));
    out.negative = attempt(() => StreamPool.attach({ ...shared, id: -1 }));
    out.never = attempt(() => StreamPool.attach({ ...shared, id: shared.id + 1000 }));
    out.size = attempt(() => StreamPool.attach({ ...shared, size: 8 }));
    out.device = attempt(() => StreamPool.attach({ ...shared, device: 3 }));
    out.sizeType = attempt(() => StreamPool.attach({ ...shared, size: '4' }));
    out.ownerAfter = StreamPool.attach(shared) === pool;
    pool.destroy();
    out.destroyed = attempt(() => StreamPool.attach(shared));`);
  const id = out.id as number;
  assert.deepEqual(out.wrapped, {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: `"shared.id" must be a pool id from pool.share(): an integer from 1 to 2147483647; received ${id + 2 ** 32} (number).`,
  });
  assert.deepEqual(out.negative, {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: '"shared.id" must be a pool id from pool.share(): an integer from 1 to 2147483647; received -1 (number).',
  });
  assert.deepEqual(out.never, {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: `"shared.id" must be the id of a pool created in this process; received ${id + 1000} (number). There is no such pool.`,
  });
  assert.deepEqual(out.size, {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: `"shared.size" is 8, but pool ${id} has size 4; pass the record from pool.share() unchanged.`,
  });
  assert.deepEqual(out.device, {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: `"shared.device" is 3, but pool ${id} has device 0; pass the record from pool.share() unchanged.`,
  });
  assert.deepEqual(out.sizeType, {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_TYPE',
    message: '"shared.size" must be a number of streams; received "4" (string).',
  });
  assert.equal(out.ownerAfter, true);
  assert.equal((out.destroyed as { name: string }).name, 'DestroyedError');
  assert.match((out.destroyed as { message: string }).message, /^StreamPool\.attach\(\): the StreamPool was destroyed/);
});

test('DeviceBuffer.attach: a wrapped, unknown or disagreeing record is refused; the real record attaches', needsCompiler, async () => {
  const out = await inChild(`
    const stream = Stream.create();
    const buffer = DeviceBuffer.alloc(64, { stream });
    const shared = buffer.share();
    out.id = shared.id;
    out.ptr = shared.ptr;
    out.above = attempt(() => DeviceBuffer.attach({ ...shared, id: shared.id + 2n ** 64n }, { stream }));
    out.below = attempt(() => DeviceBuffer.attach({ ...shared, id: shared.id - 2n ** 64n }, { stream }));
    out.zero = attempt(() => DeviceBuffer.attach({ ...shared, id: 0n }, { stream }));
    out.never = attempt(() => DeviceBuffer.attach({ ...shared, id: shared.id + 1000n }, { stream }));
    out.byteLength = attempt(() => DeviceBuffer.attach({ ...shared, byteLength: 1 << 20 }, { stream }));
    out.ptrForged = attempt(() => DeviceBuffer.attach({ ...shared, ptr: shared.ptr + 16n }, { stream }));
    out.device = attempt(() => DeviceBuffer.attach({ ...shared, device: 1 }, { stream }));
    const view = DeviceBuffer.attach(shared, { stream });
    out.view = [view.byteLength, view.ptr === buffer.ptr, view.borrowed];
    buffer.free();
    out.freed = attempt(() => DeviceBuffer.attach(shared, { stream }));`);
  const id = BigInt(out.id as string);
  const ptr = BigInt(out.ptr as string);
  const range = '"shared.id" must be a buffer id from buffer.share(): an integer from 1n to 2n ** 64n - 1n; received';
  assert.deepEqual(out.above, { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: `${range} ${id + 2n ** 64n}n (bigint).` });
  assert.deepEqual(out.below, { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: `${range} ${id - 2n ** 64n}n (bigint).` });
  assert.deepEqual(out.zero, { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: `${range} 0n (bigint).` });
  assert.deepEqual(out.never, {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: `"shared.id" must be the id of a buffer shared by buffer.share() in this process; received ${id + 1000n}n (bigint). There is no such buffer.`,
  });
  const disagrees = (field: string, given: unknown, real: unknown) => ({
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: `"shared.${field}" is ${given}, but buffer ${id} has ${field} ${real}; pass the record from buffer.share() unchanged.`,
  });
  assert.deepEqual(out.byteLength, disagrees('byteLength', 1 << 20, 64));
  assert.deepEqual(out.ptrForged, disagrees('ptr', ptr + 16n, ptr));
  assert.deepEqual(out.device, disagrees('device', 1, 0));
  assert.deepEqual(out.view, [64, true, true]);
  assert.equal((out.freed as { name: string }).name, 'DestroyedError');
  assert.match((out.freed as { message: string }).message, /^DeviceBuffer\.attach\(\): the DeviceBuffer was destroyed/);
});
