// The stream pool's policy, tested on the CPU (CI has no GPU): the policy runs over fake streams, in one thread
// and across worker threads over the native shared words. GPU behaviour is in test/gpu/pool/pool-gpu.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { currentStream, DestroyedError, Stream, StreamPool } from 'cuda-stream-pool';
import { native } from '#library/binding/binding.js';
import { maxConnectionsFromEnvironment, poolSizeFromEnvironment } from '#library/pool/pool.js';
import { startWorker } from '../support/worker.js';
import { BACKSTOP_MS, PROMOTE_MS } from '#library/pool/pool-policy.js';
import type { StreamLease } from '#library/pool/stream-lease.js';
import { ATTACHED_ENVS, CLOSING, DESTROYED, NEXT, OPEN, poolLayout, STATE } from '#library/pool/pool-words.js';
import { enterScope } from '#library/stream/scope.js';
import { fake, rig, runPoolModel, shared, sibling, state, streamIndexOf, tick, type Fake, type ModelStep } from '../support/pool-fakes.js';
import { runChild } from '../support/child.js';

// ---- hand-out ----

test('getStream() hands out streams round-robin from index 0 and returns to the first after size calls', () => {
  const { core, poolStreams } = rig(5);
  const got = Array.from({ length: 12 }, () => core.getStream());
  assert.deepEqual(got.map((s) => s.streamIndex), [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]);
  assert.equal(got[0], poolStreams.streams[0]);
  assert.equal(got[5], got[0]);
});

test('getStream() walks one sequence for every handle that shares the words', () => {
  const a = rig(4, 1);
  const b = sibling(a, 2);
  const got = [a, b, b, a, b, a, a].map((r) => r.core.getStream().streamIndex);
  assert.deepEqual(got, [0, 1, 2, 3, 0, 1, 2]);
});

test('getStream() keeps its order when the shared counter winds back near 2**31', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 1024 }), fc.integer({ min: 0, max: 40 }), fc.integer({ min: 1, max: 80 }), (size, before, calls) => {
      const { core, words } = rig(size);
      const limit = size * Math.floor(2 ** 31 / size);
      const u32 = new Uint32Array(words.buffer);
      u32[NEXT] = limit - before;
      const start = (limit - before) % size;
      for (let i = 0; i < calls; i++) assert.equal(core.getStream().streamIndex, (start + i) % size);
      if (calls > before) assert.ok(u32[NEXT]! < limit, 'the counter wound back');
      const stats = core.counters();
      assert.equal(stats.handOuts.reduce((a, b) => a + b, 0), limit - before + calls);
    }),
    { numRuns: 200 },
  );
});

test('getStream(index) returns the stream at index % size, the same one on every call', () => {
  const { core, poolStreams } = rig(6);
  for (const index of [0, 5, 6, 13, Number.MAX_SAFE_INTEGER]) {
    assert.equal(core.getStream(index), poolStreams.streams[index % 6]);
    assert.equal(core.getStream(index), core.getStream(index));
  }
  assert.equal(core.getStream().streamIndex, 0, 'getStream(index) does not move the round-robin sequence');
});

test('getStream(index) rejects a non-number with ERR_INVALID_ARG_TYPE naming "index"', () => {
  const { core } = rig(4);
  assert.throws(() => core.getStream('1' as unknown as number), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_TYPE',
    message: /^"index" must be an integer; received "1" \(string\)\.$/,
  });
  assert.throws(() => core.getStream(1n as unknown as number), { code: 'ERR_INVALID_ARG_TYPE', message: /Pass Number\(value\)/ });
});

test('getStream(index) rejects negative, fractional and unsafe numbers with ERR_OUT_OF_RANGE', () => {
  const { core } = rig(4);
  for (const bad of [-1, 1.5, NaN, Infinity, 2 ** 53]) {
    assert.throws(() => core.getStream(bad), {
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: new RegExp(`^"index" must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}; received ${String(bad)} \\(number\\)\\.$`),
    });
  }
});

test('stats counters count hand-outs per stream, leases per stream, streams leased and waiters', async () => {
  const { core } = rig(3);
  for (let i = 0; i < 7; i++) core.getStream();
  core.getStream(4);
  const a = core.tryAcquire()!;
  const b = core.tryAcquire()!;
  const c = core.tryAcquire()!;
  const waiting = core.acquire();
  let stats = core.counters();
  assert.deepEqual(stats.handOuts, [3, 3, 2]);
  assert.deepEqual(stats.leaseCounts, [1, 1, 1]);
  assert.equal(stats.leased, 3);
  assert.equal(stats.waiters, 1);
  a.release();
  const d = await waiting;
  stats = core.counters();
  assert.equal(stats.waiters, 0);
  assert.equal(stats.leaseCounts[streamIndexOf(d)], 2);
  for (const lease of [b, c, d]) lease.release();
  assert.equal(core.counters().leased, 0);
});

// ---- leases ----

test('tryAcquire() leases each stream once, then returns undefined until one is released', () => {
  const { core } = rig(3);
  const leases = [core.tryAcquire()!, core.tryAcquire()!, core.tryAcquire()!];
  assert.deepEqual(leases.map(streamIndexOf).sort(), [0, 1, 2]);
  assert.equal(core.tryAcquire(), undefined);
  const freed = streamIndexOf(leases[1]!);
  leases[1]!.release();
  const again = core.tryAcquire()!;
  assert.equal(streamIndexOf(again), freed);
});

test('a lease gives a stream wrapper of its own, retired when the lease ends', () => {
  const { core, poolStreams } = rig(2);
  const lease = core.tryAcquire()!;
  const view = lease.stream;
  assert.notEqual(view, poolStreams.streams[view.streamIndex], 'not the shared stream');
  assert.equal(view.retired, undefined);
  lease.release();
  assert.equal(view.retired, 'belongs to a StreamLease that was released');
  assert.equal(poolStreams.streams[view.streamIndex]!.retired, undefined, 'the shared stream lives on');
});

