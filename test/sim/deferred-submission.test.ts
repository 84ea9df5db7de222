// Deferred submission (CUDA_STREAM_POOL_SUBMISSION=deferred) on the simulated driver, whatever mode the suite runs in:
// recorded operations are issued in program order, what only the driver refuses reaches the next wait (naming the
// call and the kernel) and travels through events, what JS can check is still refused at the call, and destroy, exit
// and worker termination with operations queued leave nothing behind.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { needsCompiler, simulatedJson, type SimulatedOptions } from '../support/simulated-driver.js';

const deferred = (options: SimulatedOptions = {}): SimulatedOptions => ({
  ...options,
  env: { ...options.env, CUDA_STREAM_POOL_SUBMISSION: 'deferred' },
});

const load = `
  import { readFileSync } from 'node:fs';
  import { cuda, Device, DeviceBuffer, Event, Module, PinnedBuffer, Stream } from 'cuda-stream-pool';
  const tests = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
  const bench = await Module.load(readFileSync('packages/cuda-stream-pool-bench/kernels/bench.ptx', 'utf8'));
  const fill = tests.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
  const fma = bench.getFunction('fma_steps', ['ptr', 'u32', 'u32', 'f32', 'f32']);`;

// Streams a and b, 64 words on a, a pinned buffer of 0xaa bytes, and a fill of the words on a that the driver refuses
// when it is issued (with a failure rule on cuLaunchKernel's first call).
const refusedOnA = `${load}
     const [a, b] = [Stream.create(), Stream.create()];
     const words = DeviceBuffer.alloc(64 * 4, { stream: a });
     const out = PinnedBuffer.alloc(64 * 4);
     out.view(Uint32Array).fill(0xaa);
     await a.synchronize();
     fill.launch({ grid: 1, block: 64, stream: a }, words, 5, 64); // refused when issued
`;

test('deferred: 2,000 rounds of copy in, a kernel reading it and copy out on 8 streams give every round its bytes', needsCompiler, async () => {
  const result = await simulatedJson<{ wrong: number; first: string; mode: string; threads: number; recorded: number; issued: number }>(
    `${load}
     const rounds = 2000, elements = 64, streams = Array.from({ length: 8 }, () => Stream.create());
     const buffers = streams.map((stream) => DeviceBuffer.alloc(elements * 4, { stream }));
     const input = PinnedBuffer.alloc(rounds * elements * 4), output = PinnedBuffer.alloc(rounds * elements * 4);
     const inView = input.view(Float32Array), outView = output.view(Float32Array);
     for (let r = 0; r < rounds; r++) {
       const s = r % 8, stream = streams[s], at = r * elements * 4;
       for (let e = 0; e < elements; e++) inView[r * elements + e] = r + e;
       stream.copy(buffers[s], input, { srcOffset: at, byteLength: elements * 4 });
       fma.launch({ grid: 1, block: 64, stream }, buffers[s], elements, 1, 1, 1); // x * 1 + 1
       stream.copy(output, buffers[s], { dstOffset: at, byteLength: elements * 4 });
     }
     await Promise.all(streams.map((stream) => stream.synchronize()));
     let wrong = 0, first = '';
     for (let r = 0; r < rounds; r++)
       for (let e = 0; e < elements; e++)
         if (outView[r * elements + e] !== r + e + 1) { wrong++; first ||= 'round ' + r + ' element ' + e + ': ' + outView[r * elements + e]; }
     const { mode, threads, recorded, issued } = cuda.submission();
     console.log(JSON.stringify({ wrong, first, mode, threads, recorded, issued }));`,
    deferred({ operationDelayUs: 1 }),
  );
  assert.equal(result.mode, 'deferred');
  assert.equal(result.threads, 2);
  assert.deepEqual({ wrong: result.wrong, first: result.first }, { wrong: 0, first: '' });
  assert.ok(result.recorded >= 6000, `${result.recorded} operations recorded`);
  assert.equal(result.issued, result.recorded);
});

