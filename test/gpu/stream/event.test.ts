import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CudaError, DestroyedError, Event, Stream } from 'cuda-stream-pool';
import { gpu, MS, testKernels } from '../../support/gpu.js';
import { Stamps } from '../../support/stamps.js';

test('Event.create() rejects unknown options', () => {
  assert.throws(() => Event.create({ timming: true } as never), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.timming" is not an Event option; did you mean "timing"?',
  });
});

test('an event never recorded counts as complete', gpu, async () => {
  const event = Event.create();
  assert.equal(event.query(), true);
  await event.synchronize();
  event.synchronizeSync();
  event.destroy();
});

test('Event.elapsedMs() measures a 20 ms kernel and enforces timing, recording and completion', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  const start = Event.create({ timing: true });
  const end = Event.create({ timing: true });
  const untimed = Event.create();
  assert.throws(() => Event.elapsedMs(start, end), { code: 'ERR_INVALID_ARG_VALUE', message: /"start" was never recorded/ });
  start.record(stream);
  spin.launch({ grid: 1, block: 1, stream }, 200n * MS, 0n);
  end.record(stream);
  assert.throws(() => Event.elapsedMs(start, untimed.record(stream)), { code: 'ERR_INVALID_ARG_VALUE', message: /"end" was created with timing off/ });
  assert.throws(() => Event.elapsedMs(start, end), (e) => e instanceof CudaError && e.name === 'CudaError' && e.code === 'CUDA_ERROR_NOT_READY' && e.result === 600);
  await end.synchronize();
  assert.equal(end.query(), true);
  const ms = Event.elapsedMs(start, end);
  assert.ok(ms >= 199 && ms < 400, `elapsed ${ms} ms for a 200 ms spin`);
  for (const e of [start, end, untimed]) e.destroy();
  stream.destroy();
});

test('stream.waitEvent() orders a kernel on another stream after the recorded work', gpu, async () => {
  const a = Stream.create();
  const b = Stream.create();
  const stamps = new Stamps(2, a);
  a.synchronizeSync();
  await stamps.spin(a, 30n * MS, 0);
  const marker = a.recordEvent();
  b.waitEvent(marker);
  await stamps.spin(b, 1n * MS, 1);
  await b.synchronize();
  const [first, second] = await stamps.read(a);
  assert.ok(second![0] >= first![1], `the waiting kernel started at ${second![0]}, before ${first![1]}`);
  marker.destroy();
  stamps.free();
  a.destroy();
  b.destroy();
});

test('stream.waitStream() orders later work after the other stream\'s queued work', gpu, async () => {
  const a = Stream.create();
  const b = Stream.create();
  const stamps = new Stamps(2, a);
  a.synchronizeSync();
  await stamps.spin(a, 30n * MS, 0);
  b.waitStream(a);
  await stamps.spin(b, 1n * MS, 1);
  await b.synchronize();
  const [first, second] = await stamps.read(a);
  assert.ok(second![0] >= first![1]);
  stamps.free();
  a.destroy();
  b.destroy();
});

test('stream.waitStream() on two streams in a row keeps both waits: recording its event again moves neither', gpu, async () => {
  const [a, b, c] = [Stream.create(), Stream.create(), Stream.create()];
  const stamps = new Stamps(3, a);
  a.synchronizeSync();
  await stamps.spin(a, 40n * MS, 0);
  await stamps.spin(b, 20n * MS, 1);
  c.waitStream(a);
  c.waitStream(b); // records the same event again, on b
  await stamps.spin(c, 1n * MS, 2);
  const [onA, onB, onC] = await stamps.read(c);
  assert.ok(onC![0] >= onA![1], 'c waited for a');
  assert.ok(onC![0] >= onB![1], 'c waited for b');
  stamps.free();
  for (const stream of [a, b, c]) stream.destroy();
});

test('event.synchronize() resolves after the recorded kernel, without blocking timers', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  spin.launch({ grid: 1, block: 1, stream }, 100n * MS, 0n);
  const event = stream.recordEvent();
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  assert.equal(event.query(), false);
  await event.synchronize();
  clearInterval(timer);
  assert.equal(event.query(), true);
  assert.ok(ticks >= 5, `${ticks} ticks`);
  event.destroy();
  stream.destroy();
});

test('every event method after destroy throws DestroyedError', gpu, async () => {
  const event = Event.create({ timing: true });
  const stream = Stream.create();
  event.destroy();
  event.destroy();
  for (const call of [() => event.query(), () => event.record(stream), () => event.synchronizeSync(), () => Event.elapsedMs(event, event)])
    assert.throws(call, (e) => e instanceof DestroyedError && e.resource === 'Event');
  await assert.rejects(event.synchronize(), DestroyedError);
  stream.destroy();
});

test('[Symbol.asyncDispose] waits for the recorded work, then destroys the event', gpu, async () => {
  const { spin } = await testKernels();
  using stream = Stream.create();
  const event = Event.create();
  spin.launch({ grid: 1, block: 1, stream }, 100n * MS, 0n);
  event.record(stream);
  await event[Symbol.asyncDispose]();
  assert.equal(event.destroyed, true);
  assert.equal(stream.query(), true, 'the recorded work was done when the dispose resolved');
  await event[Symbol.asyncDispose](); // idempotent
});