test('release() twice does nothing the second time; lease.stream afterwards throws DestroyedError', () => {
  const { core } = rig(1);
  const lease = core.tryAcquire()!;
  assert.equal(lease.released, false);
  lease.release();
  const other = core.tryAcquire()!;
  lease.release();
  lease[Symbol.dispose]();
  assert.equal(lease.released, true);
  assert.equal(core.counters().leased, 1, 'the second release did not free the stream another lease holds');
  assert.equal(core.tryAcquire(), undefined);
  assert.throws(() => lease.stream, (error: unknown) => {
    assert.ok(error instanceof DestroyedError);
    assert.equal(error.resource, 'StreamLease');
    assert.equal(error.method, 'stream');
    assert.equal(error.message, 'StreamLease.stream(): the StreamLease was released');
    return true;
  });
  other.release();
});

test('leases are never aliased nor lost, whatever the order of acquires, releases, aborts and deaths (model-based)', async () => {
  const step = fc.record({
    kind: fc.constantFrom('acquire', 'try', 'release', 'abort', 'die', 'tick'),
    who: fc.integer({ min: 0, max: 2 }),
    pick: fc.nat(),
  }) as fc.Arbitrary<ModelStep>;
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(step, { maxLength: 60 }), (size, steps) => runPoolModel(size, steps, { check: () => {} })),
    { numRuns: 60 },
  );
});

test('a stream handed to a thread that stopped waiting and is gone is reclaimed by the next taker', () => {
  const { core, words } = rig(2, 1);
  const { leaseBase } = poolLayout(2);
  // What a hand-off racing a thread's exit can leave: stream 0 handed to environment 7, which has no entry.
  Atomics.store(words, leaseBase, -7);
  const first = core.tryAcquire();
  const second = core.tryAcquire();
  assert.deepEqual([first && streamIndexOf(first), second && streamIndexOf(second)].sort(), [0, 1]);
  assert.equal(words[leaseBase], 1, 'stream 0 is held by this thread now');
});

test('a stream handed to a thread still waiting is left to that thread', async () => {
  const a = rig(2, 1);
  const b = sibling(a, 7);
  const { leaseBase } = poolLayout(2);
  const lease = a.core.tryAcquire()!;
  const other = a.core.tryAcquire()!;
  const bWaits = b.core.acquire(); // registers environment 7 in the waiting table
  const streamIndex = streamIndexOf(other);
  other.release(); // handed to b: the word reads -7 until b claims it
  assert.equal(Atomics.load(a.words, leaseBase + streamIndex), -7);
  assert.equal(a.core.tryAcquire(), undefined, 'not reclaimed while 7 waits');
  assert.equal(streamIndexOf(await bWaits), streamIndex);
  lease.release();
});

test('close() returns when a stream was left handed to a thread that is gone', async () => {
  const { core, words } = rig(2, 1);
  Atomics.store(words, poolLayout(2).leaseBase + 1, -7);
  let destroyed = false;
  const closed = core.closeEverywhere(() => (destroyed = true), () => false);
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 2000).unref());
  const outcome = await Promise.race([closed.then(() => 'closed' as const), timeout]);
  core.destroyEverywhere(() => {}); // ends a close() still waiting, so a failure does not hang the file
  assert.equal(outcome, 'closed');
  assert.equal(destroyed, true);
});

test('acquire() waits in FIFO order within a thread while every stream is leased', async () => {
  const { core } = rig(1);
  const first = core.tryAcquire()!;
  const order: string[] = [];
  const waits = ['a', 'b', 'c', 'd'].map((name) => core.acquire().then((lease) => (order.push(name), lease)));
  assert.equal(core.counters().waiters, 4);
  first.release();
  for (let i = 0; i < 4; i++) {
    const lease = await waits[i]!;
    assert.deepEqual(order, ['a', 'b', 'c', 'd'].slice(0, i + 1));
    lease.release();
  }
  assert.equal(core.counters().waiters, 0);
});

test('tryAcquire() does not overtake this thread\'s waiters', async () => {
  const { core } = rig(1);
  const first = core.tryAcquire()!;
  const waiting = core.acquire();
  first.release(); // handed to the waiter at once
  assert.equal(core.tryAcquire(), undefined);
  (await waiting).release();
});

test('acquire() rejects with the signal\'s reason when it aborts, and the next waiter is served instead', async () => {
  const { core } = rig(1);
  const first = core.tryAcquire()!;
  const controller = new AbortController();
  const reason = new Error('gave up');
  const aborted = core.acquire({ signal: controller.signal });
  const next = core.acquire();
  controller.abort(reason);
  await assert.rejects(aborted, (error) => error === reason);
  assert.equal(core.counters().waiters, 1);
  first.release();
  const lease = await next;
  assert.equal(streamIndexOf(lease), 0);
  lease.release();
});

test('acquire() with an already aborted signal rejects at once and takes nothing', async () => {
  const { core } = rig(2);
  const reason = new Error('already');
  await assert.rejects(core.acquire({ signal: AbortSignal.abort(reason) }), (error) => error === reason);
  assert.equal(core.counters().leased, 0);
});

test('an abort after the lease was granted changes nothing', async () => {
  const { core } = rig(1);
  const controller = new AbortController();
  const lease = await core.acquire({ signal: controller.signal });
  controller.abort();
  assert.equal(lease.released, false);
  assert.equal(core.counters().leased, 1);
  lease.release();
});

test('acquire() rejects bad options with Node\'s codes and a did-you-mean', async () => {
  const { core } = rig(1);
  await assert.rejects(core.acquire({ signa: AbortSignal.abort() } as never), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.signa" is not an acquire option; did you mean "signal"?',
  });
  await assert.rejects(core.acquire({ signal: 1 } as never), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_TYPE',
    message: '"options.signal" must be an AbortSignal; received 1 (number).',
  });
  await assert.rejects(core.acquire(7 as never), { code: 'ERR_INVALID_ARG_TYPE', message: /^"options" must be an object; received 7 \(number\)\.$/ });
});

