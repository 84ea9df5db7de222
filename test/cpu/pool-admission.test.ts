// GPU admission, tested on the CPU: leases that carry a memory budget, granted only while the budgets held in every
// thread fit the pool's limit. The policy runs over fake streams, in one thread playing several environments, over
// native shared words (so that a death is the native thread-exit release), and across worker threads.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { StreamPool } from 'cuda-stream-pool';
import { memoryLimitFromEnvironment } from '#library/pool/pool.js';
import type { PoolCore } from '#library/pool/pool-policy.js';
import { rig, runPoolModel, shared, sibling, state, streamIndexOf, tick, type Fake, type ModelHeld, type ModelStep } from '../support/pool-fakes.js';
import { startWorker } from '../support/worker.js';

const MiB = 2 ** 20;

test('a budget that fits is admitted at once; the sum is in stats() until the lease ends', async () => {
  const { core } = rig(4, 1, undefined, 100 * MiB);
  assert.equal(core.memoryLimitBytes, 100 * MiB);
  const a = core.tryAcquire({ memoryBytes: 60 * MiB })!;
  const b = await core.acquire({ memoryBytes: 40 * MiB });
  const c = core.tryAcquire()!; // no budget: never waits for memory
  assert.deepEqual([a.memoryBytes, b.memoryBytes, c.memoryBytes], [60 * MiB, 40 * MiB, 0]);
  let stats = core.counters();
  assert.equal(stats.memoryLimitBytes, 100 * MiB);
  assert.equal(stats.memoryAdmittedBytes, 100 * MiB);
  assert.equal(stats.leased, 3);
  a.release();
  assert.equal(core.counters().memoryAdmittedBytes, 40 * MiB);
  assert.equal(a.memoryBytes, 60 * MiB, 'a released lease still says what it was granted');
  b.release();
  c.release();
  stats = core.counters();
  assert.equal(stats.memoryAdmittedBytes, 0);
  assert.equal(stats.leased, 0);
});

test('a budget that does not fit waits with its stream, and the waiters behind it wait too, until memory comes back', async () => {
  const { core } = rig(4, 1, undefined, 100 * MiB);
  const big = core.tryAcquire({ memoryBytes: 70 * MiB })!;
  const blocked = core.acquire({ memoryBytes: 50 * MiB });
  const behind = core.acquire(); // no budget, but first come first served in a thread
  assert.equal(await state(blocked), 'pending');
  assert.equal(await state(behind), 'pending');
  let stats = core.counters();
  assert.equal(stats.leased, 2, 'the first waiter keeps a stream while it waits for memory');
  assert.equal(stats.waiters, 2);
  assert.equal(stats.memoryWaiters, 2);
  assert.equal(core.tryAcquire(), undefined, 'tryAcquire() does not overtake waiters');
  big.release();
  const granted = await blocked;
  assert.equal(granted.memoryBytes, 50 * MiB);
  const next = await behind;
  stats = core.counters();
  assert.equal(stats.memoryAdmittedBytes, 50 * MiB);
  assert.equal(stats.waiters, 0);
  assert.equal(stats.memoryWaiters, 0);
  assert.notEqual(streamIndexOf(granted), streamIndexOf(next));
  granted.release();
  next.release();
  assert.equal(core.counters().leased, 0);
});

test('tryAcquire() with a budget that does not fit returns undefined and keeps no stream', () => {
  const { core } = rig(2, 1, undefined, 10 * MiB);
  const held = core.tryAcquire({ memoryBytes: 8 * MiB })!;
  assert.equal(core.tryAcquire({ memoryBytes: 3 * MiB }), undefined);
  assert.equal(core.counters().leased, 1);
  const fits = core.tryAcquire({ memoryBytes: 2 * MiB })!;
  assert.equal(core.counters().memoryAdmittedBytes, 10 * MiB);
  held.release();
  fits.release();
});

