// A thread that deadlocks itself on its own pool, on the simulated driver in child processes: a forgotten lease
// before close(), close() inside run(), run() nested deeper than the pool. Each process must end on its own (exit
// code 13, Node's code for an unsettled top-level await) or get an error at once, never hang. Waits on GPU work still
// keep the process alive. Also: forgotten leases are reclaimed, close() can be given up, and a pool whose creating
// worker exited is destroyed by the last detach.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { collectGarbage, needsCompiler, runSimulated, simulatedJson } from '../support/simulated-driver.js';

/** Well under the 10 s after which a child is killed, and far above the ~0.3 s such a child takes. */
const PROMPT_MS = 5_000;

async function exitsUnsettled(source: string): Promise<void> {
  const result = await runSimulated(`import { StreamPool } from 'cuda-stream-pool';\n${source}\nconsole.log('settled');`, { timeoutMs: 10_000 });
  assert.equal(result.signal, null, `killed after ${Math.round(result.durationMs)} ms: the process hung\n${result.stderr}`);
  assert.equal(result.code, 13, `exit ${result.code}\n${result.stdout}\n${result.stderr}`);
  assert.ok(result.durationMs < PROMPT_MS, `took ${Math.round(result.durationMs)} ms`);
  assert.doesNotMatch(result.stdout, /settled/);
}

test('a forgotten lease, then close(): the process ends with code 13 instead of hanging', needsCompiler, async () => {
  await exitsUnsettled(`const pool = new StreamPool({ size: 2 });
    const lease = await pool.acquire();
    await pool.close();`);
});

test('a forgotten lease, then [Symbol.asyncDispose]() (await using): the process ends with code 13', needsCompiler, async () => {
  await exitsUnsettled(`const pool = new StreamPool({ size: 2 });
    const lease = pool.tryAcquire();
    await pool[Symbol.asyncDispose]();`);
});

test('run() nested deeper than the pool size: the process ends with code 13', needsCompiler, async () => {
  await exitsUnsettled(`const pool = new StreamPool({ size: 2 });
    await pool.run(() => pool.run(() => pool.run(() => 1)));`);
});

test('acquire() while this thread holds every stream of a pool nobody else holds: the process ends with code 13', needsCompiler, async () => {
  await exitsUnsettled(`const pool = new StreamPool({ size: 1 });
    const held = pool.tryAcquire();
    await pool.acquire();`);
});

test('close() inside run() of the same pool rejects at once with ERR_INVALID_STATE naming the lease, and changes nothing', needsCompiler, async () => {
  const result = await simulatedJson<{
    errors: { name: string; code: string; message: string }[];
    ids: string[];
    destroyed: boolean;
    ran: number;
    closed: boolean;
    ms: number;
  }>(`import { StreamPool, withStream, Stream } from 'cuda-stream-pool';
    const pool = new StreamPool({ size: 2 });
    const other = Stream.create();
    const ids = [];
    const errors = [];
    const started = performance.now();
    const describe = (e) => ({ name: e.name, code: e.code, message: e.message });
    await pool.run(async (stream) => {
      ids.push(String(stream.id));
      await pool.close().catch((e) => errors.push(describe(e)));
      // Nested in another scope: the lease is still this context's.
      await withStream(other, () => pool.close()).catch((e) => errors.push(describe(e)));
    });
    const lease = await pool.acquire();
    ids.push(String(lease.stream.id));
    await withStream(lease.stream, () => pool[Symbol.asyncDispose]()).catch((e) => errors.push(describe(e)));
    lease.release();
    const ms = performance.now() - started;
    const destroyed = pool.destroyed;
    const ran = await pool.run(() => 7);
    await pool.close();
    other.destroy();
    console.log(JSON.stringify({ errors, ids, destroyed, ran, closed: pool.destroyed, ms }));`);
  assert.equal(result.errors.length, 3);
  result.errors.forEach((error, i) => {
    assert.equal(error.name, 'TypeError');
    assert.equal(error.code, 'ERR_INVALID_STATE');
    const id = result.ids[i === 2 ? 1 : 0];
    assert.match(error.message, new RegExp(`^Invalid state: close\\(\\) was called inside pool\\.run\\(\\).*on stream \\d \\(id ${id}\\)`));
  });
  assert.equal(result.destroyed, false);
  assert.equal(result.ran, 7);
  assert.equal(result.closed, true);
  assert.ok(result.ms < 3000, `${result.ms} ms: the refusals did not come at once`);
});

