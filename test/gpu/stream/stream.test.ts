import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';

import { cuda, CudaError, DestroyedError, Device, DeviceBuffer, Event, Stream, StreamPool } from 'cuda-stream-pool';
import { gpu, MS, overlaps, testKernels } from '../../support/gpu.js';
import { Stamps } from '../../support/stamps.js';
import { runChild } from '../../support/child.js';
import { flushNursery } from '#library/binding/native-ref-lifetime.js';
import { native } from '#library/binding/binding.js';
import { streamRef } from '#library/stream/stream.js';

const workerUrl = new URL('../../workers/stream-worker.js', import.meta.url);

test('Stream.create() rejects unknown options with "did you mean" before touching the driver', () => {
  assert.throws(() => Stream.create({ nonblocking: true } as never), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.nonblocking" is not a Stream option; did you mean "nonBlocking"?',
  });
  assert.throws(() => Stream.create({ nonBlocking: 1 } as never), {
    code: 'ERR_INVALID_ARG_TYPE',
    message: '"options.nonBlocking" must be a boolean; received 1 (number).',
  });
  assert.throws(() => Stream.create({ priority: 1.5 }), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: /"options.priority" must be an integer from -2147483648 to 2147483647; received 1.5 \(number\)/,
  });
});

test('a created stream\'s id, handle, priority and flags read for the first time after destroy() are the stream\'s own', gpu, () => {
  const read = Stream.create({ priority: 0, nonBlocking: false });
  const facts = [read.id, read.handle, read.priority, read.nonBlocking];
  read.destroy();
  const unread = Stream.create({ priority: 0, nonBlocking: false });
  unread.destroy();
  assert.deepEqual([read.id, read.handle, read.priority, read.nonBlocking], facts);
  assert.equal(typeof unread.id, 'bigint');
  assert.notEqual(unread.id, read.id, 'stream ids are never reused');
  assert.notEqual(unread.handle, 0n);
  assert.equal(unread.priority, read.priority);
  assert.equal(unread.nonBlocking, false);
});

test('facts first read after destroy() keep a negative priority, nonBlocking and the partition', gpu, () => {
  const device = Device.get(0);
  const greatest = device.streamPriorityRange.greatest;
  assert.ok(greatest < 0, `the device's greatest priority is negative (${greatest})`);
  const [part] = device.partition([8]);
  const whole = Stream.create({ priority: greatest, nonBlocking: true });
  const onPartition = Stream.create({ partition: part! });
  // Asked of the native layer, so that the wrappers themselves read their facts only after destroy().
  const expected = [whole, onPartition].map((s) => native.streamInfo(streamRef(s, 'test')));
  whole.destroy();
  onPartition.destroy();
  for (const [i, s] of [whole, onPartition].entries())
    assert.deepEqual([s.handle, s.id, s.priority, s.nonBlocking], expected[i]!.slice(0, 4));
  assert.equal(whole.priority, greatest);
  assert.equal(whole.nonBlocking, true);
  assert.equal(whole.partition, undefined);
  assert.equal(onPartition.partition, part);
});

test('Stream.fromHandle() rejects numbers and 0n', () => {
  assert.throws(() => Stream.fromHandle(5 as never), {
    code: 'ERR_INVALID_ARG_TYPE',
    message: '"handle" must be a bigint; received 5 (number). Pass BigInt(value).',
  });
  assert.throws(() => Stream.fromHandle(0n), { code: 'ERR_INVALID_ARG_VALUE', message: /must not be 0n.*Stream.legacy\(\)/ });
});

test('created streams are non-blocking by default, as cuStreamGetFlags reports, and counted as live', gpu, () => {
  const before = cuda.liveObjects().streams;
  const a = Stream.create();
  const b = Stream.create({ nonBlocking: false });
  assert.equal(a.nonBlocking, true);
  assert.equal(b.nonBlocking, false);
  assert.notEqual(a.id, b.id);
  assert.notEqual(a.handle, 0n);
  assert.equal(cuda.liveObjects().streams, before + 2);
  a.destroy();
  b.destroy();
  assert.equal(cuda.liveObjects().streams, before);
});

test('priority -1000 gives the greatest priority and 1000 the least, clamped as the driver clamps them', gpu, () => {
  const range = Device.get(0).streamPriorityRange;
  const high = Stream.create({ priority: -1000 });
  const low = Stream.create({ priority: 1000 });
  assert.equal(high.priority, range.greatest);
  assert.equal(low.priority, range.least);
  assert.ok(range.greatest < range.least, 'an H200 has more than one priority');
  high.destroy();
  low.destroy();
});