test('among free streams a lease prefers one whose work is done', () => {
  const { core, poolStreams } = rig(4);
  for (let i = 0; i < 4; i++) core.getStream(); // shared hand-outs: their idleness is no longer known
  poolStreams.idle[0] = false;
  poolStreams.idle[1] = false;
  const lease = core.tryAcquire()!;
  assert.equal(streamIndexOf(lease), 2);
  lease.release();
  poolStreams.idle.fill(false);
  const busy = core.tryAcquire();
  assert.ok(busy, 'a busy stream is still leased when no free stream is idle');
  busy.release();
});

test('a stream known idle is leased without asking the driver until a used lease or getStream() may have queued work', () => {
  const { core, poolStreams } = rig(2);
  const take = (expected: number, used = false) => {
    const lease = core.tryAcquire()!;
    assert.equal(streamIndexOf(lease), expected);
    if (used) (lease.stream as Fake).used = true;
    lease.release();
  };
  take(0); // a new pool's streams are idle: no query
  take(1, true); // its wrapper was used: work may be queued
  take(0);
  assert.deepEqual(poolStreams.probes, []);
  take(1);
  assert.deepEqual(poolStreams.probes, [1], 'the used stream is asked once');
  take(0);
  take(1);
  assert.deepEqual(poolStreams.probes, [1], 'found idle, it is known idle again');
  core.getStream(); // hands out stream 0 round-robin
  take(0);
  take(1);
  assert.deepEqual(poolStreams.probes, [1, 0], 'only the stream getStream() handed out is asked again');
  core.getStream(1);
  take(0);
  take(1);
  assert.deepEqual(poolStreams.probes, [1, 0, 1], 'getStream(index) makes that stream unknown too');
  for (let i = 0; i < 2; i++) core.getStream();
  poolStreams.idle[0] = false;
  const lease = core.tryAcquire()!;
  assert.equal(streamIndexOf(lease), 1, 'a busy stream is passed over once its idleness is unknown');
  lease.release();
});

test('consecutive leases rotate through the streams', () => {
  const { core } = rig(3);
  const got = Array.from({ length: 6 }, () => {
    const lease = core.tryAcquire()!;
    const streamIndex = streamIndexOf(lease);
    lease.release();
    return streamIndex;
  });
  assert.deepEqual(got, [0, 1, 2, 0, 1, 2]);
});

// ---- across threads (several handles on one set of words in this thread) ----

test('a release in one thread hands the stream to a waiter of another thread', async () => {
  const a = rig(1, 21);
  const b = sibling(a, 22);
  const lease = a.core.tryAcquire()!;
  const waiting = b.core.acquire();
  assert.equal(await state(waiting), 'pending');
  lease.release();
  const got = await waiting;
  assert.equal(streamIndexOf(got), 0);
  assert.equal(a.core.tryAcquire(), undefined, 'the stream went to the waiter, not back to the free list');
  got.release();
});

test('waiting threads are served in rotation: a release goes to the thread whose turn it is, not back home', async () => {
  const a = rig(1, 31);
  const b = sibling(a, 32);
  const c = sibling(a, 33);
  const order: string[] = [];
  const record = (name: string) => (lease: StreamLease<Fake>) => (order.push(name), lease);
  const lease = a.core.tryAcquire()!;
  const bWaits = b.core.acquire().then(record('b'));
  const cWaits = c.core.acquire().then(record('c'));
  const aWaits = a.core.acquire().then(record('a'));
  lease.release(); // a has a waiter of its own, yet b and c waited first
  (await bWaits).release();
  (await cWaits).release();
  (await aWaits).release();
  assert.deepEqual(order, ['b', 'c', 'a']);
  assert.equal(a.core.counters().leased, 0);
});

test('a thread that releases and re-acquires in a loop does not starve a waiter of another thread', async () => {
  const a = rig(1, 41);
  const b = sibling(a, 42);
  let round = 0;
  let servedAt = -1;
  const bWaits = (async () => {
    await tick();
    const lease = await b.core.acquire();
    servedAt = round;
    lease.release();
  })();
  for (; round < 20; round++) {
    const lease = await a.core.acquire();
    await tick();
    lease.release();
  }
  await bWaits;
  assert.ok(servedAt >= 0 && servedAt <= 3, `b was served in round ${servedAt}`);
});

test('a stream handed to a thread whose waiter aborted meanwhile goes on to the next waiter', async () => {
  const a = rig(1, 51);
  const b = sibling(a, 52);
  const c = sibling(a, 53);
  const lease = a.core.tryAcquire()!;
  const controller = new AbortController();
  const bWaits = b.core.acquire({ signal: controller.signal });
  const cWaits = c.core.acquire();
  lease.release(); // handed to b (its turn), which has not claimed it yet
  controller.abort();
  await assert.rejects(bWaits);
  const got = await cWaits;
  assert.equal(streamIndexOf(got), 0);
  got.release();
  assert.equal(a.core.counters().leased, 0);
});

// ---- run() and scoping ----

test('run() leases a stream, runs fn with it, releases it and resolves with fn\'s value', async () => {
  const { core } = rig(2);
  let seen: Fake | undefined;
  const value = await core.run(async (stream) => {
    seen = stream;
    assert.equal(core.counters().leased, 1);
    return 42;
  });
  assert.equal(value, 42);
  assert.equal(core.counters().leased, 0);
  assert.equal(seen!.retired, 'belongs to a StreamLease that was released');
});

test('run() releases the lease when fn throws and rejects with the very same error object', async () => {
  const { core } = rig(1);
  const thrown = new Error('task failed');
  await assert.rejects(core.run(async () => {
    await tick();
    throw thrown;
  }), (error) => error === thrown);
  const syncThrown = new RangeError('at once');
  await assert.rejects(core.run(() => {
    throw syncThrown;
  }), (error) => error === syncThrown);
  assert.equal(core.counters().leased, 0);
  assert.ok(core.tryAcquire(), 'the stream is free again');
});

test('run() rejects a non-function fn with ERR_INVALID_ARG_TYPE and leases nothing', async () => {
  const { core } = rig(1);
  await assert.rejects(core.run('go' as never), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_TYPE',
    message: '"fn" must be a function; received "go" (string).',
  });
  assert.equal(core.counters().leased, 0);
});