test('deferred: a launch the driver refuses rejects the next wait naming the kernel; later work is dropped until then, and the stream works again after', needsCompiler, async () => {
  const result = await simulatedJson<{ name: string; call: string; message: string; dropped: number; untouched: boolean; after: number[]; device: string; deviceAgain: string }>(
    `${load}
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(64 * 4, { stream });
     const out = PinnedBuffer.alloc(64 * 4);
     out.view(Uint32Array).fill(0xaa);
     fill.launch({ grid: 1, block: 64, stream }, words, 1, 64);
     fill.launch({ grid: 1, block: 64, stream }, words, 2, 64); // refused by the driver when issued
     stream.copy(out, words); // dropped: it would copy what the refused launch never wrote
     let error;
     try { await stream.synchronize(); } catch (e) { error = e; }
     const { dropped } = cuda.submission();
     const untouched = out.view(Uint32Array).every((v) => v === 0xaa);
     fill.launch({ grid: 1, block: 64, stream }, words, 3, 64);
     stream.copy(out, words);
     await stream.synchronize();
     const device = await Device.get(0).synchronize().then(() => 'resolved', (e) => e.call);
     const deviceAgain = await Device.get(0).synchronize().then(() => 'resolved', (e) => e.call);
     console.log(JSON.stringify({ name: error?.name, call: error?.call, message: error?.message, dropped, untouched, after: [...new Set(out.view(Uint32Array))], device, deviceAgain }));`,
    deferred({ fail: 'cuLaunchKernel@any:2=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES', operationDelayUs: 200 }),
  );
  assert.equal(result.name, 'CudaError');
  assert.equal(result.call, 'cuLaunchKernel');
  assert.match(result.message, /kernel "fill_u32" with grid \[1, 1, 1\], block \[64, 1, 1\]/);
  assert.equal(result.dropped, 1, 'the copy after the refused launch');
  assert.equal(result.untouched, true, 'the copy after the refused launch never ran');
  assert.deepEqual(result.after, [3]);
  // The stream's wait reported the failure: device.synchronize() does not report it again.
  assert.deepEqual([result.device, result.deviceAgain], ['resolved', 'resolved']);
});

test('deferred: an event recorded after a refused launch carries the failure to the stream that waits on it and to host waits', needsCompiler, async () => {
  const result = await simulatedJson<{ waiter: string; event: string; untouched: boolean }>(
    `${refusedOnA}
     const done = Event.create().record(a); // dropped: stands for failed work
     b.waitEvent(done);
     b.copy(out, words); // must not read what a never wrote
     const waiter = await b.synchronize().then(() => 'resolved', (e) => e.call);
     const event = await done.synchronize().then(() => 'resolved', (e) => e.call);
     await a.synchronize().catch(() => {});
     console.log(JSON.stringify({ waiter, event, untouched: out.view(Uint32Array).every((v) => v === 0xaa) }));`,
    deferred({ fail: 'cuLaunchKernel@any:1=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES', operationDelayUs: 200 }),
  );
  assert.deepEqual(result, { waiter: 'cuLaunchKernel', event: 'cuLaunchKernel', untouched: true });
});

test('deferred: what JS can check is refused at the call, before anything is recorded', needsCompiler, async () => {
  const result = await simulatedJson<{ threads: string; shared: string; destroyed: string; recorded: number }>(
    `${load}
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(64 * 4, { stream });
     const refusal = (f) => { try { f(); return 'accepted'; } catch (e) { return e.name + ' ' + (e.code ?? '') + ' ' + e.message; } };
     const threads = refusal(() => fill.launch({ grid: 1, block: 4096, stream }, words, 1, 64));
     const shared = refusal(() => fill.launch({ grid: 1, block: 64, stream, dynamicSharedMemBytes: 64 * 1024 }, words, 1, 64));
     const gone = Stream.create();
     gone.destroy();
     const destroyed = refusal(() => fill.launch({ grid: 1, block: 64, stream: gone }, words, 1, 64));
     console.log(JSON.stringify({ threads, shared, destroyed, recorded: cuda.submission().recorded }));`,
    deferred(),
  );
  assert.match(result.threads, /^CudaError CUDA_ERROR_INVALID_VALUE .*block \[4096, 1, 1\] \(4096 threads\).*at most 1024 threads per block/);
  assert.match(result.shared, /^CudaError CUDA_ERROR_INVALID_VALUE .*65536 bytes of dynamic shared memory/);
  assert.match(result.destroyed, /^DestroyedError /);
  assert.equal(result.recorded, 0);
});

test('deferred: cuda.flush() and reading stream.handle issue everything recorded before them', needsCompiler, async () => {
  const result = await simulatedJson<{ afterFlush: boolean; afterHandle: boolean; recorded: number }>(
    `${load}
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(4096, { stream });
     for (let i = 0; i < 500; i++) stream.fill(words, i & 255);
     cuda.flush();
     let s = cuda.submission();
     const afterFlush = s.issued === s.recorded;
     for (let i = 0; i < 500; i++) stream.fill(words, i & 255);
     void stream.handle;
     s = cuda.submission();
     console.log(JSON.stringify({ afterFlush, afterHandle: s.issued === s.recorded, recorded: s.recorded }));
     await stream.synchronize();`,
    deferred({ operationDelayUs: 1 }),
  );
  assert.deepEqual(result, { afterFlush: true, afterHandle: true, recorded: 1000 });
});

