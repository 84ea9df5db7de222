// Leases made lean (Note [lean leases] in packages/cuda-stream-pool/src/pool/pool-policy.ts), on the simulated driver: a stale lease or stream
// wrapper stays dead after its stream was leased again, a forgotten lease is still reclaimed, and run() keeps
// currentStream() scoped exactly while settling with fn's outcome however fn ends.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collectGarbage, needsCompiler, simulatedJson } from '../support/simulated-driver.js';

/** Describes what a call threw: the class, the resource for a DestroyedError, and the message. */
const describeThrow = `
  function thrown(fn) {
    try { fn(); return 'nothing'; } catch (e) { return [e.name, e.resource ?? '', e.message].join(' | '); }
  }`;

test('a stale lease and its stream throw DestroyedError after the stream was leased again; the new lease is unharmed', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, unknown>>(
    `${describeThrow}
     import { DeviceBuffer, StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 1 });
     const first = pool.tryAcquire();
     const stale = first.stream;
     first.release();
     const second = pool.tryAcquire(); // the one stream again
     const buffer = DeviceBuffer.alloc(64, { stream: second.stream });
     const out = {
       sameStream: second.stream.id === stale.id,
       sameWrapper: second.stream === stale,
       staleLease: thrown(() => first.stream),
       staleQuery: thrown(() => stale.query()),
       staleFill: thrown(() => stale.fill(buffer, 1)),
       staleDestroyed: stale.destroyed,
       firstReleased: first.released,
     };
     first.release(); // a second release of the old lease must not end the new one
     out.secondReleased = second.released;
     out.leasedAfterStaleRelease = pool.stats().leased;
     out.tryWhileHeld = pool.tryAcquire() === undefined ? 'none free' : 'a stream';
     second.stream.fill(buffer, 7);
     await second.stream.synchronize();
     out.newLeaseWorks = second.stream.query();
     buffer.free();
     second.release();
     out.leasedAtEnd = pool.stats().leased;
     pool.destroy();
     console.log(JSON.stringify(out));`,
  );
  assert.equal(result.sameStream, true);
  assert.equal(result.sameWrapper, false, 'each lease has a wrapper of its own');
  assert.equal(result.staleLease, 'DestroyedError | StreamLease | StreamLease.stream(): the StreamLease was released');
  assert.match(String(result.staleQuery), /^DestroyedError \| Stream \| .*StreamLease that was released/);
  assert.match(String(result.staleFill), /^DestroyedError \| Stream \| .*StreamLease that was released/);
  assert.equal(result.staleDestroyed, true);
  assert.equal(result.firstReleased, true);
  assert.equal(result.secondReleased, false);
  assert.equal(result.leasedAfterStaleRelease, 1);
  assert.equal(result.tryWhileHeld, 'none free');
  assert.equal(result.newLeaseWorks, true);
  assert.equal(result.leasedAtEnd, 0);
});

test('a lease whose stream is never read is counted and released as any other, and its stream is made on first read', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, unknown>>(
    `import { StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 2 });
     for (let i = 0; i < 1000; i++) pool.tryAcquire().release();
     const lease = pool.tryAcquire();
     const read = lease.stream;
     const out = { sameOnEveryRead: lease.stream === read, isPoolStream: pool.getStream(0).id === read.id || pool.getStream(1).id === read.id };
     lease.release();
     const stats = pool.stats();
     out.leaseCounts = stats.leaseCounts.reduce((a, b) => a + b, 0);
     out.leased = stats.leased;
     pool.destroy();
     console.log(JSON.stringify(out));`,
  );
  assert.deepEqual(result, { sameOnEveryRead: true, isPoolStream: true, leaseCounts: 1001, leased: 0 });
});