test('two non-blocking streams each running a 50 ms spin kernel overlap on the device', gpu, async () => {
  const [a, b] = [Stream.create(), Stream.create()];
  const stamps = new Stamps(2, a);
  a.synchronizeSync();
  await stamps.spin(a, 50n * MS, 0);
  await stamps.spin(b, 50n * MS, 1);
  b.synchronizeSync();
  const [first, second] = await stamps.read(a);
  assert.ok(first![1] - first![0] >= 50n * MS && second![1] - second![0] >= 50n * MS);
  assert.ok(overlaps(first!, second!), `intervals ${first} and ${second} do not overlap`);
  stamps.free();
  a.destroy();
  b.destroy();
});

test('a non-blocking stream is not held up by a long kernel on the legacy stream', gpu, async () => {
  const legacy = Stream.legacy();
  const stream = Stream.create();
  const stamps = new Stamps(2, stream);
  stream.synchronizeSync();
  await stamps.spin(legacy, 300n * MS, 0);
  // The short kernel goes in once the long one has surely started (a loaded machine can start it late), and still
  // ends long before it: 70 ms of 300.
  await new Promise((resolve) => setTimeout(resolve, 50));
  await stamps.spin(stream, 20n * MS, 1);
  stream.synchronizeSync();
  legacy.synchronizeSync();
  const [long, short] = await stamps.read(stream);
  assert.ok(short![1] < long![1], `the short kernel ended at ${short![1]}, after the legacy kernel's end ${long![1]}`);
  assert.ok(overlaps(long!, short!));
  stamps.free();
  stream.destroy();
});

test('synchronize() settles only after the work, and timers keep firing while it waits', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  const after = Event.create();
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  spin.launch({ grid: 1, block: 1, stream }, 200n * MS, 0n);
  after.record(stream);
  assert.equal(stream.query(), false);
  await stream.synchronize();
  clearInterval(timer);
  assert.equal(after.query(), true, 'an event recorded after the kernel is complete once synchronize() settles');
  assert.equal(stream.query(), true);
  assert.ok(ticks >= 10, `only ${ticks} timer ticks during a 200 ms wait`);
  after.destroy();
  stream.destroy();
});

test('after a 1 ms kernel, synchronize() settles within 50 ms (woken by the poller, no polling timer)', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  spin.launch({ grid: 1, block: 1, stream }, 1n * MS, 0n); // warm-up: JIT, the stream's first completion marker
  await stream.synchronize();
  const samples: number[] = [];
  for (let i = 0; i < 5; i++) {
    spin.launch({ grid: 1, block: 1, stream }, 1n * MS, 0n);
    const start = performance.now();
    await stream.synchronize();
    samples.push(performance.now() - start);
  }
  samples.sort((x, y) => x - y);
  assert.ok(samples[2]! < 50, `median settle time ${samples[2]} ms`);
  stream.destroy();
});

test('synchronize() on an idle stream settles at once and an aborted wait rejects with the signal reason', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  await stream.synchronize();
  const controller = new AbortController();
  spin.launch({ grid: 1, block: 1, stream }, 300n * MS, 0n);
  const wait = stream.synchronize({ signal: controller.signal });
  const reason = new Error('stop waiting');
  controller.abort(reason);
  await assert.rejects(wait, (e) => e === reason);
  await assert.rejects(stream.synchronize({ signal: AbortSignal.abort('already') }), (e) => e === 'already');
  await stream.synchronize();
  stream.destroy();
});

test('every method after destroy throws DestroyedError; a second destroy does nothing', gpu, async () => {
  const stream = Stream.create();
  const event = Event.create();
  stream.destroy();
  stream.destroy();
  assert.equal(stream.destroyed, true);
  const calls: Array<[string, () => unknown]> = [
    ['query', () => stream.query()],
    ['synchronizeSync', () => stream.synchronizeSync()],
    ['waitEvent', () => stream.waitEvent(event)],
    ['waitStream', () => stream.waitStream(Stream.perThread())],
    ['recordEvent', () => stream.recordEvent(event)],
  ];
  for (const [method, call] of calls)
    assert.throws(call, (e) => e instanceof DestroyedError && e.resource === 'Stream' && e.method === method, method);
  await assert.rejects(stream.synchronize(), (e) => e instanceof DestroyedError && e.method === 'synchronize');
  assert.throws(() => event.record(stream), DestroyedError);
  event.destroy();
});

