// The stream pool on a GPU: real streams, leases checked with device-side %globaltimer stamps, workers sharing one
// pool, destroy under load, leases given back by dying workers. The policy itself is tested on the CPU in
// test/cpu/pool.test.ts. Run alone: node dist/test/support/run-tests.js --gpu pool-gpu
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cuda, currentStream, DestroyedError, Device, Event, Stream, StreamPool, type SharedStreamPool } from 'cuda-stream-pool';
import { runChild } from '../../support/child.js';
import { startWorker } from '../../support/worker.js';
import { gpu, MS, overlaps, testKernels } from '../../support/gpu.js';
import { Stamps } from '../../support/stamps.js';

const workerUrl = new URL('../../workers/pool-gpu-worker.js', import.meta.url);

const start = (data: Record<string, unknown>) => startWorker(workerUrl, data);

interface Lease {
  id: bigint;
  host: [bigint, bigint];
  device: [bigint, bigint];
}

/** Checks what "leases never alias" means on the device: leases of one stream never overlap in time (host clock,
 * shared by all threads), each kernel ran its 20 ms, and kernels on different streams did overlap (the pool gives
 * real concurrency, so the test could have caught aliasing). */
function checkLeases(leases: Lease[], streamIds: Set<bigint>): void {
  for (const lease of leases) {
    assert.ok(streamIds.has(lease.id), 'every lease is on a pool stream');
    assert.ok(lease.device[1] - lease.device[0] >= 20n * MS, 'the kernel spun for 20 ms');
  }
  let concurrent = 0;
  for (let i = 0; i < leases.length; i++) {
    for (let j = i + 1; j < leases.length; j++) {
      const a = leases[i]!;
      const b = leases[j]!;
      if (a.id === b.id) {
        assert.equal(overlaps(a.host, b.host), false, `two leases held stream ${a.id} at once`);
        assert.equal(overlaps(a.device, b.device), false, `two kernels ran on stream ${a.id} at once`);
      } else if (overlaps(a.device, b.device)) concurrent++;
    }
  }
  assert.ok(concurrent > 0, 'kernels on different pool streams overlapped on the device');
}

test('getStream() gives distinct streams (distinct ids) for the first size calls, then wraps to the first', gpu, () => {
  using pool = new StreamPool({ size: 8 });
  const first = Array.from({ length: 8 }, () => pool.getStream());
  assert.equal(new Set(first.map((s) => s.id)).size, 8);
  assert.equal(new Set(first.map((s) => s.handle)).size, 8);
  const again = Array.from({ length: 8 }, () => pool.getStream());
  assert.deepEqual(again.map((s) => s.id), first.map((s) => s.id));
  assert.equal(again[0], first[0], 'the same object');
  assert.equal(pool.getStream(13), first[5]);
  const stats = pool.stats();
  assert.deepEqual(stats.handOuts, [2, 2, 2, 2, 2, 3, 2, 2]);
  assert.equal(stats.size, 8);
  assert.equal(stats.device, 0);
  assert.equal(stats.maxConnections, Number(process.env.CUDA_DEVICE_MAX_CONNECTIONS ?? 8));
});

test('pool streams are non-blocking unless nonBlocking is false, as cuStreamGetFlags reports', gpu, () => {
  using plain = new StreamPool({ size: 2 });
  assert.equal(plain.nonBlocking, true);
  for (let i = 0; i < 2; i++) assert.equal(plain.getStream(i).nonBlocking, true);
  const { greatest } = Device.get(0).streamPriorityRange;
  using blocking = new StreamPool({ size: 2, nonBlocking: false, priority: greatest - 100 });
  assert.equal(blocking.nonBlocking, false);
  assert.equal(blocking.priority, greatest, 'clamped to the greatest priority, as cuStreamGetPriority reports');
  for (let i = 0; i < 2; i++) {
    assert.equal(blocking.getStream(i).nonBlocking, false);
    assert.equal(blocking.getStream(i).priority, greatest);
  }
});

test('a pool creates size streams up front and destroy() destroys every one of them', gpu, () => {
  const before = cuda.liveObjects().streams;
  const pool = new StreamPool({ size: 16 });
  assert.equal(cuda.liveObjects().streams, before + 16);
  for (let i = 0; i < 100; i++) pool.getStream();
  assert.equal(cuda.liveObjects().streams, before + 16, 'getStream() creates nothing');
  pool.destroy();
  assert.equal(cuda.liveObjects().streams, before);
});

