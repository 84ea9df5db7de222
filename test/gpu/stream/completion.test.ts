// The completion engine: markers, the poller thread, batched delivery, faults after destroy, landings of staged
// copies, workers, foreign contexts. Every GPU case here also runs with event markers (CUDA_STREAM_POOL_COMPLETION=event)
// in a child process, through the last test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

import { completionStats, DeviceBuffer, Stream, StreamPool } from 'cuda-stream-pool';
import { native } from '#library/binding/binding.js';
import { gpu, gpuNotSimulated, MS, spinBehindGate, testKernels } from '../../support/gpu.js';
import { runChild } from '../../support/child.js';

const workerUrl = new URL('../../workers/completion-worker.js', import.meta.url);
const forcedMarker = process.env.CUDA_STREAM_POOL_COMPLETION;

test('the marker kind follows the device and CUDA_STREAM_POOL_COMPLETION', gpu, () => {
  const kind = native.completionMarker(0);
  if (forcedMarker === 'event') assert.equal(kind, 'event');
  else assert.ok(kind === 'ticket' || kind === 'event', kind);
});

test('waits on 32 streams that finish together settle in fewer wake-ups than waits, all delivered', gpu, async () => {
  const { spin } = await testKernels();
  const streams = Array.from({ length: 32 }, () => Stream.create());
  const before = completionStats();
  // No spin ends before every wait is made, and all end together.
  const gate = spinBehindGate(spin, streams, 30n * MS);
  await Promise.all(streams.map((stream) => stream.synchronize()));
  const after = completionStats();
  const wakeups = after.wakeups - before.wakeups;
  const delivered = after.delivered - before.delivered;
  assert.equal(delivered, 32, `delivered ${delivered}`);
  assert.ok(wakeups >= 1 && wakeups < delivered, `${wakeups} wake-ups for ${delivered} waits`);
  assert.ok(after.largestBatch >= 2, `largest batch ${after.largestBatch}`);
  for (const stream of streams) stream.destroy();
  gate.destroy();
});

test('repeated waits with no work queued between them share one ticket; new work, or a handle read by JS, ends the sharing', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  const tickets = native.completionMarker(0) === 'ticket';
  const markers = () => completionStats().markersEnqueued;
  spin.launch({ grid: 1, block: 1, stream }, 30n * MS, 0n);
  let before = markers();
  await Promise.all(Array.from({ length: 100 }, () => stream.synchronize()));
  assert.equal(markers() - before, tickets ? 1 : 100, 'markers for 100 waits on one kernel');
  before = markers();
  for (let i = 0; i < 10; i++) await stream.synchronize();
  assert.equal(markers() - before, 0, 'waits on an idle stream settle at once, without a marker');
  before = markers();
  spin.launch({ grid: 1, block: 1, stream }, 20n * MS, 0n);
  const first = stream.synchronize();
  spin.launch({ grid: 1, block: 1, stream }, 20n * MS, 0n);
  const second = [stream.synchronize(), stream.synchronize()];
  await Promise.all([first, ...second]);
  assert.equal(markers() - before, tickets ? 2 : 3, 'a launch between waits gets the later waits a new marker');
  // Work queued through the raw handle is invisible to the library's count: once JS read the handle, every wait
  // enqueues its own marker, so the wait below covers the kernel queued through another wrapper of the handle.
  const borrowed = Stream.fromHandle(stream.handle);
  spin.launch({ grid: 1, block: 1, stream: borrowed }, 50n * MS, 0n);
  const started = performance.now();
  await stream.synchronize();
  const waitedMs = performance.now() - started;
  assert.ok(waitedMs > 25, `the wait settled after ${waitedMs.toFixed(3)} ms, before the 50 ms kernel queued through the handle`);
  stream.destroy();
});

test('the poller parks once nothing is pending, and the idle process uses almost no CPU', gpu, async () => {
  const { spin } = await testKernels();
  const pool = new StreamPool({ size: 8 });
  const stream = pool.getStream();
  spin.launch({ grid: 1, block: 1, stream }, 5n * MS, 0n);
  const parksBefore = completionStats().pollerParks;
  await stream.synchronize();
  await new Promise((resolve) => setTimeout(resolve, 100)); // spin, yield, sleeps growing to 1 ms, then park
  const parked = completionStats();
  assert.equal(parked.processPending, 0);
  assert.equal(parked.pollerParked, true);
  assert.ok(parked.pollerParks > parksBefore, `parks ${parksBefore} -> ${parked.pollerParks}`);
  const cpu = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, 500));
  const used = process.cpuUsage(cpu);
  const ms = (used.user + used.system) / 1000;
  assert.ok(ms < 25, `${ms} ms of CPU in 500 ms idle with a live pool (5 % of a core; the target is 1 %)`);
  pool.destroy();
});

