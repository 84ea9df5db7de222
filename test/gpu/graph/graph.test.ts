import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import {
  CaptureError,
  CudaError,
  cuda,
  DestroyedError,
  DeviceBuffer,
  Event,
  Graph,
  ManagedBuffer,
  Module,
  PinnedBuffer,
  Stream,
  StreamPool,
  type GraphExec,
  type Kernel,
} from 'cuda-stream-pool';
import { gpu, repositoryRoot, testKernels } from '../../support/gpu.js';
import { startWorker } from '../../support/worker.js';
import { flushNursery } from '#library/binding/native-ref-lifetime.js';

const N = 4096; // elements (u32) per buffer
const BYTES = 4 * N;

/** Input values that differ per element and per seed, so a stale or misplaced copy shows. */
function fillInput(view: Uint32Array, seed: number): void {
  for (let i = 0; i < view.length; i++) view[i] = (i * 2654435761 + seed) >>> 0;
}

/** What copy-in, fill_u32(value, count), copy-out leaves in the output. */
function expected(input: Uint32Array, value: number, count: number): Uint32Array {
  const out = Uint32Array.from(input);
  out.fill(value, 0, count);
  return out;
}

/** Queues the task the graph tests capture: copy `input` in, overwrite the first `count` elements with `value`,
 * copy the buffer out. */
function enqueueTask(stream: Stream, kernel: Kernel, buffer: DeviceBuffer, input: PinnedBuffer, output: PinnedBuffer, value: number, count: number): void {
  stream.copy(buffer, input);
  kernel.launch({ grid: Math.ceil(N / 256), block: 256, stream }, buffer, value, count);
  stream.copy(output, buffer);
}

function isCaptureError(operation: string, stream: Stream): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof CaptureError, `expected a CaptureError, got ${String(error)}`);
    assert.equal(error.code, 'ERR_STREAM_CAPTURING');
    assert.equal(error.operation, operation);
    assert.equal(error.streamId, stream.id);
    assert.match(error.message, new RegExp(`stream ${stream.id}\\)$`));
    return true;
  };
}

test('Graph.capture() rejects a non-Stream before touching the driver', async () => {
  await assert.rejects(Graph.capture(42 as never, () => undefined), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: '"stream" must be a Stream; received 42 (number).' });
});

test('a captured copy-in, kernel, copy-out replays to the same bytes as running it directly, and rereads its input', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(BYTES, { stream });
  using input = PinnedBuffer.alloc(BYTES);
  using direct = PinnedBuffer.alloc(BYTES);
  using replayed = PinnedBuffer.alloc(BYTES);
  const inputView = input.view(Uint32Array);
  fillInput(inputView, 1);

  enqueueTask(stream, fillU32, buffer, input, direct, 7, N / 2);
  await stream.synchronize();
  assert.deepEqual(direct.view(Uint32Array), expected(inputView, 7, N / 2));

  stream.beginCapture();
  assert.equal(stream.capturing, true);
  enqueueTask(stream, fillU32, buffer, input, replayed, 7, N / 2);
  using graph = stream.endCapture();
  assert.equal(stream.capturing, false);
  assert.equal(graph.nodeCount, 3);
  assert.equal(graph.kernelNodes().length, 1);
  replayed.view(Uint32Array).fill(0);
  await stream.synchronize();
  assert.deepEqual(replayed.view(Uint32Array), new Uint32Array(N), 'capturing runs nothing');

  using exec = graph.instantiate();
  exec.launch(stream);
  await stream.synchronize();
  assert.deepEqual(replayed.view(Uint32Array), direct.view(Uint32Array));

  fillInput(inputView, 2);
  exec.launch(stream);
  await stream.synchronize();
  assert.deepEqual(replayed.view(Uint32Array), expected(inputView, 7, N / 2), 'a launch copies the pinned input as it is then');
});