test('deferred: a submission thread that finds a short burst waiting gathers more before it issues; everything is issued, in order', needsCompiler, async () => {
  const result = await simulatedJson<{ gathers: number; issued: boolean; last: number[] }>(
    `${load}
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(4, { stream });
     const out = PinnedBuffer.alloc(4);
     await stream.synchronize();
     const before = cuda.submission();
     // Bursts of 8 fills, each issued before the next begins (cuda.submission() does not flush), so that the thread
     // finds each burst short.
     // Bounded: a burst never issued fails with the counters instead of spinning until the child is killed.
     const deadline = Date.now() + 30_000;
     for (let burst = 0; burst < 50; burst++) {
       for (let i = 0; i < 8; i++) stream.fill(words, (burst * 8 + i) & 255);
       for (let s = cuda.submission(); s.issued !== s.recorded; s = cuda.submission())
         if (Date.now() > deadline) throw new Error('burst ' + burst + ' not issued: ' + JSON.stringify(s));
     }
     stream.copy(out, words);
     await stream.synchronize();
     const after = cuda.submission();
     console.log(JSON.stringify({ gathers: after.gathers - before.gathers, issued: after.issued === after.recorded, last: [...out.view(Uint8Array)] }));`,
    deferred(),
  );
  // At least a window a burst, at most one for each operation issued but the wait's marker (401).
  assert.ok(result.gathers >= 50 && result.gathers <= 401, `${result.gathers} gathering windows`);
  assert.equal(result.issued, true);
  // The last fill wrote (49 * 8 + 7) & 255 = 143 to every byte.
  assert.deepEqual(result.last, [143, 143, 143, 143]);
});

test('deferred: a full queue holds the recording thread until half of it (1,024 operations) is free: 20,000 records wait at most 18 times', needsCompiler, async () => {
  const result = await simulatedJson<{ recorded: number; issued: number; waitsForRoom: number }>(
    `${load}
     const stream = Stream.create();
     const event = Event.create();
     await stream.synchronize();
     const before = cuda.submission();
     for (let i = 0; i < 20_000; i++) event.record(stream);
     await stream.synchronize();
     const after = cuda.submission();
     console.log(JSON.stringify({ recorded: after.recorded - before.recorded, issued: after.issued - before.issued, waitsForRoom: after.waitsForRoom - before.waitsForRoom }));`,
    deferred(),
  );
  // The records, and the wait's marker unless the submission thread had issued every record by the time of the
  // wait (which then needs no marker in the queue); all issued.
  assert.ok(result.recorded === 20_000 || result.recorded === 20_001, `${result.recorded} recorded`);
  assert.equal(result.issued, result.recorded);
  // The first wait comes when 2,048 are queued and each frees 1,024 slots: 1 + floor((20,000 - 2,048) / 1,024) = 18 at
  // most. The simulated driver's calls are slower than recording, so the queue does fill.
  assert.ok(result.waitsForRoom >= 1 && result.waitsForRoom <= 18, `${result.waitsForRoom} waits for room`);
});

test('deferred: destroy(), free() and process.exit() with operations queued leave no live objects and no bad access', needsCompiler, async () => {
  const result = await simulatedJson<{ live: Record<string, unknown> }>(
    `${load}
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(4096, { stream });
     const pinned = PinnedBuffer.alloc(4096);
     for (let i = 0; i < 300; i++) { stream.fill(words, i & 255); stream.copy(pinned, words); }
     stream.destroy();
     words.free();
     pinned.free();
     const other = Stream.create();
     const more = DeviceBuffer.alloc(4096, { stream: other });
     for (let i = 0; i < 300; i++) other.fill(more, i & 255);
     await Device.get(0).synchronize();
     more.free();
     other.destroy();
     const { streams, deviceBytes } = cuda.liveObjects();
     console.log(JSON.stringify({ live: { streams, deviceBytes } }));
     const last = Stream.create();
     const kept = DeviceBuffer.alloc(4096, { stream: last });
     for (let i = 0; i < 300; i++) last.fill(kept, i & 255);
     process.exit(0); // with fills still queued`,
    deferred({ operationDelayUs: 20 }),
  );
  assert.deepEqual(result.live, { streams: 0, deviceBytes: 0 });
});