test('run()\'s signal aborts only the wait for a lease, not fn once it runs', async () => {
  const { core } = rig(1);
  const holder = core.tryAcquire()!;
  const early = new AbortController();
  const waiting = core.run(() => 'never', { signal: early.signal });
  early.abort(new Error('stop waiting'));
  await assert.rejects(waiting, /stop waiting/);
  holder.release();
  const late = new AbortController();
  const result = await core.run(async () => {
    late.abort();
    await tick();
    return 'finished';
  }, { signal: late.signal });
  assert.equal(result, 'finished');
});

test('currentStream() inside run() is the lease\'s stream, across awaits', async () => {
  const { core } = rig(3);
  await core.run(async (stream) => {
    assert.equal(currentStream(), stream);
    await tick();
    await new Promise((resolve) => setTimeout(resolve, 1));
    assert.equal(currentStream(), stream);
  });
});

test('nested run() scopes see the inner stream, then the outer one again', async () => {
  const { core } = rig(3);
  await core.run(async (outer) => {
    await core.run(async (inner) => {
      assert.notEqual(inner.streamIndex, outer.streamIndex, 'a nested run holds a second lease');
      assert.equal(currentStream(), inner);
      await tick();
      assert.equal(currentStream(), inner);
    });
    assert.equal(currentStream(), outer);
  });
});

test('concurrent run() calls each see their own stream', async () => {
  const { core } = rig(4);
  const seen = await Promise.all(
    Array.from({ length: 12 }, (_, task) =>
      core.run(async (stream) => {
        for (let i = 0; i < 3; i++) {
          await new Promise((resolve) => setTimeout(resolve, (task * 7 + i) % 3));
          assert.equal(currentStream(), stream);
        }
        return stream.streamIndex;
      }),
    ),
  );
  assert.equal(seen.length, 12);
  assert.equal(core.counters().leased, 0);
});