test('setKernelArguments() changes the captured launch for later launches only', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  using first = DeviceBuffer.alloc(BYTES, { stream });
  using second = DeviceBuffer.alloc(BYTES, { stream });
  using out = PinnedBuffer.alloc(BYTES);
  stream.fill(first, 0);
  stream.fill(second, 0);
  using graph = await Graph.capture(stream, () => fillU32.launch({ grid: Math.ceil(N / 256), block: 256, stream }, first, 5, N));
  using exec = graph.instantiate();
  const [node] = graph.kernelNodes();
  assert.equal(node!.kernel, fillU32);
  assert.equal(node!.index, 0);
  exec.launch(stream);
  exec.setKernelArguments(node!, second, 9, 10);
  exec.launch(stream);
  stream.copy(out, first);
  await stream.synchronize();
  assert.deepEqual(out.view(Uint32Array), new Uint32Array(N).fill(5));
  stream.copy(out, second);
  await stream.synchronize();
  assert.deepEqual(out.view(Uint32Array), new Uint32Array(N).fill(9, 0, 10));

  assert.throws(() => exec.setKernelArguments(node!, second, -1, 10), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: /"args\[1\]" must be a u32/ });
  assert.throws(() => exec.setKernelArguments(node!, second, 1), { code: 'ERR_INVALID_ARG_VALUE', message: /"args" must be 3 argument\(s\)/ });
  using other = await Graph.capture(stream, () => fillU32.launch({ grid: 1, block: 1, stream }, first, 1, 1));
  assert.throws(() => exec.setKernelArguments(other.kernelNodes()[0]!, first, 1, 1), { code: 'ERR_INVALID_ARG_VALUE', message: /"node" is not a kernel node of the graph/ });
});

test('a fork/join capture across two leased pool streams records both branches into one graph', gpu, async () => {
  const { fillU32 } = await testKernels();
  await using pool = new StreamPool({ size: 4 });
  using main = await pool.acquire();
  using side = await pool.acquire();
  const a = main.stream;
  const b = side.stream;
  using left = DeviceBuffer.alloc(BYTES, { stream: a });
  using right = DeviceBuffer.alloc(BYTES, { stream: a });
  using out = PinnedBuffer.alloc(2 * BYTES);
  await a.synchronize();

  a.beginCapture();
  b.waitStream(a); // fork: b joins the capture
  assert.equal(b.capturing, true);
  fillU32.launch({ grid: Math.ceil(N / 256), block: 256, stream: a }, left, 11, N);
  fillU32.launch({ grid: Math.ceil(N / 256), block: 256, stream: b }, right, 22, N);
  assert.throws(() => b.synchronizeSync(), isCaptureError('stream.synchronizeSync()', b));
  a.waitStream(b); // join
  assert.throws(() => b.endCapture(), (error) => isCaptureError('stream.endCapture()', b)(error) && /joined the capture begun on stream/.test((error as Error).message));
  a.copy(out, left);
  a.copy(out, right, { dstOffset: BYTES });
  using graph = a.endCapture();
  assert.equal(a.capturing, false);
  assert.equal(b.capturing, false);
  assert.deepEqual(graph.kernelNodes().map((n) => n.index), [0, 1]);
  assert.ok(graph.nodeCount >= 4, `two kernels and two copies, got ${graph.nodeCount} nodes`);

  using exec = graph.instantiate();
  exec.launch(a);
  await a.synchronize();
  const view = out.view(Uint32Array);
  assert.deepEqual(view.subarray(0, N), new Uint32Array(N).fill(11));
  assert.deepEqual(view.subarray(N), new Uint32Array(N).fill(22));
});