test('a budget above the limit is a RangeError naming the value and the limit; bad budgets are typed errors', async () => {
  const { core } = rig(2, 1, undefined, 10 * MiB);
  assert.throws(() => core.tryAcquire({ memoryBytes: 10 * MiB + 1 }), {
    name: 'RangeError',
    code: 'ERR_OUT_OF_RANGE',
    message: `"options.memoryBytes" must be an integer from 0 to the pool's memory limit, ${10 * MiB} bytes; received ${10 * MiB + 1} (number). A budget above the limit could never be admitted.`,
  });
  // The stack starts where the pool was called, not inside the library.
  for (const call of [() => core.tryAcquire({ memoryBytes: -1 }), () => core.tryAcquire({ memoryBytes: 'x' as never })]) {
    const error = (() => {
      try {
        call();
      } catch (e) {
        return e as Error;
      }
      return undefined;
    })();
    assert.doesNotMatch(error!.stack!.split('\n')[1]!, /pool-policy/, error!.stack);
  }
  for (const rejected of [core.acquire({ memoryBytes: -1 }), core.run(() => 1, { memoryBytes: -1 })]) {
    const error = await rejected.catch((e: Error) => e);
    assert.doesNotMatch((error as Error).stack!.split('\n')[1]!, /pool-policy/, (error as Error).stack);
  }
  assert.equal(core.tryAcquire({ memoryBytes: -0 })!.memoryBytes, 0);
  assert.ok(Object.is(core.counters().memoryAdmittedBytes, 0));
  core.destroyEverywhere(() => {});
  await assert.rejects(core.acquire({ memoryBytes: 11 * MiB }), { code: 'ERR_OUT_OF_RANGE' });
  await assert.rejects(core.run(() => 1, { memoryBytes: 11 * MiB }), { code: 'ERR_OUT_OF_RANGE' });
  await assert.rejects(core.acquire({ memoryBytes: -1 }), { code: 'ERR_OUT_OF_RANGE', message: /"options\.memoryBytes" must be an integer from 0/ });
  await assert.rejects(core.acquire({ memoryBytes: 1.5 }), { code: 'ERR_OUT_OF_RANGE' });
  await assert.rejects(core.acquire({ memoryBytes: '1' as unknown as number }), { code: 'ERR_INVALID_ARG_TYPE', message: /"options\.memoryBytes"/ });
  assert.throws(() => core.tryAcquire({ memoryByte: 1 } as never), { code: 'ERR_INVALID_ARG_VALUE', message: /"options\.memoryByte" is not a tryAcquire option/ });
});

test('a budget equal to the limit fits, and refused calls take nothing', () => {
  const { core } = rig(2, 1, undefined, 10 * MiB);
  assert.throws(() => core.tryAcquire({ memoryBytes: -1 }));
  const exact = core.tryAcquire({ memoryBytes: 10 * MiB })!;
  assert.equal(core.counters().leased, 1, 'nothing was taken by the refused calls');
  exact.release();
});

test('run() admits the budget before fn runs and gives it back however fn ends', async () => {
  const { core } = rig(4, 1, undefined, 100 * MiB);
  const seen: number[] = [];
  const failure = new Error('task failed');
  const tasks = [
    core.run(async () => {
      seen.push(core.counters().memoryAdmittedBytes);
      await tick();
      throw failure;
    }, { memoryBytes: 80 * MiB }),
    core.run(() => {
      seen.push(core.counters().memoryAdmittedBytes);
      return 'second';
    }, { memoryBytes: 80 * MiB }),
  ];
  const [first, second] = await Promise.allSettled(tasks);
  assert.deepEqual(first, { status: 'rejected', reason: failure });
  assert.deepEqual(second, { status: 'fulfilled', value: 'second' });
  assert.deepEqual(seen, [80 * MiB, 80 * MiB], 'the second ran only once the first had given its budget back');
  assert.equal(core.counters().memoryAdmittedBytes, 0);
});

test('an abort while waiting for memory rejects with the reason and passes the stream to the next waiter', async () => {
  const { core } = rig(2, 1, undefined, 10 * MiB);
  const held = core.tryAcquire({ memoryBytes: 6 * MiB })!;
  const controller = new AbortController();
  const blocked = core.acquire({ memoryBytes: 6 * MiB, signal: controller.signal });
  const small = core.acquire({ memoryBytes: 1 * MiB });
  assert.equal(await state(small), 'pending');
  assert.deepEqual([core.counters().leased, core.counters().memoryWaiters], [2, 2]);
  const reason = new Error('gave up');
  controller.abort(reason);
  await assert.rejects(blocked, reason);
  const granted = await small;
  assert.notEqual(streamIndexOf(granted), streamIndexOf(held), 'the parked stream went to the next waiter');
  const stats = core.counters();
  assert.deepEqual([stats.leased, stats.waiters, stats.memoryWaiters, stats.memoryAdmittedBytes], [2, 0, 0, 7 * MiB]);
  held.release();
  granted.release();
});

test('a thread that waits for memory holds the turn: no other thread admits a budget before it', async () => {
  const a = rig(4, 1, undefined, 100 * MiB);
  const b = sibling(a, 2);
  const held = b.core.tryAcquire({ memoryBytes: 60 * MiB })!;
  const large = a.core.acquire({ memoryBytes: 80 * MiB });
  assert.equal(await state(large), 'pending');
  // 30 MiB would fit beside the 60 held, but the large budget came first.
  assert.equal(b.core.tryAcquire({ memoryBytes: 30 * MiB }), undefined);
  const unbudgeted = b.core.tryAcquire(); // a lease without a budget does not wait for memory
  assert.ok(unbudgeted);
  unbudgeted.release();
  const small = b.core.acquire({ memoryBytes: 30 * MiB });
  assert.equal(await state(small), 'pending');
  held.release();
  const granted = await large;
  assert.equal(granted.memoryBytes, 80 * MiB);
  assert.equal(await state(small), 'pending', 'the small budget does not fit beside the large one');
  granted.release();
  (await small).release();
  assert.equal(a.core.counters().memoryAdmittedBytes, 0);
});