test('waits on GPU work keep the process alive: synchronize(), and close() draining queued work', needsCompiler, async () => {
  const result = await runSimulated(
    `import { DeviceBuffer, StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 1 });
     const buffer = DeviceBuffer.alloc(1024, { stream: pool.getStream() });
     const lease = pool.tryAcquire();
     for (let i = 0; i < 3; i++) lease.stream.fill(buffer, i);
     await lease.stream.synchronize();
     console.log('synchronized');
     for (let i = 0; i < 3; i++) lease.stream.fill(buffer, i);
     lease.release();
     buffer.free(pool.getStream(0));
     await pool.close();
     console.log('closed');`,
    { operationDelayUs: 150_000 },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(result.stdout.trim().split('\n'), ['synchronized', 'closed']);
  assert.ok(result.durationMs > 900, `${result.durationMs} ms: the delays did not happen`);
});


test('a lease goes back to the pool once neither it nor its stream can be reached, counted in leasesReclaimed', needsCompiler, async () => {
  const result = await simulatedJson<{ kept: number[]; keptStreamWorks: boolean; freed: boolean[]; closed: boolean }>(
    `${collectGarbage}
     import { StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 3 });
     const count = () => { const s = pool.stats(); return [s.leased, s.leasesReclaimed]; };
     // Only the stream of this lease is kept: the lease must stay held while the stream can be reached.
     let { stream } = await pool.acquire();
     (() => { pool.tryAcquire(); pool.tryAcquire(); })();
     await collectUntil(() => count()[1] === 2);
     const kept = count();
     const keptStreamWorks = stream.query() === true;
     const again = [pool.tryAcquire(), pool.tryAcquire(), pool.tryAcquire()];
     const freed = again.map((lease) => lease !== undefined);
     again.forEach((lease) => lease?.release());
     const closing = pool.close(); // waits for the lease whose stream is still kept
     stream = undefined;
     await collectUntil(() => pool.destroyed);
     await closing;
     console.log(JSON.stringify({ kept, keptStreamWorks, freed, closed: pool.destroyed }));`,
  );
  assert.deepEqual(result.kept, [1, 2]);
  assert.equal(result.keptStreamWorks, true);
  assert.deepEqual(result.freed, [true, true, false]);
  assert.equal(result.closed, true);
});

test('close({ signal }) is given up when the signal aborts: it rejects with the reason and the pool is usable again', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, unknown>>(
    `import { StreamPool } from 'cuda-stream-pool';
     const pool = new StreamPool({ size: 2 });
     const first = pool.tryAcquire();
     const second = pool.tryAcquire();
     const waiting = pool.acquire().then(() => 'granted', (e) => e.name);
     const controller = new AbortController();
     const closing = pool.close({ signal: controller.signal });
     const sameWhileClosing = pool.close() === closing;
     setTimeout(() => controller.abort(new Error('gave up')), 100);
     const reason = await closing.catch((e) => e.message);
     const waiter = await waiting;
     const openAfter = !pool.destroyed && pool.tryAcquire() === undefined; // both still held: no error, no lease
     second.release();
     const ran = await pool.run(() => 5);
     const newClose = pool.close();
     const fresh = newClose !== closing;
     first.release();
     await newClose;
     const other = new StreamPool({ size: 1 });
     const early = await other.close({ signal: AbortSignal.abort('early') }).catch((e) => e);
     const earlyOpen = !other.destroyed && other.tryAcquire() !== undefined;
     const bad = await other.close({ signal: 1 }).catch((e) => e.code);
     const typo = await other.close({ sginal: 1 }).catch((e) => e.code);
     other.destroy();
     // An attached handle (the default pool): its close waits for this thread's leases only.
     const shared = StreamPool.default();
     const held = shared.tryAcquire();
     const c2 = new AbortController();
     const detaching = shared.close({ signal: c2.signal });
     const attachedWaiting = await Promise.race([detaching.then(() => 'settled'), new Promise((r) => setTimeout(() => r('pending'), 50))]);
     c2.abort(new Error('stop'));
     const attachedReason = await detaching.catch((e) => e.message);
     const probe = shared.tryAcquire();
     const attachedOpen = !shared.destroyed && probe !== undefined;
     probe?.release();
     held.release();
     await shared.close();
     console.log(JSON.stringify({ sameWhileClosing, reason, waiter, openAfter, ran, fresh, destroyed: pool.destroyed, early,
       earlyOpen, bad, typo, attachedWaiting, attachedReason, attachedOpen, attachedDetached: shared.destroyed }));`,
  );
  assert.deepEqual(result, {
    sameWhileClosing: true,
    reason: 'gave up',
    waiter: 'DestroyedError',
    openAfter: true,
    ran: 5,
    fresh: true,
    destroyed: true,
    early: 'early',
    earlyOpen: true,
    bad: 'ERR_INVALID_ARG_TYPE',
    typo: 'ERR_INVALID_ARG_VALUE',
    attachedWaiting: 'pending',
    attachedReason: 'stop',
    attachedOpen: true,
    attachedDetached: true,
  });
});

test('a pool whose creating worker exited is destroyed, streams and all, by the last detach in another thread', needsCompiler, async () => {
  const result = await simulatedJson<Record<string, unknown>>(
    `import { Worker } from 'node:worker_threads';
     import { once } from 'node:events';
     import { cuda, StreamPool } from 'cuda-stream-pool';
     const streams = () => cuda.liveObjects().streams;
     // The worker creates a pool, shares it, and exits once this thread has attached.
     async function poolOfExitedWorker(size) {
       const worker = new Worker(
         "import { parentPort } from 'node:worker_threads';" +
         "import { StreamPool } from 'cuda-stream-pool';" +
         "const pool = new StreamPool({ size: " + size + " });" +
         "parentPort.postMessage(pool.share());" +
         "parentPort.once('message', () => parentPort.close());",
         { eval: true });
       const [shared] = await once(worker, 'message');
       const pool = StreamPool.attach(shared);
       worker.postMessage('attached');
       await once(worker, 'exit');
       return pool;
     }
     const before = streams();
     const pool = await poolOfExitedWorker(3);
     const afterExit = streams();
     const lease = pool.tryAcquire();
     const record = pool.share();
     pool.destroy();
     const afterDestroy = streams();
     const leaseReleased = lease.released;
     const attachAgain = (() => { try { StreamPool.attach(record); return 'attached'; } catch (e) { return e.name; } })();
     // close() detaches too: the same once its wait for this thread's leases is over.
     const closed = await poolOfExitedWorker(2);
     const beforeClose = streams();
     await closed.close();
     console.log(JSON.stringify({ before, afterExit, afterDestroy, leaseReleased, attachAgain, beforeClose, afterClose: streams() }));`,
  );
  assert.deepEqual(result, {
    before: 0,
    afterExit: 3,
    afterDestroy: 0,
    leaseReleased: true,
    attachAgain: 'DestroyedError',
    beforeClose: 2,
    afterClose: 0,
  });
});