test('every operation illegal during a capture throws CaptureError and the capture stays usable', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  using other = Stream.create();
  using buffer = DeviceBuffer.alloc(BYTES, { stream });
  using spare = DeviceBuffer.alloc(BYTES, { stream: other });
  using out = PinnedBuffer.alloc(BYTES);
  using event = Event.create();
  using start = Event.create({ timing: true });
  start.record(other);
  await stream.synchronize();
  await other.synchronize();

  stream.beginCapture();
  stream.fill(buffer, 0);
  event.record(stream);
  assert.throws(() => stream.query(), isCaptureError('stream.query()', stream));
  await assert.rejects(stream.synchronize(), isCaptureError('stream.synchronize()', stream));
  assert.throws(() => stream.synchronizeSync(), isCaptureError('stream.synchronizeSync()', stream));
  assert.throws(() => DeviceBuffer.alloc(64, { stream }), isCaptureError('DeviceBuffer.alloc()', stream));
  assert.throws(() => spare.free({ stream }), isCaptureError('DeviceBuffer.free()', stream));
  assert.equal(spare.freed, false, 'a refused free leaves the buffer usable');
  const stagedOperation = 'stream.copy() of pageable host memory (staged; copy a PinnedBuffer instead)';
  assert.throws(() => stream.copy(buffer, new Uint32Array(N)), isCaptureError(stagedOperation, stream));
  assert.throws(() => stream.copy(new Uint32Array(N), buffer), isCaptureError(stagedOperation, stream));
  assert.throws(() => event.query(), isCaptureError('event.query()', stream));
  await assert.rejects(event.synchronize(), isCaptureError('event.synchronize()', stream));
  assert.throws(() => event.synchronizeSync(), isCaptureError('event.synchronizeSync()', stream));
  assert.throws(() => Event.elapsedMs(start, event), isCaptureError('event.elapsedMs()', stream));
  assert.throws(() => stream.beginCapture(), isCaptureError('stream.beginCapture()', stream));

  assert.equal(stream.capturing, true);
  fillU32.launch({ grid: Math.ceil(N / 256), block: 256, stream }, buffer, 3, N);
  stream.copy(out, buffer);
  using graph = stream.endCapture();
  using exec = graph.instantiate();
  exec.launch(stream);
  await stream.synchronize();
  assert.deepEqual(out.view(Uint32Array), new Uint32Array(N).fill(3));

  assert.throws(() => event.query(), isCaptureError('event.query()', stream), 'an event last recorded in a capture stays unusable');
  event.record(stream);
  await event.synchronize();
  assert.equal(event.query(), true);
  assert.throws(() => stream.endCapture(), isCaptureError('stream.endCapture()', stream));
});

test('a pool stream captured under a lease refuses synchronize() through its getStream() wrapper', gpu, async () => {
  await using pool = new StreamPool({ size: 1 });
  await pool.run(async (leased) => {
    const shared = pool.getStream(0);
    assert.equal(shared.id, leased.id);
    leased.beginCapture();
    await assert.rejects(shared.synchronize(), isCaptureError('stream.synchronize()', shared));
    leased.endCapture().destroy();
    await shared.synchronize();
  });
});

test('a worker sharing the pool gets CaptureError from query() and synchronize() of a stream captured here', gpu, async () => {
  await using pool = new StreamPool({ size: 1 });
  using lease = await pool.acquire();
  const stream = lease.stream;
  stream.beginCapture({ mode: 'relaxed' });
  try {
    const worker = startWorker(new URL('../../workers/graph-worker.js', import.meta.url), { shared: pool.share() });
    const reply = (await worker.next()) as { errors: unknown[] };
    const expect = (operation: string) => ({ name: 'CaptureError', code: 'ERR_STREAM_CAPTURING', operation, streamId: String(stream.id) });
    assert.deepEqual(reply.errors, [expect('stream.query()'), expect('stream.synchronize()')]);
    assert.equal(await worker.exit, 0);
    assert.equal(stream.capturing, true, "the worker's refused calls left the capture going");
  } finally {
    stream.endCapture().destroy();
  }
});

test('device-wide waits are refused while a capture is open, and the capture survives them; pool picks never query it', gpu, async () => {
  const { fillU32 } = await testKernels();
  await using pool = new StreamPool({ size: 4 });
  using lease = await pool.acquire();
  const stream = lease.stream;
  const buffer = DeviceBuffer.alloc(4 * N, { stream });
  await stream.synchronize();
  const device = stream.device;
  stream.beginCapture({ mode: 'relaxed' });
  let graph: Graph | undefined;
  try {
    fillU32.launch({ grid: N / 256, block: 256, stream }, buffer, 77, N);
    const refused = (error: unknown) => error instanceof CudaError && error.code === 'CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED';
    await assert.rejects(device.synchronize(), refused);
    assert.throws(() => device.synchronizeSync(), refused);
    // Picking a stream prefers idle ones: the capturing stream counts as busy without a query that would invalidate it.
    for (let i = 0; i < 8; i++) pool.getStream();
    fillU32.launch({ grid: N / 256, block: 256, stream }, buffer, 78, N);
  } finally {
    graph = stream.endCapture();
  }
  const exec = graph.instantiate();
  exec.launch(stream);
  const out = await buffer.toArray(Uint32Array, { stream });
  assert.equal(out[0], 78);
  assert.equal(out[N - 1], 78);
  await device.synchronize();
  exec.destroy();
  graph.destroy();
  buffer.free();
});