test('deferred: a worker terminated with operations queued leaves the process working', needsCompiler, async () => {
  const result = await simulatedJson<{ exit: number; after: number[] }>(
    `${load}
     import { Worker } from 'node:worker_threads';
     const worker = new Worker(\`
       import { parentPort } from 'node:worker_threads';
       import { DeviceBuffer, Stream } from 'cuda-stream-pool';
       const stream = Stream.create();
       const words = DeviceBuffer.alloc(4096, { stream });
       for (let i = 0; i < 2000; i++) stream.fill(words, i & 255);
       parentPort.postMessage('queued');
       setInterval(() => {}, 1000);\`, { eval: true });
     await new Promise((resolve) => worker.once('message', resolve));
     const exit = await worker.terminate();
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(16, { stream });
     fill.launch({ grid: 1, block: 4, stream }, words, 9, 4);
     const after = [...await words.toArray(Uint32Array, { stream })];
     console.log(JSON.stringify({ exit, after }));`,
    deferred({ operationDelayUs: 20 }),
  );
  assert.deepEqual(result, { exit: 1, after: [9, 9, 9, 9] });
});

test('deferred: operations a thread recorded and that were issued give their objects back though that thread then sleeps: a pool destroyed elsewhere releases its streams', needsCompiler, async () => {
  const result = await simulatedJson<{ left: number; waitedMs: number; worker: string; exit: number }>(
    `${load}
     import { Worker } from 'node:worker_threads';
     import { StreamPool } from 'cuda-stream-pool';
     const before = cuda.liveObjects().streams;
     const pool = new StreamPool({ size: 2 });
     const gate = new Int32Array(new SharedArrayBuffer(4));
     const worker = new Worker(\`
       import { parentPort, workerData } from 'node:worker_threads';
       import { DeviceBuffer, StreamPool } from 'cuda-stream-pool';
       const pool = StreamPool.attach(workerData.pool);
       const words = DeviceBuffer.alloc(4096);
       const stream = pool.getStream();
       for (let i = 0; i < 200; i++) stream.fill(words, i & 255);
       parentPort.postMessage('recorded');
       // Neither records nor makes another call until told: only its submission thread can give the entries back.
       const woke = Atomics.wait(workerData.gate, 0, 0, 10000);
       words.free();
       parentPort.postMessage(woke);\`, { eval: true, workerData: { pool: pool.share(), gate } });
     const messages = [];
     worker.on('message', (m) => messages.push(m));
     while (messages.length === 0) await new Promise((resolve) => setTimeout(resolve, 2));
     pool.destroy();
     const start = performance.now();
     while (cuda.liveObjects().streams > before && performance.now() - start < 3000) await new Promise((resolve) => setTimeout(resolve, 2));
     const left = cuda.liveObjects().streams - before, waitedMs = performance.now() - start;
     Atomics.store(gate, 0, 1);
     Atomics.notify(gate, 0);
     const exit = await new Promise((resolve) => worker.once('exit', resolve));
     console.log(JSON.stringify({ left, waitedMs, worker: messages[1], exit }));`,
    deferred({ operationDelayUs: 20 }),
  );
  // 200 fills of 20 us each, then the submission thread's short spin: far less than the worker's 10 s sleep.
  assert.equal(result.left, 0);
  assert.ok(result.waitedMs < 2000, `${result.waitedMs} ms`);
  // The worker makes no call after its message: whether it was already in Atomics.wait ('ok') or the streams were
  // back before it got there ('not-equal'), none of its calls gave them back; only a wait that ran out would be wrong.
  assert.ok(['ok', 'not-equal'].includes(result.worker), result.worker);
  assert.equal(result.exit, 0);
});