test('a thread that launches and awaits in a loop finds the poller awake: it does not park between the waits', gpuNotSimulated('pollerLinger'), async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  // A 50 µs kernel rather than an empty one, which can finish before the wait's query on a fast driver (the simulated
  // one runs it at once): the waits must be the poller's for the test to say anything.
  const kernelNs = 50_000n;
  try {
    for (let i = 0; i < 20; i++) { // warm-up: the JIT, the stream's ticket slot
      spin.launch({ grid: 1, block: 1, stream }, kernelNs, 0n);
      await stream.synchronize();
    }
    const waits = 400;
    const before = completionStats();
    for (let i = 0; i < waits; i++) {
      spin.launch({ grid: 1, block: 1, stream }, kernelNs, 0n);
      await stream.synchronize();
    }
    const after = completionStats();
    const viaPoller = after.delivered - before.delivered;
    const parks = after.pollerParks - before.pollerParks;
    // Each wait that the poller saw would cost it a park and a wake-up without the linger; a few parks (a GC pause,
    // the scheduler) are allowed, a park per wait is not.
    assert.ok(viaPoller > waits / 2, `${viaPoller} of ${waits} waits went through the poller (the kernel outran the query)`);
    assert.ok(parks < viaPoller / 4, `${parks} poller parks for ${viaPoller} waits through the poller`);
  } finally {
    stream.destroy();
  }
});

test('a device-to-host copy lands before a later wait settles, also when the stream is idle by then', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  const source = DeviceBuffer.alloc(4096, { stream });
  stream.fill(source, 0xab);
  const output = new Uint8Array(4096);
  spin.launch({ grid: 1, block: 1, stream }, 20n * MS, 0n);
  stream.copy(output, source);
  assert.equal(completionStats().landingsPending, 1);
  // Block this thread until the GPU is done, so that the wait below finds the stream idle: the landing must still
  // come first.
  stream.synchronizeSync();
  await stream.synchronize();
  assert.ok(output.every((b) => b === 0xab), 'the bytes landed before synchronize() settled');
  assert.equal(completionStats().landingsPending, 0);
  source.free();
  stream.destroy();
});

test('500 times: a device-to-host copy, a blocking wait, then an awaited wait: the bytes are always there', gpu, async () => {
  // The awaited wait finds the stream idle while the poller may not have seen the copy's marker yet: it must still
  // go through the engine, which lands the copy first.
  const stream = Stream.create();
  const source = DeviceBuffer.alloc(256, { stream });
  const output = new Uint8Array(256);
  for (let round = 0; round < 500; round++) {
    stream.fill(source, round & 0xff);
    stream.copy(output, source);
    stream.synchronizeSync();
    await stream.synchronize();
    const wrong = output.findIndex((b) => b !== (round & 0xff));
    assert.equal(wrong, -1, `round ${round}: byte ${wrong} is ${output[wrong]}`);
  }
  source.free();
  stream.destroy();
});

test('staged copies and plain waits interleaved on 8 streams, 200 rounds: every copy has landed when its wait settles', gpu, async () => {
  // Plain waits take markers from the same pool as the copies' markers: a marker given back while its copy was
  // still landing, then recorded again, made a landed copy look pending or a pending one look done.
  const { spin } = await testKernels();
  const streams = Array.from({ length: 8 }, () => Stream.create());
  const sources = streams.map((stream) => DeviceBuffer.alloc(1024, { stream }));
  const outputs = streams.map(() => new Uint8Array(1024));
  for (let round = 0; round < 200; round++) {
    const waits = streams.map(async (stream, i) => {
      const value = (round * 8 + i) & 0xff;
      if (i % 2 === 0) spin.launch({ grid: 1, block: 1, stream }, BigInt((round % 5) * 2000), 0n);
      stream.fill(sources[i]!, value);
      stream.copy(outputs[i]!, sources[i]!);
      await stream.synchronize();
      const wrong = outputs[i]!.findIndex((b) => b !== value);
      assert.equal(wrong, -1, `round ${round}, stream ${i}: byte ${wrong} is ${outputs[i]![wrong]}, expected ${value}`);
    });
    // Plain waits meanwhile, on streams with nothing to land.
    const plain = streams.map((stream) => stream.synchronize());
    await Promise.all([...waits, ...plain]);
  }
  for (const [i, stream] of streams.entries()) {
    sources[i]!.free();
    stream.destroy();
  }
});