test('forgotten leases are reclaimed by the garbage collector, whether or not their stream was read; a reachable stream keeps its lease', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, unknown>>(
    `${collectGarbage}
     import { StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 3 });
     (() => {
       pool.tryAcquire();               // never read
       pool.tryAcquire().stream.query(); // read and used
     })();
     const kept = pool.tryAcquire().stream; // the lease is forgotten, its stream is not
     await new Promise((resolve) => setTimeout(resolve, 400)); // past PROMOTE_MS: the leases are tracked weakly
     await collectUntil(() => pool.stats().leasesReclaimed >= 2);
     const out = { reclaimed: pool.stats().leasesReclaimed, leased: pool.stats().leased, keptWorks: kept.query() };
     out.freeAgain = [pool.tryAcquire(), pool.tryAcquire()].every((lease) => lease !== undefined);
     pool.destroy();
     console.log(JSON.stringify(out));`,
  );
  assert.deepEqual(result, { reclaimed: 2, leased: 1, keptWorks: true, freeAgain: true });
});

test('currentStream() inside nested run() and withStream() is the innermost scope\'s stream, across awaits and concurrent runs', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, unknown>>(
    `import { currentStream, Stream, StreamPool, withStream } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 4 });
     const perThread = Stream.perThread();
     const own = Stream.create();
     const seen = [];
     const same = (a, b) => a === b;
     await pool.run(async (outer) => {
       seen.push(['outer', same(currentStream(), outer)]);
       await pool.run(async (inner) => {
         seen.push(['inner', same(currentStream(), inner) && inner !== outer]);
         await withStream(own, async () => {
           await null;
           seen.push(['withStream in inner', same(currentStream(), own)]);
         });
         await new Promise((resolve) => setTimeout(resolve, 1));
         seen.push(['inner after a timer', same(currentStream(), inner)]);
       });
       seen.push(['outer again', same(currentStream(), outer)]);
       const both = await Promise.all([0, 1].map(() => pool.run(async (mine) => {
         await new Promise((resolve) => setImmediate(resolve));
         return same(currentStream(), mine);
       })));
       seen.push(['concurrent runs', both.every(Boolean)]);
       seen.push(['outer after them', same(currentStream(), outer)]);
     });
     seen.push(['outside', same(currentStream(), perThread)]);
     own.destroy();
     pool.destroy();
     console.log(JSON.stringify(Object.fromEntries(seen)));`,
  );
  assert.deepEqual(result, {
    outer: true,
    inner: true,
    'withStream in inner': true,
    'inner after a timer': true,
    'outer again': true,
    'concurrent runs': true,
    'outer after them': true,
    outside: true,
  });
});

test('run() settles with fn\'s outcome however fn ends, releasing the lease each time; a callback that outlives run() sees its retired stream', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, unknown>>(
    `import { currentStream, StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 1 });
     const out = {};
     const error = new Error('thrown');
     out.value = await pool.run(() => 42);
     out.promise = await pool.run(async () => { await null; return 'awaited'; });
     out.thenable = await pool.run(() => ({ then(resolve) { resolve('thenable'); } }));
     out.syncThrowSameObject = await pool.run(() => { throw error; }).then(() => 'resolved', (e) => e === error);
     out.rejectSameObject = await pool.run(async () => { throw error; }).then(() => 'resolved', (e) => e === error);
     out.badFn = await pool.run(17).then(() => 'resolved', (e) => e.code);
     out.leasedAfterAll = pool.stats().leased;
     let later;
     await pool.run(() => { setTimeout(() => { later = currentStream(); }, 5); });
     await new Promise((resolve) => setTimeout(resolve, 30));
     out.laterDestroyed = later.destroyed;
     pool.destroy();
     out.afterDestroy = await pool.run(() => 1).then(() => 'resolved', (e) => e.name);
     console.log(JSON.stringify(out));`,
  );
  assert.deepEqual(result, {
    value: 42,
    promise: 'awaited',
    thenable: 'thenable',
    syncThrowSameObject: true,
    rejectSameObject: true,
    badFn: 'ERR_INVALID_ARG_TYPE',
    leasedAfterAll: 0,
    laterDestroyed: true,
    afterDestroy: 'DestroyedError',
  });
});