test('deferred: work a worker records on a shared stream waits for the earlier work another thread recorded there, and counts as an order wait', needsCompiler, async () => {
  const result = await simulatedJson<{ bytes: number[]; worker: { orderWaits: number; orderWaitMs: number }; main: { orderWaits: number; orderWaitMs: number } }>(
    `${load}
     import { Worker } from 'node:worker_threads';
     import { StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 1 });
     const stream = pool.getStream();
     const bytes = DeviceBuffer.alloc(64, { stream });
     const worker = new Worker(\`
       import { parentPort, workerData } from 'node:worker_threads';
       import { cuda, DeviceBuffer, StreamPool } from 'cuda-stream-pool';
       const stream = StreamPool.attach(workerData.pool).getStream();
       const bytes = DeviceBuffer.attach(workerData.bytes);
       parentPort.postMessage('ready');
       parentPort.once('message', async () => {
         stream.fill(bytes, 2); // after the main thread's fill, whose issue stalls
         await stream.synchronize();
         const { orderWaits, orderWaitMs } = cuda.submission();
         parentPort.postMessage({ orderWaits, orderWaitMs });
       });\`, { eval: true, workerData: { pool: pool.share(), bytes: bytes.share() } });
     await new Promise((resolve) => worker.once('message', resolve));
     stream.fill(bytes, 1); // its submission thread's first cuMemsetD8Async stalls for 1 s
     worker.postMessage('go');
     const counts = await new Promise((resolve) => worker.once('message', resolve));
     const out = [...await bytes.toArray(Uint8Array, { stream })];
     const { orderWaits, orderWaitMs } = cuda.submission();
     await worker.terminate();
     console.log(JSON.stringify({ bytes: [...new Set(out)], worker: counts, main: { orderWaits, orderWaitMs } }));`,
    // The process's first memset is the main thread's fill: the worker's is held back until it was issued.
    deferred({ fail: 'cuMemsetD8Async@any:1=stall:1000', env: { CUDA_STREAM_POOL_SUBMISSION_THREADS: '1' } }),
  );
  // The worker's fill was issued after the main thread's (the bytes are its 2s), held back most of the stall.
  assert.deepEqual(result.bytes, [2]);
  assert.equal(result.worker.orderWaits, 1);
  assert.ok(result.worker.orderWaitMs >= 100 && result.worker.orderWaitMs < 5000, `${result.worker.orderWaitMs} ms`);
  assert.deepEqual(result.main, { orderWaits: 0, orderWaitMs: 0 });
});

test('deferred: without a submission thread, the call that would record throws EAGAIN each time and nothing is left queued', needsCompiler, async () => {
  const result = await simulatedJson<{ first: string; second: string; recorded: number; query: boolean }>(
    `${load}
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(4096, { stream });
     await stream.synchronize();
     const attempt = () => { try { stream.fill(words, 1); return 'recorded'; } catch (e) { return e.code + ': ' + e.message; } };
     const first = attempt(), second = attempt();
     console.log(JSON.stringify({ first, second, recorded: cuda.submission().recorded, query: stream.query() }));`,
    deferred({ env: { CUDA_STREAM_POOL_FAIL_THREAD_START: 'csp-submit' } }),
  );
  const refused = 'EAGAIN: cuda-stream-pool could not start a submission thread, so this thread cannot record stream work (CUDA_STREAM_POOL_SUBMISSION=deferred): Resource temporarily unavailable';
  assert.deepEqual(result, { first: refused, second: refused, recorded: 0, query: true });
});

test('deferred: a stream that waits on an event waits for the record made before the wait, not for a later one on another submission thread', needsCompiler, async () => {
  const result = await simulatedJson<{ wrong: number }>(
    `${load}
     const streams = Array.from({ length: 6 }, () => Stream.create());
     const n = 4096, buffer = DeviceBuffer.alloc(n * 4, { stream: streams[0] }), out = PinnedBuffer.alloc(n * 4), event = Event.create();
     await streams[0].synchronize();
     let wrong = 0;
     for (let r = 1; r <= 60; r++) {
       const [s1, s2, s3] = [streams[r % 6], streams[(r + 1) % 6], streams[(r + 2) % 6]];
       for (let i = 0; i < 10; i++) fill.launch({ grid: n / 256, block: 256, stream: s1 }, buffer, r * 100 + i, n);
       event.record(s1);
       s2.waitEvent(event); // waits for s1's fills
       event.record(s3); // then the event moves on, to an idle stream
       s2.copy(out, buffer);
       await s2.synchronize();
       if (out.view(Uint32Array)[n - 1] !== r * 100 + 9) wrong++;
       await s1.synchronize();
     }
     console.log(JSON.stringify({ wrong }));`,
    deferred({ operationDelayUs: 30, env: { CUDA_STREAM_POOL_SUBMISSION_THREADS: '4' } }),
  );
  assert.deepEqual(result, { wrong: 0 });
});