test('recordEvent() refuses what is not an Event with ERR_INVALID_ARG_TYPE and records a new event otherwise', gpu, async () => {
  const stream = Stream.create();
  const events = cuda.liveObjects().events;
  assert.throws(() => stream.recordEvent('event' as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  assert.equal(cuda.liveObjects().events, events, 'no event was made for the refused call');
  const made = stream.recordEvent();
  assert.equal(cuda.liveObjects().events, events + 1);
  await made.synchronize();
  made.destroy();
  stream.destroy();
});

test('a borrowed stream is not destroyed by its wrapper', gpu, () => {
  const owner = Stream.create();
  const borrowed = Stream.fromHandle(owner.handle, 0);
  assert.equal(borrowed.id, owner.id);
  borrowed.destroy();
  assert.throws(() => borrowed.query(), DestroyedError);
  assert.equal(owner.query(), true);
  const legacy = Stream.legacy();
  assert.equal(legacy.handle, 1n);
  assert.equal(Stream.perThread().handle, 2n);
  legacy.destroy();
  assert.equal(Stream.legacy().query(), true, 'a new legacy wrapper still works');
  owner.destroy();
});

test('a fromHandle wrapper of a library stream refuses calls once that stream is destroyed', gpu, () => {
  const owner = Stream.create();
  const borrowed = Stream.fromHandle(owner.handle, 0);
  assert.equal(borrowed.query(), true);
  owner.destroy();
  // The driver handle is gone: the wrapper must not pass it on (that was CUDA_ERROR_INVALID_HANDLE, or a crash).
  assert.throws(() => borrowed.query(), DestroyedError);
  assert.throws(() => borrowed.synchronizeSync(), DestroyedError);
  assert.equal(borrowed.id, owner.id, 'what the library knew of the stream stays readable');
  const pool = new StreamPool({ size: 2 });
  const ofPool = Stream.fromHandle(pool.getStream().handle, 0);
  assert.equal(ofPool.query(), true);
  pool.destroy();
  assert.throws(() => ofPool.query(), DestroyedError);
  borrowed.destroy();
  ofPool.destroy();
});

test('a buffer used through a fromHandle wrapper is freed after the work its lender had queued when destroyed', gpu, async () => {
  const { spin } = await testKernels();
  const owner = Stream.create();
  const borrowed = Stream.fromHandle(owner.handle, 0);
  const allocation = Stream.create();
  const buffer = DeviceBuffer.alloc(4096, { stream: allocation });
  spin.launch({ grid: 1, block: 1, stream: owner }, 300n * MS, 0n);
  buffer.recordStream(borrowed);
  owner.destroy(); // the wrapper stays: the buffer's use must follow the stream, not the wrapper
  const started = performance.now();
  await buffer[Symbol.asyncDispose]();
  const waited = performance.now() - started;
  assert.ok(waited >= 150, `the free completed ${waited.toFixed(1)} ms after it was queued, before the 300 ms kernel it had to follow`);
  borrowed.destroy();
  allocation.destroy();
});

test('waits pending on a destroyed stream settle when its queued work completes', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  spin.launch({ grid: 1, block: 1, stream }, 100n * MS, 0n);
  const wait = stream.synchronize();
  stream.destroy();
  await wait;
});

test('64 streams awaited at once while the main thread and two workers call synchronizeSync(): all settle', gpu, async () => {
  const { spin } = await testKernels();
  const workers = [0, 1].map(() => new Worker(workerUrl, { workerData: { mode: 'sync-loop' } }));
  await Promise.all(workers.map((w) => once(w, 'message')));
  const streams = Array.from({ length: 64 }, () => Stream.create());
  for (const stream of streams) spin.launch({ grid: 1, block: 1, stream }, 20n * MS, 0n);
  const waits = streams.map((s) => s.synchronize());
  const mine = Stream.create();
  for (let i = 0; i < 20; i++) {
    spin.launch({ grid: 1, block: 1, stream: mine }, 1n * MS, 0n);
    mine.synchronizeSync();
  }
  await Promise.all(waits);
  const counts = workers.map((w) => once(w, 'message'));
  // Listening before stop: one worker can exit while the other's count is still on its way.
  const exits = workers.map((w) => once(w, 'exit'));
  for (const w of workers) w.postMessage('stop');
  for (const [message] of await Promise.all(counts)) assert.ok((message as { count: number }).count > 0);
  await Promise.all(exits);
  for (const s of [...streams, mine]) s.destroy();
});

test('a worker creates, uses and synchronizes a stream and exits with code 0', gpu, async () => {
  const worker = new Worker(workerUrl, { workerData: { mode: 'use' } });
  // Listening for the exit first: a worker that exits right after posting has both events emitted in one turn.
  const exit = once(worker, 'exit');
  const [message] = await once(worker, 'message');
  assert.equal(message.idle, true);
  assert.match(message.id, /^\d+$/);
  const [code] = await exit;
  assert.equal(code, 0);
});

test('destroy() returns at once while another thread blocks in synchronizeSync() on the same stream', gpu, async () => {
  const pool = new StreamPool({ size: 1 });
  const worker = new Worker(workerUrl, { workerData: { mode: 'block', shared: pool.share() } });
  const exit = once(worker, 'exit');
  const messages: unknown[] = [];
  worker.on('message', (m) => messages.push(m));
  while (messages.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  await new Promise((resolve) => setTimeout(resolve, 100)); // the worker is now inside cuStreamSynchronize
  const start = performance.now();
  pool.destroy();
  const destroyMs = performance.now() - start;
  // The worker's kernel runs 1000 ms; a destroy that waited for the blocked call would take about 900 ms.
  assert.ok(destroyMs < 200, `destroy() took ${destroyMs} ms`);
  assert.equal((await exit)[0], 0);
  const blocked = messages[1] as { ms: number };
  assert.ok(blocked.ms > 500, `the worker's synchronizeSync() returned after ${blocked.ms} ms, before its kernel ended`);
});

test('waitStream() reuses one event per device in a thread: none before the first call, one after 201', gpu, async () => {
  const worker = new Worker(workerUrl, { workerData: { mode: 'wait-stream' } });
  const exit = once(worker, 'exit'); // before the message: the worker exits right after posting it
  const [result] = (await once(worker, 'message')) as [{ held: number[]; liveEventsAdded: number }];
  assert.equal((await exit)[0], 0);
  assert.deepEqual(result, { held: [0, 1, 1], liveEventsAdded: 0 }, 'one internal event, made by the first call, reused by the next 200');
});

test('a worker terminated with completions pending: its streams are destroyed, and this thread\'s waits still resolve after their work', gpu, async () => {
  const { spin } = await testKernels();
  const before = cuda.liveObjects().streams;
  const worker = new Worker(workerUrl, { workerData: { mode: 'pending' } });
  await once(worker, 'message');
  assert.equal(cuda.liveObjects().streams, before + 4, 'the worker\'s four streams');
  await worker.terminate();
  // Its four streams go with it, though their 500 ms spins are still queued; the poller drops its waits later.
  for (let i = 0; i < 60 && cuda.liveObjects().streams > before; i++) await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(cuda.liveObjects().streams, before);
  // Meanwhile and after the dead worker's waits ended, a wait here resolves only once its own work is done.
  const stream = Stream.create();
  for (const ms of [100n, 600n]) {
    spin.launch({ grid: 1, block: 1, stream }, ms * MS, 0n);
    assert.equal(stream.query(), false);
    await stream.synchronize();
    assert.equal(stream.query(), true, `the ${ms} ms spin is done when synchronize() resolves`);
  }
  stream.destroy();
});

test('a script whose last action is await stream.synchronize() exits 0 once the work ends', gpu, async () => {
  const result = await runChild(`
    import { readFileSync } from 'node:fs';
    import { Module, Stream } from 'cuda-stream-pool';
    const module = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
    const spin = module.getFunction('spin', ['u64', 'ptr']);
    const stream = Stream.create();
    spin.launch({ grid: 1, block: 1, stream }, 300_000_000n, 0n);
    await stream.synchronize();
    console.log('settled', stream.query());
  `);
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout.trim(), 'settled true');
});

test('a script that is done exits promptly, even after many waits', gpu, async () => {
  const result = await runChild(`
    import { Stream } from 'cuda-stream-pool';
    const streams = Array.from({ length: 8 }, () => Stream.create());
    await Promise.all(streams.map((s) => s.synchronize()));
    console.log('done');
  `);
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout.trim(), 'done');
  assert.ok(result.durationMs < 10_000, `the child took ${result.durationMs} ms`);
});