test('a callback that outlives its run() sees a retired stream', async () => {
  const { core } = rig(1);
  let later: (() => Fake) | undefined;
  await core.run(() => {
    later = () => currentStream() as unknown as Fake;
  });
  const leftover = enterScope(core.getStream(0), () => later!());
  assert.equal(leftover.streamIndex, 0);
  let escaped: Fake | undefined;
  await core.run(async () => {
    setTimeout(() => (escaped = currentStream() as unknown as Fake), 5);
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(escaped!.retired, 'belongs to a StreamLease that was released');
});

// ---- destroy, close, detach ----

test('destroy everywhere rejects pending acquires in every thread; every later method throws DestroyedError', async () => {
  const a = rig(1, 61);
  const b = sibling(a, 62);
  const held = a.core.tryAcquire()!;
  const view = held.stream;
  const aWaits = a.core.acquire();
  const bWaits = b.core.acquire();
  let nativeDestroyed = 0;
  a.core.destroyEverywhere(() => nativeDestroyed++);
  a.core.destroyEverywhere(() => nativeDestroyed++);
  assert.equal(nativeDestroyed, 1, 'idempotent');
  const isPoolError = (method: string) => (error: unknown) =>
    error instanceof DestroyedError && error.resource === 'StreamPool' && error.method === method && /was destroyed/.test(error.message);
  await assert.rejects(aWaits, isPoolError('acquire'));
  await assert.rejects(bWaits, isPoolError('acquire'));
  assert.equal(held.released, true);
  assert.equal(view.retired, 'belongs to a StreamPool that was destroyed', 'the holder released nothing: the pool ended the lease');
  assert.equal(a.poolStreams.streams[0]!.retired, 'belongs to a StreamPool that was destroyed');
  for (const core of [a.core, b.core]) {
    assert.throws(() => core.getStream(), isPoolError('getStream'));
    assert.throws(() => core.getStream(0), isPoolError('getStream'));
    assert.throws(() => core.tryAcquire(), isPoolError('tryAcquire'));
    assert.throws(() => core.counters(), isPoolError('stats'));
    assert.throws(() => core.check('share'), isPoolError('share'));
    await assert.rejects(core.acquire(), isPoolError('acquire'));
    await assert.rejects(core.run(() => 1), isPoolError('run'));
    assert.equal(core.destroyed, true);
  }
  assert.equal(b.poolStreams.streams[0]!.retired, 'belongs to a StreamPool that was destroyed');
});

test('close everywhere rejects pending acquires, waits for leases in every thread, then for queued work, then destroys', async () => {
  const events: string[] = [];
  const a = rig(2, 71, async (streamIndex) => {
    events.push(`drain ${streamIndex}`);
  });
  const b = sibling(a, 72);
  const aLease = a.core.tryAcquire()!;
  const bLease = b.core.tryAcquire()!;
  const bWaits = b.core.acquire();
  const closing = a.core.closeEverywhere(() => events.push('destroyed'), () => false);
  assert.equal(a.core.closeEverywhere(() => events.push('twice'), () => false), closing, 'the same promise');
  assert.equal(a.words[STATE], CLOSING);
  await assert.rejects(bWaits, (e) => e instanceof DestroyedError && /is closing/.test(e.message));
  await assert.rejects(a.core.acquire(), /is closing/);
  assert.throws(() => b.core.tryAcquire(), /is closing/);
  assert.equal(a.core.getStream().streamIndex, 0, 'getStream() still works while closing');
  assert.equal(await state(closing), 'pending');
  aLease.release();
  assert.equal(await state(closing), 'pending');
  events.push('last lease back');
  bLease.release();
  await closing;
  assert.deepEqual(events, ['last lease back', 'drain 0', 'drain 1', 'destroyed']);
  assert.equal(a.words[STATE], DESTROYED);
});

test('close everywhere destroys and rejects with a drain\'s error unless it is to be swallowed', async () => {
  const failure = new Error('work failed');
  const loud = rig(1, 81, async () => {
    throw failure;
  });
  let destroyed = false;
  await assert.rejects(loud.core.closeEverywhere(() => (destroyed = true), () => false), (e) => e === failure);
  assert.equal(destroyed, true);
  const quiet = rig(1, 82, async () => {
    throw failure;
  });
  await quiet.core.closeEverywhere(() => {}, (e) => e === failure);
});

test('detaching one thread gives its leases to the others, rejects its waiters and leaves the pool to the rest', async () => {
  const a = rig(1, 91);
  const b = sibling(a, 92);
  const bLease = b.core.tryAcquire()!;
  const bWaits = b.core.acquire();
  const aWaits = a.core.acquire();
  b.core.detach('was detached from this thread by destroy() or close()');
  await assert.rejects(bWaits, (e) => e instanceof DestroyedError && /detached from this thread/.test(e.message));
  assert.equal(bLease.released, true);
  const got = await aWaits;
  assert.equal(streamIndexOf(got), 0);
  assert.throws(() => b.core.getStream(), /StreamPool.getStream\(\): the StreamPool was detached/);
  assert.equal(a.core.getStream(0).streamIndex, 0, 'the pool goes on');
  got.release();
});

test('closing one thread\'s handle waits for its own leases, then detaches it', async () => {
  const a = rig(1, 101);
  const b = sibling(a, 102);
  const lease = b.core.tryAcquire()!;
  const bWaits = b.core.acquire();
  const closing = b.core.closeHere('was detached from this thread by destroy() or close()');
  await assert.rejects(bWaits, /is closing/);
  assert.equal(await state(closing), 'pending');
  lease.release();
  await closing;
  assert.equal(b.core.destroyed, true);
  assert.equal(a.core.destroyed, false);
  assert.ok(a.core.tryAcquire());
});

// ---- across worker threads, over the native shared words ----

const workerUrl = new URL('../workers/pool-cpu-worker.js', import.meta.url);

const start = (data: Record<string, unknown>) => startWorker(workerUrl, data);

test('the shared words are one SharedArrayBuffer for every thread: getStream() walks one sequence across workers', async () => {
  const pool = shared(5);
  try {
    const workers = Array.from({ length: 4 }, () => start({ id: pool.description.id, mode: 'hand-out', iterations: 250 }));
    const got = (await Promise.all(workers.map((w) => w.next()))) as Array<{ got: number[] }>;
    assert.deepEqual(await Promise.all(workers.map((w) => w.exit)), [0, 0, 0, 0]);
    const all = got.flatMap((g) => g.got);
    assert.equal(all.length, 1000);
    const perStream = [0, 1, 2, 3, 4].map((streamIndex) => all.filter((s) => s === streamIndex).length);
    assert.deepEqual(perStream, [200, 200, 200, 200, 200], 'one counter: every stream handed out equally often');
    assert.deepEqual(pool.core.counters().handOuts, [200, 200, 200, 200, 200]);
    assert.equal(pool.core.getStream().streamIndex, 0, 'the sequence continues here');
  } finally {
    pool.destroy();
  }
});

test('leases never alias across 6 workers and this thread hammering 3 streams', async () => {
  const pool = shared(3);
  try {
    const marks = new SharedArrayBuffer(3 * 4);
    const workers = Array.from({ length: 6 }, () => start({ id: pool.description.id, mode: 'stress', marks, iterations: 3000, tasks: 2 }));
    // This thread takes part too.
    const mine = new Int32Array(marks);
    let violations = 0;
    for (let i = 0; i < 500; i++) {
      const lease = await pool.core.acquire();
      if (Atomics.add(mine, streamIndexOf(lease), 1) !== 0) violations++;
      await tick();
      if (Atomics.sub(mine, streamIndexOf(lease), 1) !== 1) violations++;
      lease.release();
    }
    const results = (await Promise.all(workers.map((w) => w.next()))) as Array<{ violations: number; leases: number }>;
    assert.deepEqual(await Promise.all(workers.map((w) => w.exit)), [0, 0, 0, 0, 0, 0]);
    assert.equal(violations + results.reduce((n, r) => n + r.violations, 0), 0, 'never two holders at once');
    assert.equal(results.reduce((n, r) => n + r.leases, 0), 6 * 3000);
    const stats = pool.core.counters();
    assert.equal(stats.leased, 0);
    assert.equal(stats.waiters, 0);
    assert.equal(stats.leaseCounts.reduce((a, b) => a + b, 0), 6 * 3000 + 500);
  } finally {
    pool.destroy();
  }
});

test('a release in this thread wakes a waiter in a worker', async () => {
  const pool = shared(1);
  try {
    const lease = pool.core.tryAcquire()!;
    const w = start({ id: pool.description.id, mode: 'wait' });
    assert.equal(await w.next(), 'waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(w.messages.length, 0, 'still waiting while the stream is leased here');
    lease.release();
    assert.deepEqual(await w.next(), { got: 0 });
    assert.equal(await w.exit, 0);
  } finally {
    pool.destroy();
  }
});

for (const mode of ['hold-exit', 'hold-stay'] as const) {
  const how = mode === 'hold-exit' ? 'exits' : 'is terminated';
  test(`a worker that ${how} while holding leases gives them back, and a waiter here gets one`, async () => {
    const pool = shared(2);
    try {
      const w = start({ id: pool.description.id, mode, hold: 2 });
      const held = (await w.next()) as { held: number[] };
      assert.deepEqual(held.held.sort(), [0, 1]);
      const waiting = pool.core.acquire();
      if (mode === 'hold-stay') {
        assert.equal(pool.core.tryAcquire(), undefined);
        assert.equal(await state(waiting), 'pending');
        await w.worker.terminate();
      }
      await w.exit;
      const lease = await waiting; // the worker's cleanup hook freed the words; the backstop timer finds them
      assert.ok(lease.stream.streamIndex === 0 || lease.stream.streamIndex === 1);
      const other = pool.core.tryAcquire();
      assert.ok(other, 'both came back');
      other.release();
      lease.release();
    } finally {
      pool.destroy();
    }
  });
}

test('destroy in this thread rejects an acquire pending in a worker with DestroyedError', async () => {
  const pool = shared(1);
  const lease = pool.core.tryAcquire()!;
  const w = start({ id: pool.description.id, mode: 'wait-destroyed' });
  assert.equal(await w.next(), 'waiting');
  pool.destroy();
  assert.deepEqual(await w.next(), {
    settled: 'rejected',
    name: 'DestroyedError',
    resource: 'StreamPool',
    message: 'StreamPool.acquire(): the StreamPool was destroyed',
  });
  assert.equal(await w.exit, 0);
  assert.equal(lease.released, true);
  assert.throws(() => native.poolAttach(pool.description.id), (e) => e instanceof DestroyedError && e.resource === 'StreamPool');
});

test('a waiter finds a stream freed by a dead thread\'s cleanup (no notification) within its backstop', async () => {
  const pool = shared(1);
  try {
    const { leaseBase } = poolLayout(1);
    const words = new Int32Array(pool.description.memory);
    Atomics.store(words, leaseBase, 9); // held by environment 9, another thread
    const waiting = pool.core.acquire();
    const freed = performance.now();
    native.poolThreadExit(pool.description.handle, 9); // what 9's cleanup hook does when it dies
    const lease = await waiting;
    const waitedMs = performance.now() - freed;
    assert.ok(waitedMs <= BACKSTOP_MS + 200, `found after ${waitedMs.toFixed(1)} ms; the backstop is ${BACKSTOP_MS} ms`);
    lease.release();
  } finally {
    pool.destroy();
  }
});

test('workers terminated at random during thousands of hand-offs: no lease lost, none aliased, close() returns', async () => {
  const size = 2;
  const pool = shared(size);
  const marks = new Int32Array(new SharedArrayBuffer((size + 2) * 4)); // holders, then violations and leases
  const live = new Set<ReturnType<typeof start>>();
  const spawn = async () => {
    const w = start({ id: pool.description.id, mode: 'churn', marks: marks.buffer, tasks: 2 });
    live.add(w);
    await w.next(); // 'started'
  };
  const me = native.environmentId;
  let terminated = 0;
  try {
    for (let i = 0; i < 4; i++) await spawn();
    // This thread keeps taking part, so hand-offs cross threads in both directions.
    let stop = false;
    const mine = (async () => {
      while (!stop) {
        const lease = await pool.core.acquire();
        const streamIndex = streamIndexOf(lease);
        Atomics.store(marks, streamIndex, me);
        await tick();
        if (Atomics.compareExchange(marks, streamIndex, me, 0) !== me) Atomics.add(marks, size, 1);
        Atomics.add(marks, size + 1, 1);
        lease.release();
      }
    })();
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    while (terminated < 25 || Atomics.load(marks, size + 1) < 5000) {
      await new Promise((resolve) => setTimeout(resolve, 5 + random() * 20));
      const victims = [...live];
      const victim = victims[Math.floor(random() * victims.length)]!;
      live.delete(victim);
      await victim.worker.terminate(); // wherever it is: holding, waiting, or being handed a stream
      terminated++;
      await spawn();
    }
    stop = true;
    for (const w of live) await w.worker.terminate();
    live.clear();
    await mine;
    assert.equal(Atomics.load(marks, size), 0, 'never two holders at once');
    // Every stream comes back to this thread: none stayed with a dead thread.
    const leases = [await pool.core.acquire(), await pool.core.acquire()];
    assert.deepEqual(leases.map(streamIndexOf).sort(), [0, 1]);
    for (const lease of leases) lease.release();
    const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 2000).unref());
    const closed = pool.core.closeEverywhere(() => native.poolDestroy(pool.description.handle), () => false);
    assert.equal(await Promise.race([closed.then(() => 'closed' as const), timeout]), 'closed');
  } finally {
    for (const w of live) await w.worker.terminate();
    pool.destroy();
  }
});

// ---- the public StreamPool: options, environment ----

test('new StreamPool() rejects unknown option keys with ERR_INVALID_ARG_VALUE and a did-you-mean', () => {
  assert.throws(() => new StreamPool({ nonblocking: false } as never), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.nonblocking" is not a StreamPool option; did you mean "nonBlocking"?',
  });
  assert.throws(() => new StreamPool({ count: 4 } as never), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.count" is not a StreamPool option; the options are "device", "size", "priority", "nonBlocking", "memoryLimitBytes", "partition".',
  });
  assert.throws(() => new StreamPool(4 as never), { code: 'ERR_INVALID_ARG_TYPE', message: '"options" must be an object; received 4 (number).' });
  // Options are read through the prototype chain, so a misspelt key found there is refused as an own one is.
  const inherited = Object.create({ sise: 4 }) as object;
  assert.throws(() => new StreamPool(inherited as never), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: '"options.sise" is not a StreamPool option; did you mean "size"?',
  });
  // ... but an enumerable key that other code put on Object.prototype is nobody's misspelling here.
  Object.defineProperty(Object.prototype, 'polluted', { value: 1, enumerable: true, configurable: true, writable: true });
  try {
    assert.throws(() => new StreamPool({ sise: 4 } as never), { message: /"options.sise" is not a StreamPool option/ });
    assert.throws(() => new StreamPool({ size: 0, polluted: 2 } as never), { message: /"options.polluted" is not a StreamPool option/ });
    assert.throws(() => new StreamPool({ size: 0 }), { code: 'ERR_OUT_OF_RANGE', message: /^"options.size" must be an integer from 1 to 1024/ });
    // The same name on the caller's own prototype is still the caller's misspelling.
    assert.throws(() => new StreamPool(Object.create({ polluted: 3 }) as never), { message: /"options.polluted" is not a StreamPool option/ });
  } finally {
    delete (Object.prototype as { polluted?: number }).polluted;
  }
  // Methods on a prototype are no options, enumerable as a constructor function (or a class compiled to ES5) makes them.
  function Options(this: { size: number }, size: number) {
    this.size = size;
  }
  Options.prototype.describe = function describe() {};
  assert.throws(() => new StreamPool(new (Options as unknown as new (size: number) => object)(0) as never), { code: 'ERR_OUT_OF_RANGE', message: /^"options.size" must be an integer from 1 to 1024; received 0/ });
  // A built-in object would lend its own accessors as options: a Map's size is its entry count.
  assert.throws(() => new StreamPool(new Map([['size', 4]]) as never), { code: 'ERR_INVALID_ARG_TYPE', message: '"options" must be a plain object; received an instance of Map.' });
  assert.throws(() => new StreamPool(new Date(0) as never), { code: 'ERR_INVALID_ARG_TYPE', message: '"options" must be a plain object; received an instance of Date.' });
});