test('deferred: every wait issued after a failure on a shared stream rejects, so a task whose work was dropped is told', needsCompiler, async () => {
  const result = await simulatedJson<{ a: string; b: string; after: string; threads: number }>(
    `${load}
     const stream = Stream.create();
     const [bufferA, bufferB] = [DeviceBuffer.alloc(1024, { stream }), DeviceBuffer.alloc(1024, { stream })];
     const out = PinnedBuffer.alloc(1024);
     fill.launch({ grid: 1, block: 256, stream }, bufferA, 11, 256); // task A: refused when issued
     fill.launch({ grid: 1, block: 256, stream }, bufferB, 22, 256); // task B: dropped
     stream.copy(out, bufferB);
     const [a, b] = await Promise.all([stream.synchronize(), stream.synchronize()].map((p) => p.then(() => 'resolved', (e) => e.call)));
     fill.launch({ grid: 1, block: 256, stream }, bufferB, 33, 256); // runs: the failure was reported
     stream.copy(out, bufferB);
     await stream.synchronize();
     console.log(JSON.stringify({ a, b, after: String(out.view(Uint32Array)[0]), threads: cuda.submission().threads }));`,
    deferred({ fail: 'cuLaunchKernel@any:1=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES', operationDelayUs: 100, env: { CUDA_STREAM_POOL_SUBMISSION_THREADS: '08' } }),
  );
  // '08' is not one of the values the variable takes (one digit from 1 to 8): the default, 2.
  assert.deepEqual(result, { a: 'cuLaunchKernel', b: 'cuLaunchKernel', after: '33', threads: 2 });
});

test('deferred: waitStream() on a stream whose recorded work failed errors the waiting stream; once reported, it carries nothing', needsCompiler, async () => {
  const result = await simulatedJson<{ waiter: string; producer: string; untouched: boolean; later: string; value: string }>(
    `${refusedOnA}
     b.waitStream(a);
     b.copy(out, words); // must not read what a never wrote
     const waiter = await b.synchronize().then(() => 'resolved', (e) => e.call);
     const producer = await a.synchronize().then(() => 'resolved', (e) => e.call);
     const untouched = out.view(Uint32Array).every((v) => v === 0xaa);
     fill.launch({ grid: 1, block: 64, stream: a }, words, 7, 64); // runs: a's failure was reported
     b.waitStream(a);
     b.copy(out, words);
     const later = await b.synchronize().then(() => 'resolved', (e) => e.call);
     console.log(JSON.stringify({ waiter, producer, untouched, later, value: String(out.view(Uint32Array)[63]) }));`,
    deferred({ fail: 'cuLaunchKernel@any:1=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES', operationDelayUs: 200 }),
  );
  assert.deepEqual(result, { waiter: 'cuLaunchKernel', producer: 'cuLaunchKernel', untouched: true, later: 'resolved', value: '7' });
});

test('deferred: device.synchronize() reports a failure no wait reported, once, and not one a stream wait reported, on either device', needsCompiler, async () => {
  const result = await simulatedJson<{ unreported: string; again: string; viaOtherDevice: string; deviceOne: string; deviceZero: string }>(
    `${load}
     const [zero, one] = [Device.get(0), Device.get(1)];
     const s0 = Stream.create({ device: zero }), s1 = Stream.create({ device: one });
     const words = DeviceBuffer.alloc(64 * 4, { stream: s0 });
     await s0.synchronize();
     const call = (p) => p.then(() => 'resolved', (e) => e.call);
     s0.fill(words, 5, { type: 'u32' }); // refused, never waited on by a stream wait
     const unreported = await call(zero.synchronize());
     const again = await call(zero.synchronize());
     const other = DeviceBuffer.alloc(64 * 4, { stream: s1 });
     await s1.synchronize();
     await call(s0.synchronize()); // s0's failure is still set until a wait on it reports it
     s1.fill(other, 5, { type: 'u32' }); // refused on device 1
     s0.waitStream(s1);
     const viaOtherDevice = await call(s0.synchronize()); // reported here, through device 0's stream
     const deviceOne = await call(one.synchronize());
     const deviceZero = await call(zero.synchronize());
     await call(s1.synchronize());
     console.log(JSON.stringify({ unreported, again, viaOtherDevice, deviceOne, deviceZero }));`,
    deferred({ fail: 'cuMemsetD32Async@any:1=CUDA_ERROR_OUT_OF_MEMORY,cuMemsetD32Async@any:2=CUDA_ERROR_OUT_OF_MEMORY', operationDelayUs: 200, devices: 2 }),
  );
  assert.deepEqual(result, { unreported: 'cuMemsetD32Async', again: 'resolved', viaOtherDevice: 'cuMemsetD32Async', deviceOne: 'resolved', deviceZero: 'resolved' });
});