test('a destination transferred away before the copy lands gets nothing; the wait settles and the new owner is intact', gpu, async () => {
  const { spin } = await testKernels();
  const stream = Stream.create();
  const source = DeviceBuffer.alloc(1 << 20, { stream });
  stream.fill(source, 0x5a);
  const kept = new Uint8Array(1 << 20);
  const moved = new ArrayBuffer(1 << 20);
  spin.launch({ grid: 1, block: 1, stream }, 50n * MS, 0n);
  stream.copy(kept, source);
  stream.copy(new Uint8Array(moved), source);
  const transferred = structuredClone(moved, { transfer: [moved] });
  assert.equal(moved.byteLength, 0, 'detached by the transfer');
  new Uint8Array(transferred).fill(7);
  await stream.synchronize();
  assert.ok(kept.every((b) => b === 0x5a), 'the array that stayed got its bytes');
  assert.ok(new Uint8Array(transferred).every((b) => b === 7), 'the transferred memory was not written');
  source.free();
  stream.destroy();
});

test('waits from four workers settle in batches in each worker, and every worker exits 0', gpu, async () => {
  const workers = Array.from({ length: 4 }, () => new Worker(workerUrl, { workerData: { mode: 'batch' } }));
  const exits = workers.map((worker) => once(worker, 'exit')); // listening before a worker can finish
  await Promise.all(workers.map((worker) => once(worker, 'message'))); // each warmed up
  const reportsComing = workers.map((worker) => once(worker, 'message'));
  for (const worker of workers) worker.postMessage('go');
  const reports = (await Promise.all(reportsComing)).map(([report]) => report);
  for (const report of reports) {
    assert.equal(report.delivered, 16, JSON.stringify(report));
    assert.ok(report.wakeups < report.delivered, JSON.stringify(report));
  }
  const codes = (await Promise.all(exits)).map(([code]) => code);
  assert.deepEqual(codes, [0, 0, 0, 0]);
});