test('a managed free and a module unload wait while a capture is open on the device, then happen once it ends', gpu, async () => {
  const second = await Module.load(readFileSync(path.join(repositoryRoot, 'test', 'kernels', 'test-kernels.ptx'), 'utf8'));
  using stream = Stream.create({ nonBlocking: true });
  using buffer = DeviceBuffer.alloc(64, { stream });
  await stream.synchronize();
  const start = cuda.liveObjects();
  const managed = ManagedBuffer.alloc(1 << 20);
  assert.equal(cuda.liveObjects().managedBytes, start.managedBytes + (1 << 20));
  stream.beginCapture({ mode: 'relaxed' });
  let graph: Graph | undefined;
  try {
    managed.free();
    second.unload();
    // Both would invalidate the capture (cuMemFree synchronizes the device; cuModuleUnload takes what captured work may
    // name): they stay counted while it is open.
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(cuda.liveObjects().managedBytes, start.managedBytes + (1 << 20), 'the managed memory is still held');
    assert.equal(cuda.liveObjects().modules, start.modules, 'the unloaded module is still loaded');
    stream.fill(buffer, 1);
  } finally {
    graph = stream.endCapture();
  }
  graph.destroy();
  for (let i = 0; i < 100 && (cuda.liveObjects().managedBytes !== start.managedBytes || cuda.liveObjects().modules !== start.modules - 1); i++)
    await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(cuda.liveObjects().managedBytes, start.managedBytes, 'freed once the capture ended');
  assert.equal(cuda.liveObjects().modules, start.modules - 1, 'unloaded once the capture ended');
});

test('a capture left open when its lease ends is discarded, and the stream goes back to the pool not capturing', gpu, async () => {
  await using pool = new StreamPool({ size: 1 });
  using buffer = DeviceBuffer.alloc(BYTES, { stream: pool.getStream(0) });
  await pool.run((stream) => {
    stream.beginCapture();
    stream.fill(buffer, 1);
  });
  const shared = pool.getStream(0);
  assert.equal(shared.capturing, false);
  await shared.synchronize();
  const nodes = await pool.run(async (stream) => {
    using graph = await Graph.capture(stream, (s) => s.fill(buffer, 2));
    return graph.nodeCount;
  });
  assert.equal(nodes, 1);
});

test('a capture function that throws ends the capture, destroys the partial graph and rethrows its error', gpu, async () => {
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(BYTES, { stream });
  const thrown = new Error('task failed');
  await assert.rejects(
    Graph.capture(stream, (s) => {
      s.fill(buffer, 1);
      throw thrown;
    }),
    (error) => error === thrown,
  );
  assert.equal(stream.capturing, false);
  await assert.rejects(
    Graph.capture(stream, async (s) => {
      await null;
      s.fill(buffer, 2);
      throw thrown;
    }),
    (error) => error === thrown,
  );
  assert.equal(stream.capturing, false);
  await stream.synchronize();
  using graph = await Graph.capture(stream, (s) => s.fill(buffer, 3));
  assert.equal(graph.nodeCount, 1);
});