test('a kernel writing to an invalid address: its await and another pending await reject within 1 s', gpu, async () => {
  const result = await runChild(`
    import { readFileSync } from 'node:fs';
    import { Device, Module, Stream, CudaError } from 'cuda-stream-pool';
    const module = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
    const spin = module.getFunction('spin', ['u64', 'ptr']);
    const bad = module.getFunction('write_invalid', ['u64']);
    const faulting = Stream.create();
    const other = Stream.create();
    spin.launch({ grid: 1, block: 1, stream: other }, 5_000_000_000n, 0n);
    const otherWait = other.synchronize();
    spin.launch({ grid: 1, block: 1, stream: faulting }, 50_000_000n, 0n);
    bad.launch({ grid: 1, block: 1, stream: faulting }, 0x10n);
    const start = performance.now();
    const outcome = async (p) => { try { await p; return 'resolved'; } catch (e) { return (e instanceof CudaError ? e.code : 'not CudaError: ' + e) + ' after ' + Math.round(performance.now() - start); } };
    const [mine, theirs] = await Promise.all([outcome(faulting.synchronize()), outcome(otherWait)]);
    // After a sticky fault, new work is refused too: creating a stream throws the same CudaError.
    const late = await outcome(Promise.resolve().then(() => Stream.create().synchronize()));
    faulting.destroy();
    other.destroy();
    console.log(JSON.stringify({ mine, theirs, late, healthy: Device.get(0).healthy }));
  `);
  assert.equal(result.signal, null);
  assert.equal(result.code, 0, result.stderr);
  const out = JSON.parse(result.stdout);
  for (const line of [out.mine, out.theirs]) {
    const match = /^(CUDA_ERROR_\w+) after (\d+)$/.exec(line);
    assert.ok(match, line);
    assert.ok(Number(match[2]) < 1000 + 100, line); // the fault itself comes after a 50 ms spin
  }
  assert.match(out.late, /^CUDA_ERROR_ILLEGAL_ADDRESS after \d+$/);
  assert.equal(out.healthy, false);
});