test('new StreamPool() rejects a size outside 1 to 1024 with ERR_OUT_OF_RANGE naming the value', () => {
  for (const size of [0, -1, 1025, 2.5, NaN]) {
    assert.throws(() => new StreamPool({ size }), {
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: `"options.size" must be an integer from 1 to 1024; received ${String(size)} (number).`,
    });
  }
  assert.throws(() => new StreamPool({ size: '8' as never }), {
    name: 'TypeError',
    code: 'ERR_INVALID_ARG_TYPE',
    message: '"options.size" must be an integer; received "8" (string).',
  });
});

test('new StreamPool() rejects a bad priority, nonBlocking or device with Node\'s codes', () => {
  assert.throws(() => new StreamPool({ priority: 2 ** 31 }), { code: 'ERR_OUT_OF_RANGE', message: /^"options.priority" must be an integer from -2147483648 to 2147483647; received 2147483648 \(number\)\.$/ });
  assert.throws(() => new StreamPool({ priority: '0' as never }), { code: 'ERR_INVALID_ARG_TYPE', message: /^"options.priority" must be an integer/ });
  assert.throws(() => new StreamPool({ nonBlocking: 1 as never }), { code: 'ERR_INVALID_ARG_TYPE', message: '"options.nonBlocking" must be a boolean; received 1 (number).' });
  assert.throws(() => new StreamPool({ device: 'gpu0' as never }), {
    code: 'ERR_INVALID_ARG_TYPE',
    message: '"options.device" must be a Device or a device ordinal (number); received "gpu0" (string).',
  });
  // A bad ordinal is named as the option it came from, not as Device.get()'s argument.
  assert.throws(() => new StreamPool({ device: 1.5 }), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: '"options.device" must be a non-negative integer (a device ordinal); received 1.5 (number).',
  });
  // null is no device here either, as for every other call that takes one.
  for (const make of [() => new StreamPool({ device: null as never }), () => Stream.create({ device: null as never })])
    assert.throws(make, { code: 'ERR_INVALID_ARG_TYPE', message: '"options.device" must be a Device or a device ordinal (number); received null.' });
});