test('a turn left by a thread that stopped waiting is taken back', async () => {
  const a = rig(2, 1, undefined, 10 * MiB);
  const b = sibling(a, 2);
  const held = b.core.tryAcquire({ memoryBytes: 8 * MiB })!;
  const controller = new AbortController();
  const waiting = a.core.acquire({ memoryBytes: 5 * MiB, signal: controller.signal });
  assert.equal(await state(waiting), 'pending');
  controller.abort();
  await assert.rejects(waiting);
  const fits = b.core.tryAcquire({ memoryBytes: 2 * MiB });
  assert.ok(fits, 'the turn went with the waiter');
  fits.release();
  held.release();
});

test('close and detach reject a waiter that waits for memory and free the stream it kept', async () => {
  const a = rig(2, 1, undefined, 10 * MiB);
  const b = sibling(a, 2);
  const held = a.core.tryAcquire({ memoryBytes: 8 * MiB })!;
  const waiting = b.core.acquire({ memoryBytes: 5 * MiB });
  assert.equal(await state(waiting), 'pending');
  assert.equal(a.core.counters().leased, 2);
  b.core.detach('was detached');
  await assert.rejects(waiting, { name: 'DestroyedError' });
  assert.equal(a.core.counters().leased, 1);
  assert.equal(a.core.counters().memoryWaiters, 0);
  const again = a.core.acquire({ memoryBytes: 2 * MiB });
  (await again).release();
  const parked = a.core.acquire({ memoryBytes: 5 * MiB });
  const closing = a.core.closeEverywhere(() => {}, () => false);
  await assert.rejects(parked, { name: 'DestroyedError' });
  held.release();
  await closing;
});

test('destroying the pool rejects a waiter that waits for memory with DestroyedError', async () => {
  const { core } = rig(2, 1, undefined, 10 * MiB);
  const held = core.tryAcquire({ memoryBytes: 8 * MiB })!;
  const parked = core.acquire({ memoryBytes: 5 * MiB });
  assert.equal(core.counters().memoryWaiters, 1);
  core.destroyEverywhere(() => {});
  await assert.rejects(parked, { name: 'DestroyedError', message: /was destroyed/ });
  assert.equal(held.released, true);
});

test('budgets never pass the limit and none is lost, whatever the order of acquires, releases, aborts and deaths (model-based)', async () => {
  const limit = 10;
  const step = fc.record({
    kind: fc.constantFrom('acquire', 'try', 'release', 'abort', 'die', 'tick'),
    who: fc.integer({ min: 0, max: 2 }),
    pick: fc.nat(),
    budget: fc.integer({ min: 0, max: limit }),
  }) as fc.Arbitrary<ModelStep>;
  const check = (held: readonly ModelHeld[], core: PoolCore<Fake>) => {
    const sum = held.reduce((total, h) => total + h.lease.memoryBytes, 0);
    assert.ok(sum <= limit, `budgets held add up to ${sum}, over the limit ${limit}`);
    const admitted = core.counters().memoryAdmittedBytes;
    assert.ok(admitted >= sum, `the pool counts ${admitted} admitted, less than the ${sum} held`);
  };
  const atTheEnd = (survivor: PoolCore<Fake>) => {
    const stats = survivor.counters();
    assert.deepEqual([stats.memoryWaiters, stats.memoryAdmittedBytes], [0, 0]);
    const whole = survivor.tryAcquire({ memoryBytes: limit });
    assert.ok(whole, 'the whole limit can be admitted again');
    whole.release();
  };
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(step, { maxLength: 60 }), (size, steps) =>
      runPoolModel(size, steps, { memoryLimitBytes: limit, check, finally: atTheEnd }),
    ),
    { numRuns: 60 },
  );
});

test('tasks whose budgets would not fit at once all run, never more at once than the limit holds', async () => {
  const { core } = rig(8, 1, undefined, 1000);
  let inFlight = 0;
  let peak = 0;
  const budgets = Array.from({ length: 200 }, (_, i) => 100 + ((i * 37) % 400));
  const results = await Promise.all(
    budgets.map((memoryBytes, i) =>
      core.run(async () => {
        inFlight += memoryBytes;
        peak = Math.max(peak, inFlight);
        assert.ok(inFlight <= 1000, `${inFlight} bytes admitted at once`);
        for (let k = 0; k < 1 + (i % 3); k++) await tick();
        inFlight -= memoryBytes;
        return i;
      }, { memoryBytes }),
    ),
  );
  assert.deepEqual(results, budgets.map((_, i) => i));
  assert.ok(peak > 500, `the limit was used (peak ${peak})`);
  assert.equal(core.counters().memoryAdmittedBytes, 0);
});