test('a graph keeps its device buffer and pinned memory alive after they are dropped and collected', gpu, async () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  assert.ok(gc, 'the test runner passes --expose-gc');
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  const before = cuda.liveObjects().deviceBytes;
  let output!: Uint32Array;
  let exec!: GraphExec;
  await (async () => {
    const buffer = DeviceBuffer.alloc(BYTES, { stream });
    const pinned = PinnedBuffer.alloc(BYTES);
    output = pinned.view(Uint32Array);
    const graph = await Graph.capture(stream, () => {
      fillU32.launch({ grid: Math.ceil(N / 256), block: 256, stream }, buffer, 77, N);
      stream.copy(pinned, buffer);
    });
    exec = graph.instantiate();
    graph.destroy();
  })();
  flushNursery(); // forgotten objects become collectable now, not at the nursery's next flush
  for (let i = 0; i < 10; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(cuda.liveObjects().deviceBytes, before + BYTES, 'the executable holds the buffer');
  exec.launch(stream);
  await stream.synchronize();
  assert.deepEqual(output, new Uint32Array(N).fill(77));

  exec.destroy();
  for (let i = 0; i < 40 && cuda.liveObjects().deviceBytes > before; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(cuda.liveObjects().deviceBytes, before, 'destroy() lets the buffer go');
});

test('a launch after a buffer of the graph was freed throws DestroyedError instead of running', gpu, async () => {
  using stream = Stream.create();
  const buffer = DeviceBuffer.alloc(BYTES, { stream });
  using graph = await Graph.capture(stream, (s) => s.fill(buffer, 4));
  using exec = graph.instantiate();
  exec.launch(stream);
  buffer.free();
  assert.throws(() => exec.launch(stream), { name: 'DestroyedError', message: /GraphExec.launch\(\).*a DeviceBuffer it uses was freed/ });
  await stream.synchronize();
  exec.destroy();
  assert.throws(() => exec.launch(stream), (error) => error instanceof DestroyedError && error.resource === 'GraphExec');
});

test('update() applies a graph of the same topology in place and re-instantiates for another topology', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(BYTES, { stream });
  using out = PinnedBuffer.alloc(BYTES);
  const grid = Math.ceil(N / 256);
  const task = (value: number) => (s: Stream) => {
    fillU32.launch({ grid, block: 256, stream: s }, buffer, value, N);
    s.copy(out, buffer);
  };
  using one = await Graph.capture(stream, task(1));
  using two = await Graph.capture(stream, task(2));
  using three = await Graph.capture(stream, (s) => {
    s.fill(buffer, 0);
    fillU32.launch({ grid, block: 256, stream: s }, buffer, 3, N / 4);
    s.copy(out, buffer);
  });
  using exec = one.instantiate();
  exec.launch(stream);
  await stream.synchronize();
  assert.deepEqual(out.view(Uint32Array), new Uint32Array(N).fill(1));

  assert.equal(exec.update(two), true, 'same topology: in place');
  exec.launch(stream);
  await stream.synchronize();
  assert.deepEqual(out.view(Uint32Array), new Uint32Array(N).fill(2));
  exec.setKernelArguments(one.kernelNodes()[0]!, buffer, 5, N);
  exec.launch(stream);
  await stream.synchronize();
  assert.deepEqual(out.view(Uint32Array), new Uint32Array(N).fill(5), 'nodes of the instantiated graph still name ours');

  assert.equal(exec.update(three), false, 'another topology: instantiated anew');
  exec.launch(stream);
  await stream.synchronize();
  assert.deepEqual(out.view(Uint32Array), new Uint32Array(N).fill(3, 0, N / 4));
  exec.setKernelArguments(three.kernelNodes()[0]!, buffer, 6, N / 2);
  exec.launch(stream);
  await stream.synchronize();
  assert.deepEqual(out.view(Uint32Array), new Uint32Array(N).fill(6, 0, N / 2));
});

test('cuda.liveObjects() counts a driver graph until its Graph and every GraphExec using it are destroyed', gpu, async () => {
  const { fillU32 } = await testKernels();
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(BYTES, { stream });
  const start = cuda.liveObjects();
  const counts = () => {
    const now = cuda.liveObjects();
    return { graphs: now.graphs - start.graphs, graphExecs: now.graphExecs - start.graphExecs };
  };
  const one = await Graph.capture(stream, (s) => fillU32.launch({ grid: N / 256, block: 256, stream: s }, buffer, 1, N));
  const two = await Graph.capture(stream, (s) => fillU32.launch({ grid: N / 256, block: 256, stream: s }, buffer, 2, N));
  assert.deepEqual(counts(), { graphs: 2, graphExecs: 0 });
  const exec = one.instantiate();
  assert.deepEqual(counts(), { graphs: 2, graphExecs: 1 });
  assert.equal(exec.update(two), true);
  one.destroy();
  two.destroy();
  assert.deepEqual(counts(), { graphs: 2, graphExecs: 1 }, 'the executable still holds both graphs');
  exec.launch(stream);
  exec.destroy();
  assert.deepEqual(counts(), { graphs: 0, graphExecs: 0 }, 'destroyed while its launch may still run');
  await stream.synchronize();
});

