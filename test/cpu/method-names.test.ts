// Error messages name the method the user called (`DeviceBuffer.alloc()`, `stream.waitEvent()`, `buffer.toArray()`,
// `stream.copy()`, `kernel.launch()`), not an inner step; a Proxy is described as one; a missing NVRTC says NVRTC.
// On the CPU: pure checks, and the null driver (scripts/null-driver.cc) in a child process.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CudaUnavailableError, DestroyedError } from 'cuda-stream-pool';
import { invalidType } from '#library/internal/validate.js';
import { runChild } from '../support/child.js';
import { nativeCheck, needsCompiler } from '../support/native-check.js';

const driver = nativeCheck('libcuda.so.1', { source: 'scripts/null-driver.cc', shared: true, level: '-O2' });

test('DestroyedError: a qualified method names the call; `method` stays the bare name', () => {
  const own = new DestroyedError('Stream', 'query');
  assert.equal(own.message, 'Stream.query(): the Stream was destroyed');
  assert.equal(own.method, 'query');
  const other = new DestroyedError('Stream', 'DeviceBuffer.alloc');
  assert.equal(other.message, 'DeviceBuffer.alloc(): the Stream was destroyed');
  assert.deepEqual([other.resource, other.method], ['Stream', 'alloc']);
  assert.equal(new DestroyedError('Event', 'stream.waitEvent').message, 'stream.waitEvent(): the Event was destroyed');
});

test('a Proxy of an object is described as a Proxy, not as an instance of its target\'s class', () => {
  class Stream {}
  const error = invalidType('options.stream', 'a Stream', new Proxy(new Stream(), {}));
  assert.equal(error.message, '"options.stream" must be a Stream; received a Proxy (of an object; pass the object itself, not a Proxy of it).');
  assert.equal(invalidType('x', 'a Stream', new Stream()).message, '"x" must be a Stream; received an instance of Stream.');
});

test('an array is described by its first elements, without running an element\'s getter', () => {
  assert.equal(invalidType('options.grid', 'a number or an array of 1 to 3 integers', [64, 2, 1, 1]).message,
    '"options.grid" must be a number or an array of 1 to 3 integers; received an array [64, 2, 1, 1].');
  let getterRan = false;
  const odd: unknown[] = [1n, 'x', [2], { a: 1 }, 5, 6];
  Object.defineProperty(odd, 2, { get: () => { getterRan = true; return 3; } });
  delete odd[1];
  assert.equal(invalidType('block', 'an array of integers', odd).message,
    '"block" must be an array of integers; received an array [1n, empty, a getter, an object, ... 2 more].');
  assert.equal(getterRan, false);
  assert.equal(invalidType('x', 'a number', []).message, '"x" must be a number; received an array [].');
  const { proxy, revoke } = Proxy.revocable([], {});
  revoke();
  assert.equal(invalidType('grid', 'an array of integers', [proxy, [1], 'a'.repeat(30)]).message,
    `"grid" must be an array of integers; received an array [a Proxy, an array, "${'a'.repeat(20)}..."].`);
});

test('an object is described by its class without running a getter of the object or of the class', () => {
  let ran = 0;
  const trap = { get constructor() { ran++; return Object; } };
  assert.equal(invalidType('byteLength', 'an integer', trap).message, '"byteLength" must be an integer; received an object.');
  class Named {
    static get name(): string {
      ran++;
      return 'Named';
    }
  }
  assert.equal(invalidType('options.stream', 'a Stream', new Named()).message, '"options.stream" must be a Stream; received an object.');
  assert.equal(ran, 0);
  assert.equal(invalidType('x', 'a Stream', Object.create(null)).message, '"x" must be a Stream; received an object with a null prototype.');
  assert.equal(invalidType('x', 'a Stream', new (class Plain {})()).message, '"x" must be a Stream; received an instance of Plain.');
  assert.equal(invalidType('x', 'a Stream', {}).message, '"x" must be a Stream; received an instance of Object.');
});

test('CudaUnavailableError for NVRTC says NVRTC is missing, not that CUDA is unavailable', () => {
  const error = new CudaUnavailableError('libnvrtc.so.12 was not found.', 'NVRTC');
  assert.equal(error.message, 'NVRTC (libnvrtc) is missing: libnvrtc.so.12 was not found.');
  assert.equal(error.component, 'NVRTC');
  assert.equal(new CudaUnavailableError('no driver').message, 'CUDA is not available: no driver');
});