test('deferred: graph launches and prefetches are recorded; a launch the driver refuses is dropped with the work after it and rejects the next wait', needsCompiler, async () => {
  const result = await simulatedJson<{ recordedByLaunch: number; recordedByPrefetch: number; call: string; untouched: boolean; after: number[]; prefetched: string }>(
    `${load}
     const { Graph, ManagedBuffer } = await import('cuda-stream-pool');
     const stream = Stream.create();
     const words = DeviceBuffer.alloc(64 * 4, { stream });
     const out = PinnedBuffer.alloc(64 * 4);
     out.view(Uint32Array).fill(0xaa);
     const graph = await Graph.capture(stream, (s) => fill.launch({ grid: 1, block: 64, stream: s }, words, 9, 64));
     const exec = graph.instantiate();
     await stream.synchronize();
     let before = cuda.submission().recorded;
     exec.launch(stream); // refused by the driver when issued: no throw here
     const recordedByLaunch = cuda.submission().recorded - before;
     stream.copy(out, words); // dropped
     const call = await stream.synchronize().then(() => 'resolved', (e) => e.call);
     const untouched = out.view(Uint32Array).every((v) => v === 0xaa);
     exec.launch(stream);
     stream.copy(out, words);
     await stream.synchronize();
     const after = [...new Set(out.view(Uint32Array))];
     const managed = ManagedBuffer.alloc(4096);
     before = cuda.submission().recorded;
     managed.prefetch(Device.get(0), stream);
     const recordedByPrefetch = cuda.submission().recorded - before;
     const prefetched = await stream.synchronize().then(() => 'resolved', (e) => e.call);
     managed.free(); exec.destroy(); graph.destroy();
     console.log(JSON.stringify({ recordedByLaunch, recordedByPrefetch, call, untouched, after, prefetched }));`,
    deferred({ fail: 'cuGraphLaunch@any:1=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES', operationDelayUs: 200 }),
  );
  assert.deepEqual(result, { recordedByLaunch: 1, recordedByPrefetch: 1, call: 'cuGraphLaunch', untouched: true, after: [9], prefetched: 'resolved' });
});

test('deferred: a failure reported by any wait (device, event, a stream that waited) is reported once: every stream it reached runs again, and a direct stream is told at waitStream()', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, string>>(
    `${refusedOnA}
     const call = (p) => p.then(() => 'resolved', (e) => e.call);
     const round = async (value) => {
       fill.launch({ grid: 1, block: 64, stream: a }, words, value, 64);
       a.copy(out, words);
       await a.synchronize();
       return String(out.view(Uint32Array)[0]);
     };
     const r = {};
     r.device = await call(Device.get(0).synchronize()); // reports the refused fill
     r.afterDevice = await round(6); // a runs again
     fill.launch({ grid: 1, block: 64, stream: a }, words, 7, 64); // refused too
     const done = Event.create().record(a);
     b.waitEvent(done);
     r.waiter = await call(b.synchronize()); // reported through the event's waiter
     r.deviceAfterWaiter = await call(Device.get(0).synchronize());
     r.afterWaiter = await round(8);
     fill.launch({ grid: 1, block: 64, stream: a }, words, 9, 64); // refused too
     r.event = await call(Event.create().record(a).synchronize()); // a host wait on an event reports it
     b.waitStream(a); // carries nothing: reported
     r.waitAfterReport = await call(b.synchronize());
     r.afterEvent = await round(10);
     fill.launch({ grid: 1, block: 64, stream: a }, words, 11, 64); // refused too
     try { Stream.legacy().waitStream(a); r.legacy = 'no throw'; } catch (e) { r.legacy = e.call; }
     r.afterLegacy = await call(Stream.legacy().synchronize());
     console.log(JSON.stringify(r));`,
    deferred({ fail: ['1', '3', '5', '7'].map((k) => `cuLaunchKernel@any:${k}=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`).join(','), operationDelayUs: 200 }),
  );
  assert.deepEqual(result, {
    device: 'cuLaunchKernel', afterDevice: '6',
    waiter: 'cuLaunchKernel', deviceAfterWaiter: 'resolved', afterWaiter: '8',
    event: 'cuLaunchKernel', waitAfterReport: 'resolved', afterEvent: '10',
    legacy: 'cuLaunchKernel', afterLegacy: 'resolved',
  });
});