test('a worker that exits with waits pending: the poller drops them once their work ends, nothing else is left', gpu, async () => {
  const pendingBefore = completionStats().processPending;
  const worker = new Worker(workerUrl, { workerData: { mode: 'exit-pending' } });
  const exit = once(worker, 'exit'); // the worker exits right after its message
  const [queued] = await once(worker, 'message');
  assert.equal(queued.pending, pendingBefore + 4);
  const [code] = await exit;
  assert.equal(code, 0);
  // The worker's kernels run 300 ms; their waits go when they finish.
  const deadline = performance.now() + 5000;
  while (completionStats().processPending > pendingBefore && performance.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(completionStats().processPending, pendingBefore);
  const stream = Stream.create();
  await stream.synchronize();
  stream.destroy();
});

test('after a fault, waits whose stream, event or pool was destroyed meanwhile reject within 100 ms', gpu, async () => {
  const result = await runChild(`
    import { readFileSync } from 'node:fs';
    import { Event, Module, Stream, StreamPool, CudaError } from 'cuda-stream-pool';
    const module = await Module.load(readFileSync('test/kernels/test-kernels.ptx', 'utf8'));
    const spin = module.getFunction('spin', ['u64', 'ptr']);
    const bad = module.getFunction('write_invalid', ['u64']);
    const owned = Stream.create();
    const watcher = Stream.create();
    const pool = new StreamPool({ size: 2 });
    const pooled = pool.getStream();
    // The pool stream spins past the fault, so its work fails with it rather than finishing just before it.
    spin.launch({ grid: 1, block: 1, stream: owned }, 300_000_000n, 0n);
    spin.launch({ grid: 1, block: 1, stream: pooled }, 1_000_000_000n, 0n);
    bad.launch({ grid: 1, block: 1, stream: owned }, 0x10n);
    const event = Event.create();
    event.record(owned);
    // When the driver itself first reports the fault: a query on an idle stream, every millisecond.
    let faultSeen;
    const probe = setInterval(() => { try { watcher.query(); } catch { faultSeen ??= performance.now(); } }, 1);
    const outcome = async (p) => {
      try { await p; return 'resolved'; } catch (e) {
        return e instanceof CudaError && e.sticky ? { after: performance.now() } : 'not a sticky CudaError: ' + e;
      }
    };
    const waits = [owned.synchronize(), event.synchronize(), pooled.synchronize()].map(outcome);
    owned.destroy();
    event.destroy();
    pool.destroy();
    const results = await Promise.all(waits);
    await new Promise((resolve) => setTimeout(resolve, 20));
    clearInterval(probe);
    console.log(JSON.stringify(results.map((r) => typeof r === 'string' ? r : Math.round(r.after - faultSeen))));
  `);
  assert.equal(result.signal, null);
  assert.equal(result.code, 0, result.stderr);
  const lines: (string | number)[] = JSON.parse(result.stdout);
  assert.equal(lines.length, 3);
  for (const line of lines) {
    assert.equal(typeof line, 'number', String(line));
    // Milliseconds from the driver's first report of the fault to the rejection: 100 is the target, 200 the bound.
    assert.ok((line as number) < 200, `rejected ${line} ms after the fault`);
  }
});

test('another CUDA context current on the thread does not misdirect the library\'s calls', gpu, async () => {
  const result = await runChild(`
    import koffi from 'koffi';
    import { DeviceBuffer, Stream } from 'cuda-stream-pool';
    // The driver the library loaded (the simulated driver names itself in CUDA_STREAM_POOL_LIBCUDA).
    const cuda = koffi.load(process.env.CUDA_STREAM_POOL_LIBCUDA || 'libcuda.so.1');
    const cuCtxCreate = cuda.func('int cuCtxCreate_v2(_Out_ void **context, unsigned int flags, int device)');
    const cuCtxSetCurrent = cuda.func('int cuCtxSetCurrent(void *context)');
    const cuCtxDestroy = cuda.func('int cuCtxDestroy_v2(void *context)');
    const stream = Stream.create();
    const buffer = DeviceBuffer.alloc(1024, { stream });
    const out = [null];
    if (cuCtxCreate(out, 0, 0) !== 0) throw new Error('cuCtxCreate failed');
    const foreign = out[0];
    const results = [];
    for (let round = 0; round < 3; round++) {
      if (cuCtxSetCurrent(foreign) !== 0) throw new Error('cuCtxSetCurrent failed');
      stream.fill(buffer, 0x10 + round);
      const host = new Uint8Array(1024);
      stream.copy(host, buffer);
      if (cuCtxSetCurrent(foreign) !== 0) throw new Error('cuCtxSetCurrent failed');
      await stream.synchronize();
      results.push(host.every((b) => b === 0x10 + round));
    }
    buffer.free();
    stream.destroy();
    cuCtxDestroy(foreign);
    console.log(JSON.stringify(results));
  `);
  assert.equal(result.signal, null);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), [true, true, true]);
});

test('every case above also passes with event markers (CUDA_STREAM_POOL_COMPLETION=event)', { ...gpu, skip: gpu.skip || (forcedMarker === 'event' ? 'this run is the event-marker run' : false) }, async () => {
  const result = await runChild(
    `import { spawnSync } from 'node:child_process';
     const env = { ...process.env };
     delete env.NODE_TEST_CONTEXT; // a test run of its own, not a child reporting to this one
     const r = spawnSync(process.execPath, ['--expose-gc', '--test', '--test-reporter=tap', ${JSON.stringify(fileURLToPath(import.meta.url))}], { encoding: 'utf8', env });
     process.stdout.write(r.stdout); process.stderr.write(r.stderr); process.exit(r.status ?? 1);`,
    { CUDA_STREAM_POOL_COMPLETION: 'event' },
    180_000,
  );
  assert.equal(result.code, 0, result.stdout.slice(-3000) + result.stderr.slice(-2000));
  assert.match(result.stdout, /# fail 0/);
});