test('messages of calls on destroyed objects name the method called, through the null driver', needsCompiler, async () => {
  const result = await runChild(
    `import { DeviceBuffer, Event, Module, Program, Stream, cuda } from 'cuda-stream-pool';
     const caught = (f) => { try { f(); return 'ok'; } catch (e) { return [e.constructor.name, e.method, e.message]; } };
     const rejected = async (p) => { try { await p; return 'ok'; } catch (e) { return [e.constructor.name, e.method, e.message]; } };
     const out = {};
     const stream = Stream.create();
     const dead = Stream.create();
     dead.destroy();
     out.alloc = caught(() => DeviceBuffer.alloc(8, { stream: dead }));
     const event = Event.create();
     event.destroy();
     out.waitEvent = caught(() => stream.waitEvent(event));
     const owner = DeviceBuffer.alloc(64, { stream });
     const view = DeviceBuffer.attach(owner.share(), { stream });
     owner.free();
     out.copy = caught(() => stream.copy(new Uint8Array(64), view));
     out.toArray = await rejected(Promise.resolve().then(() => view.toArray(Uint8Array, { stream })));
     out.recordStreamOwner = caught(() => view.recordStream(stream));
     out.recordStreamStream = caught(() => DeviceBuffer.alloc(64, { stream }).recordStream(dead));
     out.recordEvent = caught(() => stream.recordEvent(event));
     out.record = caught(() => Event.create().record(dead));
     out.from = caught(() => DeviceBuffer.from(new Uint8Array(8), { stream: dead }));
     const lender = Stream.create();
     const borrowed = Stream.fromHandle(lender.handle);
     lender.destroy();
     out.recordBorrowed = caught(() => Event.create().record(borrowed));
     out.recordEventBorrowed = caught(() => borrowed.recordEvent());
     const module = await Module.load('.version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k() { ret; }');
     const kernel = module.getFunction('k', []);
     out.launch = caught(() => kernel.launch({ grid: 1, block: 1, stream: dead }));
     out.proxy = caught(() => DeviceBuffer.alloc(8, { stream: new Proxy(stream, {}) }));
     out.available = cuda.available;
     out.nvrtc = await rejected(Program.compile('extern "C" __global__ void k() {}'));
     console.log(JSON.stringify(out));`,
    { CUDA_STREAM_POOL_LIBCUDA: driver(), CUDA_STREAM_POOL_LIBNVRTC: '/nonexistent/libnvrtc.so.12' },
  );
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout.trim()) as Record<string, [string, string | null, string]>; // JSON writes undefined as null
  assert.deepEqual(out.alloc, ['DestroyedError', 'alloc', 'DeviceBuffer.alloc(): the Stream was destroyed']);
  assert.deepEqual(out.waitEvent, ['DestroyedError', 'waitEvent', 'stream.waitEvent(): the Event was destroyed']);
  assert.deepEqual(out.copy, ['DestroyedError', 'copy', 'stream.copy(): the DeviceBuffer was destroyed']);
  assert.deepEqual(out.toArray, ['DestroyedError', 'toArray', 'buffer.toArray(): the DeviceBuffer was destroyed']);
  assert.deepEqual(out.recordStreamOwner, ['DestroyedError', 'recordStream', 'DeviceBuffer.recordStream(): the DeviceBuffer was destroyed']);
  assert.deepEqual(out.recordStreamStream, ['DestroyedError', 'recordStream', 'buffer.recordStream(): the Stream was destroyed']);
  assert.deepEqual(out.recordEvent, ['DestroyedError', 'recordEvent', 'stream.recordEvent(): the Event was destroyed']);
  assert.deepEqual(out.record, ['DestroyedError', 'record', 'event.record(): the Stream was destroyed']);
  assert.deepEqual(out.from, ['DestroyedError', 'from', 'DeviceBuffer.from(): the Stream was destroyed']);
  assert.deepEqual(out.recordBorrowed, ['DestroyedError', 'record', 'event.record(): the Stream was destroyed']);
  assert.deepEqual(out.recordEventBorrowed, ['DestroyedError', 'recordEvent', 'stream.recordEvent(): the Stream was destroyed']);
  assert.deepEqual(out.launch, ['DestroyedError', 'launch', 'kernel.launch(): the Stream was destroyed']);
  assert.deepEqual(out.proxy, ['TypeError', null, '"options.stream" must be a Stream; received a Proxy (of an object; pass the object itself, not a Proxy of it).']);
  assert.equal(out.available, true);
  const [name, , message] = out.nvrtc;
  assert.equal(name, 'CudaUnavailableError');
  assert.match(message, /^NVRTC \(libnvrtc\) is missing: NVRTC \(the CUDA runtime compiler, needed by Program\.compile\) could not be opened; looked for \/nonexistent\/libnvrtc\.so\.12 /);
  assert.match(message, /Install the CUDA toolkit's NVRTC \(libnvrtc, CUDA 12 or 13\)/);
});