test('deferred: device.synchronize() rejects with a failure of recorded work only once the device\'s other work is done, and the failed stream then runs again', needsCompiler, async () => {
  const result = await simulatedJson<{ rounds: string[] }>(
    `${load}
     const device = Device.get(0);
     const [a, c] = [Stream.create(), Stream.create()];
     const [wa, wc] = [DeviceBuffer.alloc(256, { stream: a }), DeviceBuffer.alloc(256, { stream: c })];
     const [oa, oc] = [PinnedBuffer.alloc(256), PinnedBuffer.alloc(256)];
     await device.synchronize();
     const rounds = [];
     for (let round = 1; round <= 3; round++) {
       oa.view(Uint32Array).fill(0xaa);
       oc.view(Uint32Array).fill(0xaa);
       fill.launch({ grid: 1, block: 64, stream: a }, wa, round, 64); // round 1: refused when issued
       a.copy(oa, wa);
       fill.launch({ grid: 1, block: 64, stream: c }, wc, round, 64);
       c.copy(oc, wc);
       const settled = await device.synchronize().then(() => 'resolved', (e) => e.call);
       rounds.push(settled + ' ' + oa.view(Uint32Array)[0] + ' ' + oc.view(Uint32Array)[0]);
     }
     console.log(JSON.stringify({ rounds }));`,
    // One submission thread, so that stream a's launch is the first issued: with two, the threads of a and c race
    // for the first cuLaunchKernel, which the rule fails.
    deferred({ fail: 'cuLaunchKernel@any:1=CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES', operationDelayUs: 2000, env: { CUDA_STREAM_POOL_SUBMISSION_THREADS: '1' } }),
  );
  assert.deepEqual(result.rounds, ['cuLaunchKernel 170 1', 'resolved 2 2', 'resolved 3 3']);
});

test('deferred: a PinnedBuffer copied on two streams of different submission threads is fenced on both: its block is not reused until both copies are done', needsCompiler, async () => {
  const result = await simulatedJson<{ wrong: string[]; shards: number }>(
    `${load}
     const [s0, s1] = [Stream.create(), Stream.create()]; // given to the two submission threads in turn
     const bytes = 4096, rounds = 400;
     const targets = [s0, s1].map((stream) => DeviceBuffer.alloc(rounds * bytes, { stream }));
     for (let r = 0; r < rounds; r++) {
       // A fresh buffer each round, freed at once: the cache gives its block to a later round as soon as the fences
       // it holds say its copies are done; a lost fence lets a later round's bytes into this round's copy.
       const source = PinnedBuffer.alloc(bytes);
       source.view(Uint8Array).fill(r & 255);
       s0.copy(targets[0], source, { dstOffset: r * bytes });
       s1.copy(targets[1], source, { dstOffset: r * bytes });
       source.free();
     }
     const wrong = [];
     for (const [i, stream] of [s0, s1].entries()) {
       const out = await targets[i].toArray(Uint8Array, { stream });
       for (let r = 0; r < rounds; r++)
         if (out.subarray(r * bytes, (r + 1) * bytes).some((b) => b !== (r & 255))) wrong.push('stream ' + i + ' round ' + r);
     }
     console.log(JSON.stringify({ wrong, shards: cuda.submission().threads }));`,
    deferred({ operationDelayUs: 20 }),
  );
  assert.equal(result.shards, 2);
  assert.deepEqual(result.wrong, []);
});

test('deferred: once a wait has reported a failure, work queued directly on the stream (copies to and from JS arrays) runs and later waits resolve', needsCompiler, async () => {
  const result = await simulatedJson<string[]>(
    `${load}
     const stream = Stream.create();
     const buffer = DeviceBuffer.alloc(1024, { stream });
     await stream.synchronize();
     const outcomes = [];
     const attempt = async (label, body) => {
       try { outcomes.push(label + ' ' + (await body())); } catch (e) { outcomes.push(label + ' ' + e.code + ' ' + e.call); }
     };
     stream.fill(buffer, 7); // refused when issued
     await attempt('first wait', () => stream.synchronize().then(() => 'resolved'));
     await attempt('second wait', () => stream.synchronize().then(() => 'resolved'));
     stream.copy(buffer, new Uint8Array(1024).fill(9)); // staged: queued directly, not recorded
     await attempt('toArray', async () => (await buffer.toArray(Uint8Array, { stream }))[1023]);
     await attempt('wait after', () => stream.synchronize().then(() => 'resolved'));
     console.log(JSON.stringify(outcomes));`,
    deferred({ fail: 'cuMemsetD8Async@any:1=CUDA_ERROR_OUT_OF_MEMORY' }),
  );
  assert.deepEqual(result, [
    // Every wait before new work reports the failure (each covers the dropped fill).
    'first wait CUDA_ERROR_OUT_OF_MEMORY cuMemsetD8Async',
    'second wait CUDA_ERROR_OUT_OF_MEMORY cuMemsetD8Async',
    'toArray 9',
    'wait after resolved',
  ]);
});
