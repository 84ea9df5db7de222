// How copies read a caller's host memory: through the intrinsic getters (a shadowed `buffer`, `byteOffset` or
// `byteLength` changes nothing), and a detached ArrayBuffer is an argument error, never an empty copy. On the CPU
// through the null driver (scripts/null-driver.cc), whose device memory is host memory, so bytes can be checked.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { isDetached, viewBytes } from '#library/memory/host-views.js';
import { runChild } from '../support/child.js';
import { nativeCheck, needsCompiler } from '../support/native-check.js';

const driver = nativeCheck('libcuda.so.1', { source: 'scripts/null-driver.cc', shared: true, level: '-O2' });

async function inChild(body: string): Promise<Record<string, unknown>> {
  const result = await runChild(
    `import { DeviceBuffer, Stream } from 'cuda-stream-pool';
     const attempt = (f) => { try { f(); return 'ok'; } catch (e) { return { name: e.constructor.name, code: e.code, message: e.message }; } };
     const detach = (buffer) => structuredClone(buffer, { transfer: [buffer] });
     const out = {};
     const stream = Stream.create();
     ${body}
     console.log(JSON.stringify(out));`,
    { CUDA_STREAM_POOL_LIBCUDA: driver() },
  );
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout.trim()) as Record<string, unknown>;
}

test('viewBytes reads the intrinsic slots of typed arrays and DataViews, whatever their own properties say', () => {
  const memory = new ArrayBuffer(16);
  const typed = new Uint16Array(memory, 4, 3);
  const view = new DataView(memory, 2, 5);
  for (const shadowed of [typed, view]) {
    Object.defineProperty(shadowed, 'buffer', { value: new ArrayBuffer(99) });
    Object.defineProperty(shadowed, 'byteOffset', { value: 1 });
    Object.defineProperty(shadowed, 'byteLength', { value: 1e9 });
  }
  assert.deepEqual(viewBytes(typed), { buffer: memory, byteOffset: 4, byteLength: 6, detached: false });
  assert.deepEqual(viewBytes(view), { buffer: memory, byteOffset: 2, byteLength: 5, detached: false });
  const gone = new Uint8Array(8);
  structuredClone(gone.buffer, { transfer: [gone.buffer] });
  assert.deepEqual(viewBytes(gone), { buffer: gone.buffer, byteOffset: 0, byteLength: 0, detached: true });
  assert.equal(isDetached(gone.buffer), true);
  assert.equal(isDetached(new ArrayBuffer(0)), false);
  assert.equal(isDetached(new SharedArrayBuffer(0)), false);
});

test('DeviceBuffer.from and stream.copy upload the view\'s own bytes, not those of a shadowed buffer property', needsCompiler, async () => {
  const out = await inChild(`
    const decoy = new Uint8Array([9, 9, 9, 9, 9, 9]).buffer;
    const source = new Uint8Array([1, 2, 3, 4, 5, 6]).subarray(1, 5);
    Object.defineProperty(source, 'buffer', { value: decoy });
    Object.defineProperty(source, 'byteOffset', { value: 0 });
    Object.defineProperty(source, 'byteLength', { value: 6 });
    const fromView = DeviceBuffer.from(source, { stream });
    out.from = [fromView.byteLength, [...await fromView.toArray(Uint8Array, { stream })]];
    const target = DeviceBuffer.alloc(4, { stream });
    const data = new DataView(new Uint8Array([7, 8, 9, 10, 11]).buffer, 1, 4);
    Object.defineProperty(data, 'buffer', { value: decoy });
    Object.defineProperty(data, 'byteLength', { value: 1 });
    stream.copy(target, data);
    out.copy = [...await target.toArray(Uint8Array, { stream })];
    const into = new Uint8Array(8);
    Object.defineProperty(into, 'byteOffset', { value: 4 });
    stream.copy(into, target);
    await stream.synchronize();
    out.into = [...into];`);
  assert.deepEqual(out.from, [4, [2, 3, 4, 5]]);
  assert.deepEqual(out.copy, [8, 9, 10, 11]);
  assert.deepEqual(out.into, [8, 9, 10, 11, 0, 0, 0, 0]);
});

test('a detached source or destination is ERR_INVALID_ARG_VALUE naming the argument and the detach', needsCompiler, async () => {
  const out = await inChild(`
    const device = DeviceBuffer.alloc(16, { stream });
    const view = new Float32Array(4); detach(view.buffer);
    const memory = new ArrayBuffer(16); detach(memory);
    out.from = attempt(() => DeviceBuffer.from(view, { stream }));
    out.src = attempt(() => stream.copy(device, view));
    out.srcMemory = attempt(() => stream.copy(device, memory));
    out.dst = attempt(() => stream.copy(view, device));
    out.dstMemory = attempt(() => stream.copy(memory, device));
    out.empty = attempt(() => stream.copy(device, new Uint8Array(0)));`);
  const detached = (name: string, what: string) => ({
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: `"${name}" is ${what} is detached (transferred, or posted to another thread with a transfer list), so it has no bytes to copy; pass live memory.`,
  });
  assert.deepEqual(out.from, detached('source', 'a view of an ArrayBuffer that'));
  assert.deepEqual(out.src, detached('src', 'a view of an ArrayBuffer that'));
  assert.deepEqual(out.srcMemory, detached('src', 'an ArrayBuffer that'));
  assert.deepEqual(out.dst, detached('dst', 'a view of an ArrayBuffer that'));
  assert.deepEqual(out.dstMemory, detached('dst', 'an ArrayBuffer that'));
  assert.equal(out.empty, 'ok', 'an empty live view is still an empty copy');
});