test('StreamPool.attach() rejects anything but a record from share(), a pool never created as no such pool, and a pool that is gone with DestroyedError', () => {
  for (const bad of [undefined, null, 3, {}, { kind: 'other', id: 1 }]) {
    assert.throws(() => StreamPool.attach(bad as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /^"shared" must be a SharedStreamPool from pool.share\(\); received/ });
  }
  const kind = 'cuda-stream-pool:StreamPool';
  assert.throws(() => StreamPool.attach({ kind } as never), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: '"shared.id" must be a pool id (number) from pool.share(); received undefined.' });
  assert.throws(() => StreamPool.attach({ kind, id: 987654, device: 0, size: 1 }), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: '"shared.id" must be the id of a pool created in this process; received 987654 (number). There is no such pool.',
  });
  const description = native.poolCreateShared(1, poolLayout(1));
  native.poolDestroy(description.handle);
  assert.throws(
    () => StreamPool.attach({ kind, id: description.id, device: 0, size: 1 }),
    (e) => e instanceof DestroyedError && e.resource === 'StreamPool' && e.method === 'attach',
  );
});

test('CUDA_STREAM_POOL_SIZE sets the default pool size: unset or empty is 32, else an integer from 1 to 1024', () => {
  assert.equal(poolSizeFromEnvironment(undefined), 32);
  assert.equal(poolSizeFromEnvironment(''), 32);
  assert.equal(poolSizeFromEnvironment(' 8 '), 8);
  assert.equal(poolSizeFromEnvironment('1'), 1);
  assert.equal(poolSizeFromEnvironment('1024'), 1024);
  for (const bad of ['0', '-3', '1025', '99999999999999999999']) {
    assert.throws(() => poolSizeFromEnvironment(bad), {
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: `"CUDA_STREAM_POOL_SIZE" must be an integer from 1 to 1024 (the default pool's size); received "${bad}" (string).`,
    });
  }
  for (const bad of ['abc', '8.5', '--3', '0x10']) {
    assert.throws(() => poolSizeFromEnvironment(bad), {
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_VALUE',
      message: `"CUDA_STREAM_POOL_SIZE" must be an integer from 1 to 1024 (the default pool's size); received ${JSON.stringify(bad)}.`,
    });
  }
});

test('StreamPool.default() reports a bad CUDA_STREAM_POOL_SIZE before anything else, GPU or not', async () => {
  const child = await runChild(
    `import { StreamPool } from 'cuda-stream-pool';
     try { StreamPool.default(); console.log('created'); } catch (e) { console.log(e.code, e.message); }`,
    { CUDA_STREAM_POOL_SIZE: 'lots' },
  );
  assert.equal(child.code, 0, child.stderr);
  assert.match(child.stdout, /^ERR_INVALID_ARG_VALUE "CUDA_STREAM_POOL_SIZE" must be an integer from 1 to 1024/);
});

test('maxConnections reads CUDA_DEVICE_MAX_CONNECTIONS: an integer from 1 to 32, else the driver\'s default 8', () => {
  assert.equal(maxConnectionsFromEnvironment(undefined), 8);
  assert.equal(maxConnectionsFromEnvironment('32'), 32);
  assert.equal(maxConnectionsFromEnvironment(' 4'), 4);
  for (const other of ['', '0', '33', 'many', '2.5']) assert.equal(maxConnectionsFromEnvironment(other), 8);
});

// ---- self-deadlocks, reclaim, give-up ----

/** Ref'd timers of this thread: what keeps its event loop alive (unref'd ones are not listed). */
const refTimers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