test('a module unloaded while graphs use its kernels stays loaded until they are destroyed; their use is refused, not a crash', gpu, async () => {
  // Instantiating a graph whose kernel's module was unloaded crashed inside the driver (SIGSEGV).
  const module = await Module.load(readFileSync(path.join(repositoryRoot, 'test', 'kernels', 'test-kernels.ptx'), 'utf8'));
  const fill = module.getFunction('fill_u32', ['ptr', 'u32', 'u32']);
  using stream = Stream.create();
  using buffer = DeviceBuffer.alloc(BYTES, { stream });
  const start = cuda.liveObjects().modules;
  const capture = (value: number) => Graph.capture(stream, (s) => fill.launch({ grid: N / 256, block: 256, stream: s }, buffer, value, N));
  const one = await capture(1);
  const two = await capture(2);
  const exec = one.instantiate();
  module.unload();
  assert.equal(cuda.liveObjects().modules, start, 'still loaded: the graphs hold it');
  const refused = (method: string) => (error: unknown) => {
    assert.ok(error instanceof DestroyedError, String(error));
    assert.equal(error.method, method);
    assert.match(error.message, /kernel "fill_u32", whose module was unloaded/);
    return true;
  };
  assert.throws(() => two.instantiate(), refused('instantiate'));
  assert.throws(() => exec.update(two), refused('update'));
  assert.throws(() => exec.launch(stream), DestroyedError);
  one.destroy();
  two.destroy();
  assert.equal(cuda.liveObjects().modules, start, 'the executable still holds it');
  exec.destroy();
  assert.equal(cuda.liveObjects().modules, start - 1, 'unloaded with the last graph');
});

test('beginCapture() on a shared getStream() stream is refused with a hint to lease; leases and owned streams capture', gpu, async () => {
  await using pool = new StreamPool({ size: 2 });
  const shared = pool.getStream();
  assert.throws(() => shared.beginCapture(), (error) => {
    assert.ok(isCaptureError('stream.beginCapture()', shared)(error));
    assert.match((error as Error).message, /pool\.getStream\(\).*lease a stream instead \(pool\.run\(\) or pool\.acquire\(\)\)/);
    return true;
  });
  assert.equal(shared.capturing, false);
  const nodes = await pool.run(async (leased) => {
    using graph = await Graph.capture(leased, () => undefined);
    return graph.nodeCount;
  });
  assert.equal(nodes, 0);
  const legacy = Stream.legacy();
  assert.throws(() => legacy.beginCapture(), isCaptureError('stream.beginCapture()', legacy));
  using owned = Stream.create();
  assert.throws(() => owned.beginCapture({ mode: 'local' as never }), { code: 'ERR_INVALID_ARG_VALUE', message: /"options.mode" must be 'global', 'thread-local' or 'relaxed'; received "local"/ });
  for (const mode of ['global', 'thread-local', 'relaxed'] as const) {
    owned.beginCapture({ mode });
    owned.endCapture().destroy();
  }
});

test('freeing a buffer that a capturing stream used is a CaptureError that changes nothing; after the capture the free works', gpu, async () => {
  using a = Stream.create();
  using b = Stream.create();
  const buffer = DeviceBuffer.alloc(64, { stream: a });
  a.fill(buffer, 7);
  b.waitStream(a);
  using pinned = PinnedBuffer.alloc(64);
  b.beginCapture();
  b.copy(pinned, buffer);
  for (const free of [() => buffer.free(), () => buffer.free({ stream: a })])
    assert.throws(free, (error: unknown) => error instanceof CaptureError && error.operation === 'DeviceBuffer.free()' && error.streamId === b.id);
  await assert.rejects(buffer[Symbol.asyncDispose](), (error: unknown) => error instanceof CaptureError && error.streamId === b.id);
  assert.equal(buffer.freed, false);
  const graph = b.endCapture();
  using exec = graph.instantiate();
  graph.destroy();
  exec.launch(b);
  await b.synchronize();
  assert.deepEqual(pinned.bytes, new Uint8Array(64).fill(7), 'the capture was not harmed');
  const before = cuda.liveObjects().deviceBytes;
  buffer.free();
  assert.equal(buffer.freed, true);
  assert.equal(cuda.liveObjects().deviceBytes, before - 64);
});