// ---- across worker threads ----

const workerUrl = new URL('../workers/pool-cpu-worker.js', import.meta.url);

test('a worker that exits holding budgets gives them back, and a waiter in this thread gets the memory', async () => {
  const pool = shared(4, 100 * MiB);
  try {
    const worker = startWorker(workerUrl, { id: pool.description.id, mode: 'hold-stay', hold: 2, memoryBytes: 40 * MiB });
    assert.equal(((await worker.next()) as { held: number[] }).held.length, 2);
    assert.equal(pool.core.counters().memoryAdmittedBytes, 80 * MiB);
    const waiting = pool.core.acquire({ memoryBytes: 50 * MiB });
    assert.equal(await state(waiting), 'pending');
    assert.equal(pool.core.counters().memoryWaiters, 1);
    await worker.worker.terminate(); // its cleanup hook zeroes its budgets with its lease words
    const lease = await waiting; // seen within the backstop: native code cannot notify
    assert.equal(lease.memoryBytes, 50 * MiB);
    assert.equal(pool.core.counters().memoryAdmittedBytes, 50 * MiB);
    lease.release();
  } finally {
    pool.destroy();
  }
});

test('workers terminated at random while leasing with budgets: no budget lost, the whole limit is free at the end', async () => {
  const size = 3;
  const pool = shared(size, 10 * MiB);
  const marks = new Int32Array(new SharedArrayBuffer((size + 2) * 4));
  const live = new Set<ReturnType<typeof startWorker>>();
  const spawn = async (k: number) => {
    const w = startWorker(workerUrl, { id: pool.description.id, mode: 'churn', marks: marks.buffer, tasks: 2, memoryBytes: (3 + (k % 4)) * MiB });
    live.add(w);
    await w.next(); // 'started'
  };
  try {
    let spawned = 0;
    for (; spawned < 3; spawned++) await spawn(spawned);
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let round = 0; round < 12; round++) {
      await new Promise((resolve) => setTimeout(resolve, 5 + random() * 20));
      const victims = [...live];
      const victim = victims[Math.floor(random() * victims.length)]!;
      live.delete(victim);
      await victim.worker.terminate();
      await spawn(spawned++);
    }
    for (const w of live) await w.worker.terminate();
    live.clear();
    assert.equal(Atomics.load(marks, size), 0, 'never two holders at once');
    assert.ok(Atomics.load(marks, size + 1) > 50, `leases were granted (${Atomics.load(marks, size + 1)})`);
    const stats = pool.core.counters();
    assert.deepEqual([stats.leased, stats.memoryAdmittedBytes], [0, 0]);
    const whole = await pool.core.acquire({ memoryBytes: 10 * MiB });
    whole.release();
  } finally {
    for (const w of live) await w.worker.terminate();
    pool.destroy();
  }
});

// ---- the public StreamPool ----

test('new StreamPool() rejects a memoryLimitBytes that is not an integer from 1 to 2**53 - 1', () => {
  for (const [value, code] of [
    [0, 'ERR_OUT_OF_RANGE'],
    [-5, 'ERR_OUT_OF_RANGE'],
    [1.5, 'ERR_OUT_OF_RANGE'],
    [2 ** 53, 'ERR_OUT_OF_RANGE'],
    ['1GiB', 'ERR_INVALID_ARG_TYPE'],
    [10n, 'ERR_INVALID_ARG_TYPE'],
  ] as const)
    assert.throws(() => new StreamPool({ memoryLimitBytes: value as number }), { code, message: /"options\.memoryLimitBytes"/ }, String(value));
});

test('CUDA_STREAM_POOL_MEMORY_LIMIT sets the default pools\' limit: unset or empty is the device\'s memory, else whole bytes', () => {
  assert.equal(memoryLimitFromEnvironment(undefined), undefined);
  assert.equal(memoryLimitFromEnvironment(' '), undefined);
  assert.equal(memoryLimitFromEnvironment('1073741824'), 2 ** 30);
  assert.equal(memoryLimitFromEnvironment(' 42 '), 42);
  assert.throws(() => memoryLimitFromEnvironment('1GiB'), { code: 'ERR_INVALID_ARG_VALUE', message: /CUDA_STREAM_POOL_MEMORY_LIMIT.*"1GiB"/ });
  assert.throws(() => memoryLimitFromEnvironment('1.5'), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => memoryLimitFromEnvironment('0'), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => memoryLimitFromEnvironment('9007199254740992'), { code: 'ERR_OUT_OF_RANGE' });
});