test('run() makes the lease\'s stream currentStream(), so a launch without a stream lands on it', gpu, async () => {
  using pool = new StreamPool({ size: 2 });
  const { spin } = await testKernels();
  await pool.run(async (stream) => {
    assert.equal(currentStream(), stream);
    spin.launch({ grid: 1, block: 1 }, 30n * MS, 0n);
    assert.equal(stream.query(), false, 'the kernel is queued on the leased stream');
    await stream.synchronize();
    assert.equal(currentStream(), stream, 'across awaits');
  });
});

test('a lease\'s stream throws DestroyedError after release while the pool\'s stream lives on', gpu, async () => {
  using pool = new StreamPool({ size: 1 });
  const lease = await pool.acquire();
  const leased = lease.stream;
  assert.equal(leased.id, pool.getStream(0).id);
  lease.release();
  assert.throws(() => leased.query(), (e) => e instanceof DestroyedError && e.resource === 'Stream' && /StreamLease that was released/.test(e.message));
  assert.throws(() => lease.stream, (e) => e instanceof DestroyedError && e.resource === 'StreamLease');
  assert.equal(pool.getStream(0).query(), true);
});

test('destroy() on a single pool stream is a TypeError; pool streams die with their pool', gpu, () => {
  using pool = new StreamPool({ size: 1 });
  assert.throws(() => pool.getStream().destroy(), { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE', message: /belongs to a StreamPool/ });
  assert.equal(pool.getStream().query(), true);
});

test('leases never alias: 2 × size tasks each lease a stream and spin 20 ms, stamped on the device', gpu, async () => {
  const size = 4;
  using pool = new StreamPool({ size });
  const setup = Stream.create();
  const stamps = new Stamps(2 * size, setup);
  await setup.synchronize();
  const held = new Set<bigint>();
  const results = await Promise.all(
    Array.from({ length: 2 * size }, (_, task) =>
      pool.run(async (stream) => {
        const start = process.hrtime.bigint();
        assert.equal(held.has(stream.id), false, 'no other lease holds this stream');
        held.add(stream.id);
        await stamps.spin(stream, 20n * MS, task);
        await stream.synchronize();
        held.delete(stream.id);
        return { task, id: stream.id, host: [start, process.hrtime.bigint()] as [bigint, bigint] };
      }),
    ),
  );
  const device = await stamps.read(setup);
  stamps.free();
  await setup.synchronize();
  setup.destroy();
  const ids = new Set(Array.from({ length: size }, (_, i) => pool.getStream(i).id));
  checkLeases(results.map((r) => ({ id: r.id, host: r.host, device: device[r.task]! })), ids);
  assert.equal(pool.stats().leased, 0);
  assert.equal(pool.stats().leaseCounts.reduce((a, b) => a + b, 0), 2 * size);
});

test('leases never alias across 4 workers sharing one pool, stamped on the device', gpu, async () => {
  const size = 4;
  using pool = new StreamPool({ size });
  const shared = pool.share();
  assert.deepEqual(structuredClone(shared), shared);
  const workers = Array.from({ length: 4 }, () => start({ shared, mode: 'lease-spin', tasks: 2 }));
  const reports = (await Promise.all(workers.map((w) => w.next()))) as Array<{ records: Array<{ id: string; host: string[]; device: string[] }> }>;
  assert.deepEqual(await Promise.all(workers.map((w) => w.exit)), [0, 0, 0, 0]);
  const leases = reports.flatMap((r) =>
    r.records.map((x) => ({ id: BigInt(x.id), host: x.host.map(BigInt) as [bigint, bigint], device: x.device.map(BigInt) as [bigint, bigint] })),
  );
  assert.equal(leases.length, 2 * size);
  const ids = new Set(Array.from({ length: size }, (_, i) => pool.getStream(i).id));
  checkLeases(leases, ids);
  assert.equal(pool.stats().leased, 0, 'every lease came back');
  assert.equal(pool.stats().leaseCounts.reduce((a, b) => a + b, 0), 2 * size, 'counted in the shared stats');
});

test('stress: 8 workers × 10,000 acquire/release never see two holders; destroy() gives every stream back', { ...gpu, timeout: 180_000 }, async () => {
  const before = cuda.liveObjects().streams;
  const size = 4;
  const pool = new StreamPool({ size });
  const marks = new SharedArrayBuffer(4 * size);
  const workers = Array.from({ length: 8 }, () => start({ shared: pool.share(), mode: 'stress', marks, iterations: 10_000, tasks: 2 }));
  const results = (await Promise.all(workers.map((w) => w.next()))) as Array<{ violations: number; leases: number }>;
  assert.deepEqual(await Promise.all(workers.map((w) => w.exit)), [0, 0, 0, 0, 0, 0, 0, 0]);
  assert.equal(results.reduce((n, r) => n + r.violations, 0), 0, 'never two holders at once');
  assert.equal(results.reduce((n, r) => n + r.leases, 0), 80_000);
  const stats = pool.stats();
  assert.equal(stats.leased, 0);
  assert.equal(stats.waiters, 0);
  assert.equal(stats.leaseCounts.reduce((a, b) => a + b, 0), 80_000);
  pool.destroy();
  assert.equal(cuda.liveObjects().streams, before);
});

test('destroy() while workers call getStream() and acquire(): they get DestroyedError and the process lives', { ...gpu, timeout: 60_000 }, async () => {
  const before = cuda.liveObjects().streams;
  const pool = new StreamPool({ size: 2 });
  const workers = Array.from({ length: 4 }, () => start({ shared: pool.share(), mode: 'until-destroyed' }));
  for (const w of workers) assert.equal(await w.next(), 'running');
  pool.destroy();
  const reports = (await Promise.all(workers.map((w) => w.next()))) as Array<{ errors: Array<{ name: string; resource: string; method: string; message: string }> }>;
  assert.deepEqual(await Promise.all(workers.map((w) => w.exit)), [0, 0, 0, 0]);
  const errors = reports.flatMap((r) => r.errors);
  assert.equal(errors.length, 12, 'every loop of every worker ended with an error');
  for (const e of errors) {
    assert.equal(e.name, 'DestroyedError', e.message);
    assert.ok(e.resource === 'StreamPool' || e.resource === 'Stream' || e.resource === 'StreamLease', e.message);
  }
  assert.ok(errors.some((e) => e.resource === 'StreamPool'), 'the pool itself reported destroyed');
  assert.equal(cuda.liveObjects().streams, before);
  assert.throws(() => pool.getStream(), (e) => e instanceof DestroyedError && e.resource === 'StreamPool');
  assert.throws(() => StreamPool.attach(pool.share()), DestroyedError);
});

for (const mode of ['hold-exit', 'hold-stay'] as const) {
  const how = mode === 'hold-exit' ? 'exits' : 'is terminated';
  test(`a worker that ${how} while holding leases gives them back`, { ...gpu, timeout: 30_000 }, async () => {
    using pool = new StreamPool({ size: 2 });
    const w = start({ shared: pool.share(), mode, hold: 2 });
    const { held } = (await w.next()) as { held: string[] };
    assert.equal(new Set(held).size, 2);
    const waiting = pool.acquire();
    if (mode === 'hold-stay') {
      assert.equal(pool.tryAcquire(), undefined, 'both streams are leased by the worker');
      await w.worker.terminate();
    }
    await w.exit;
    const lease = await waiting;
    const other = pool.tryAcquire();
    assert.ok(other, 'both leases came back');
    assert.deepEqual(new Set([String(lease.stream.id), String(other.stream.id)]), new Set(held));
    lease.release();
    other.release();
    assert.equal(pool.stats().leased, 0);
  });
}

test('destroy() makes every method of the pool and of its streams throw DestroyedError', gpu, async () => {
  const pool = new StreamPool({ size: 2 });
  const stream = pool.getStream();
  const lease = pool.tryAcquire()!;
  const leased = lease.stream;
  const pending = pool.acquire();
  const other = pool.acquire();
  pool.destroy();
  pool.destroy();
  pool[Symbol.dispose]();
  const poolGone = (method: string) => (e: unknown) => e instanceof DestroyedError && e.resource === 'StreamPool' && e.method === method;
  await assert.rejects(other, poolGone('acquire'));
  void pending.then((l) => l.release(), () => {});
  assert.throws(() => pool.getStream(), poolGone('getStream'));
  assert.throws(() => pool.getStream(1), poolGone('getStream'));
  assert.throws(() => pool.tryAcquire(), poolGone('tryAcquire'));
  assert.throws(() => pool.stats(), poolGone('stats'));
  assert.throws(() => pool.share(), poolGone('share'));
  await assert.rejects(pool.acquire(), poolGone('acquire'));
  await assert.rejects(pool.run(() => 1), poolGone('run'));
  await pool.close();
  assert.equal(pool.destroyed, true);
  assert.equal(lease.released, true);
  for (const s of [stream, leased]) {
    assert.throws(() => s.query(), (e) => e instanceof DestroyedError && e.resource === 'Stream');
    assert.throws(() => s.recordEvent(), (e) => e instanceof DestroyedError && e.resource === 'Stream');
    await assert.rejects(s.synchronize(), (e) => e instanceof DestroyedError && e.resource === 'Stream');
  }
  stream.destroy(); // retired already: nothing to do, no TypeError
});

test('close() waits for outstanding leases, then for queued work, then destroys', gpu, async () => {
  const before = cuda.liveObjects().streams;
  const pool = new StreamPool({ size: 1 });
  const { spin } = await testKernels();
  const lease = await pool.acquire();
  const waiter = pool.acquire();
  spin.launch({ grid: 1, block: 1, stream: lease.stream }, 50n * MS, 0n);
  const done = Event.create();
  done.record(lease.stream);
  let closed = false;
  const closing = pool.close().then(() => (closed = true));
  await assert.rejects(waiter, (e) => e instanceof DestroyedError && /is closing/.test(e.message));
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(closed, false, 'a lease is still out');
  assert.equal(pool.getStream(0).id > 0n, true, 'getStream() still works while closing');
  lease.release();
  await closing;
  assert.equal(done.query(), true, 'the queued kernel finished before the pool was destroyed');
  done.destroy();
  assert.equal(cuda.liveObjects().streams, before);
});

test('StreamPool.default() is one pool per device for every thread; destroy() only detaches this thread', gpu, async () => {
  const pool = StreamPool.default();
  assert.equal(StreamPool.default(0), pool);
  assert.equal(pool.size, Number(process.env.CUDA_STREAM_POOL_SIZE || 32));
  const ids = Array.from({ length: pool.size }, (_, i) => String(pool.getStream(i).id));
  const w = start({ mode: 'default' });
  assert.deepEqual(await w.next(), { size: pool.size, ids });
  assert.equal(await w.exit, 0);
  const live = cuda.liveObjects().streams;
  pool.destroy();
  assert.equal(pool.destroyed, true);
  assert.equal(cuda.liveObjects().streams, live, 'the process owns the default pool; its streams live on');
  const again = StreamPool.default();
  assert.notEqual(again, pool);
  assert.equal(String(again.getStream(0).id), ids[0]);
  assert.equal(again.getStream(0).query(), true);
});

test('CUDA_STREAM_POOL_SIZE sizes the default pool', gpu, async () => {
  const child = await runChild(
    `import { StreamPool } from 'cuda-stream-pool';
     const pool = StreamPool.default();
     console.log(pool.size, new Set(Array.from({ length: pool.size }, (_, i) => pool.getStream(i).id)).size);`,
    { CUDA_STREAM_POOL_SIZE: '5' },
  );
  assert.equal(child.code, 0, child.stderr);
  assert.equal(child.signal, null);
  assert.equal(child.stdout.trim(), '5 5');
});

test('a pool shared with a worker and attached twice in one thread gives one object per thread', gpu, async () => {
  using pool = new StreamPool({ size: 3 });
  const shared: SharedStreamPool = pool.share();
  assert.equal(StreamPool.attach(shared), pool, 'the creating thread gets the creating object');
  const child = await runChild(
    `import { StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 3 });
     const a = StreamPool.attach(pool.share());
     console.log(a === pool, pool.getStream().id === pool.getStream(0).id);
     pool.destroy();`,
  );
  assert.equal(child.code, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'true true');
});