test('a wait for a lease keeps the event loop alive only while another thread could end it', async () => {
  // Every stream is this thread's and no other thread holds the pool: only this thread could release one.
  const alone = rig(2, 1);
  const mine = [alone.core.tryAcquire()!, alone.core.tryAcquire()!];
  const base = refTimers();
  const stuck = alone.core.acquire();
  assert.equal(refTimers(), base, 'the backstop timer does not keep the loop alive');
  // Another thread attaches: at the next wake-up (the backstop), the timer keeps the loop alive again.
  Atomics.store(alone.words, ATTACHED_ENVS, 2);
  await new Promise((resolve) => setTimeout(resolve, BACKSTOP_MS * 2));
  assert.equal(refTimers(), base + 1);
  mine[0]!.release();
  (await stuck).release();
  mine[1]!.release();
  assert.equal(refTimers(), base);

  // Another environment holds a stream: its release ends the wait, so the loop stays alive.
  const a = rig(2, 1);
  const b = sibling(a, 2);
  const theirs = b.core.tryAcquire()!;
  const ours = a.core.tryAcquire()!;
  const waiting = a.core.acquire();
  assert.equal(refTimers(), base + 1);
  theirs.release();
  (await waiting).release();
  ours.release();
  assert.equal(refTimers(), base);
});

test('close everywhere waiting for this thread\'s own leases does not keep the loop alive; for another thread\'s it does', async () => {
  const a = rig(2, 1);
  const b = sibling(a, 2);
  const ours = a.core.tryAcquire()!;
  const base = refTimers();
  const closing = a.core.closeEverywhere(() => {}, () => false);
  assert.equal(refTimers(), base, 'only this thread holds a lease');
  const c = rig(2, 1);
  const d = sibling(c, 2);
  const theirs = d.core.tryAcquire()!;
  const closingC = c.core.closeEverywhere(() => {}, () => false);
  assert.equal(refTimers(), base + 1, 'another thread holds a lease');
  ours.release();
  theirs.release();
  await Promise.all([closing, closingC]);
  assert.equal(a.words[STATE], DESTROYED);
  assert.equal(b.core.destroyed, true);
  assert.equal(c.words[STATE], DESTROYED);
});

test('closeRefusal() names the lease the calling context holds, at any scope depth, and nothing outside it', async () => {
  const { core, poolStreams } = rig(3);
  const other = fake(9);
  assert.equal(core.closeRefusal('close'), undefined);
  const refusals = await core.run(async (stream) => {
    const direct = core.closeRefusal('close');
    const nested = enterScope(other, () => core.closeRefusal('close'));
    return { direct, nested, streamIndex: stream.streamIndex };
  });
  for (const error of [refusals.direct, refusals.nested]) {
    assert.ok(error instanceof TypeError);
    assert.equal((error as { code?: string }).code, 'ERR_INVALID_STATE');
    assert.match(error.message, new RegExp(`^Invalid state: close\\(\\) was called inside pool\\.run\\(\\).* on stream ${refusals.streamIndex}: `));
  }
  // A lease held elsewhere in this thread is not the caller's: closing may wait for it.
  const held = core.tryAcquire()!;
  assert.equal(core.closeRefusal('close'), undefined);
  held.release();
  assert.equal(poolStreams.drained.length, 0);
});

test('forgotten leases are reclaimed after PROMOTE_MS and a collection, unless their stream can still be reached', async () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  assert.ok(gc, 'run with --expose-gc');
  const { core } = rig(3);
  let kept: Fake | undefined = core.tryAcquire()!.stream;
  (() => {
    core.tryAcquire();
    core.tryAcquire();
  })();
  const collect = async (until: () => boolean) => {
    for (let i = 0; i < 100 && !until(); i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  // Young leases are held strongly: a collection right away reclaims nothing.
  gc();
  await tick();
  assert.equal(core.counters().leasesReclaimed, 0);
  await new Promise((resolve) => setTimeout(resolve, PROMOTE_MS + 20));
  await collect(() => core.counters().leasesReclaimed === 2);
  assert.deepEqual([core.counters().leasesReclaimed, core.counters().leased], [2, 1]);
  assert.equal(kept.retired, undefined, 'the kept stream\'s lease is still held');
  const again = [core.tryAcquire(), core.tryAcquire(), core.tryAcquire()];
  assert.deepEqual(again.map((l) => l !== undefined), [true, true, false]);
  again.forEach((l) => l?.release());
  kept = undefined;
  await collect(() => core.counters().leasesReclaimed === 3);
  assert.deepEqual([core.counters().leasesReclaimed, core.counters().leased], [3, 0]);
});

test('close everywhere given up by its signal: rejects with the reason, the pool is open again, a later close starts anew', async () => {
  const { core, words } = rig(2);
  const held = core.tryAcquire()!;
  const controller = new AbortController();
  const closing = core.closeEverywhere(() => {}, () => false, controller.signal);
  assert.equal(words[STATE], CLOSING);
  assert.throws(() => core.tryAcquire(), DestroyedError);
  const reason = new Error('no longer');
  controller.abort(reason);
  await assert.rejects(closing, (e) => e === reason);
  assert.equal(words[STATE], OPEN);
  const other = core.tryAcquire()!;
  assert.equal(other.released, false);
  other.release();
  const again = core.closeEverywhere(() => {}, () => false);
  assert.notEqual(again, closing);
  held.release();
  await again;
  assert.equal(words[STATE], DESTROYED);
});

test('the native pool counts the environments attached to it and the last detach destroys it', async () => {
  const pool = shared(2);
  const words = new Int32Array(pool.description.memory);
  assert.equal(words[ATTACHED_ENVS], 1);
  const second = native.poolAttach(pool.description.id)!; // a second handle in this thread
  assert.equal(words[ATTACHED_ENVS], 1);
  const w = start({ id: pool.description.id, mode: 'hold-stay', hold: 1 });
  assert.deepEqual(await w.next(), { held: [0] });
  assert.equal(words[ATTACHED_ENVS], 2);
  await w.worker.terminate();
  assert.equal(words[ATTACHED_ENVS], 1, 'the worker\'s handle was released at its teardown');
  native.poolDetach(second.handle);
  native.poolDetach(second.handle); // idempotent
  assert.equal(words[STATE], OPEN);
  native.poolDetach(pool.description.handle);
  assert.equal(words[ATTACHED_ENVS], 0);
  assert.equal(words[STATE], DESTROYED, 'the last detach destroyed the pool');
  assert.throws(() => native.poolAttach(pool.description.id), (e) => e instanceof DestroyedError);
});