test('an error from the driver is a CudaError with name, code, result, call and sticky', gpu, async () => {
  const { module } = await testKernels();
  await assert.rejects(async () => module.getFunction('no_such_kernel', []), (e) => {
    assert.ok(e instanceof CudaError);
    assert.equal(e.name, 'CudaError');
    assert.equal(e.code, 'CUDA_ERROR_NOT_FOUND');
    assert.equal(e.result, 500);
    assert.equal(e.call, 'cuModuleGetFunction');
    assert.equal(e.sticky, false);
    assert.match(e.message, /no_such_kernel/);
    return true;
  });
});

test('forgotten streams and events are destroyed by their finalizers', gpu, async () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  assert.ok(gc, 'the test runner passes --expose-gc');
  const before = cuda.liveObjects();
  (() => {
    for (let i = 0; i < 100; i++) {
      Stream.create();
      Event.create();
    }
  })();
  assert.equal(cuda.liveObjects().streams, before.streams + 100);
  assert.equal(cuda.liveObjects().events, before.events + 100);
  flushNursery(); // forgotten objects become collectable now, not at the nursery's next flush
  for (let i = 0; i < 20 && cuda.liveObjects().streams > before.streams; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(cuda.liveObjects().streams, before.streams);
  assert.equal(cuda.liveObjects().events, before.events);
});

test('[Symbol.asyncDispose] waits for the stream\'s queued work, then destroys it', gpu, async () => {
  const { spin } = await testKernels();
  const before = cuda.liveObjects().streams;
  const stream = Stream.create();
  spin.launch({ grid: 1, block: 1, stream }, 100n * MS, 0n);
  const marker = stream.recordEvent();
  await stream[Symbol.asyncDispose]();
  assert.equal(marker.query(), true, 'the work was done when the dispose resolved');
  assert.equal(stream.destroyed, true);
  assert.equal(cuda.liveObjects().streams, before);
  await stream[Symbol.asyncDispose](); // idempotent
  marker.destroy();
});

test('[Symbol.asyncDispose] of a pool stream is the TypeError of destroy(), before any wait', gpu, async () => {
  const { StreamPool } = await import('cuda-stream-pool');
  using pool = new StreamPool({ size: 1 });
  await assert.rejects(pool.getStream()[Symbol.asyncDispose](), { code: 'ERR_INVALID_ARG_VALUE', message: /belongs to a StreamPool/ });
});
