// The pool policy's CPU rig: fake streams that say which stream index they are, and pool cores over them, on words
// made in JS (one thread playing several environments) or on native shared words (for workers and thread exits).
import { native } from '#library/binding/binding.js';
import assert from 'node:assert/strict';

import { BACKSTOP_MS, PoolCore, type PoolStreams } from '#library/pool/pool-policy.js';
import type { StreamLease } from '#library/pool/stream-lease.js';
import { poolLayout } from '#library/pool/pool-words.js';
import { enterScope, inScope } from '#library/stream/scope.js';

/** A fake stream: says which stream index it is, whether it is a lease's view, and why it was retired. The policy enters
 * its scope through enterScope, which takes any object. */
export interface Fake {
  streamIndex: number;
  view: number;
  retired?: string;
  used?: boolean;
  lease?: object;
}
let views = 0;
export function fake(streamIndex: number, view = 0): Fake {
  return { streamIndex, view, retired: undefined };
}

export interface Rig {
  core: PoolCore<Fake>;
  words: Int32Array;
  poolStreams: PoolStreams<Fake> & { idle: boolean[]; drained: number[]; probes: number[]; drain: (streamIndex: number) => Promise<void> };
}

export function fakeStreamsFor(size: number, drainHook?: (streamIndex: number) => Promise<void>): Rig['poolStreams'] {
  const idle = Array.from({ length: size }, () => true);
  const drained: number[] = [];
  const probes: number[] = [];
  return {
    streams: Array.from({ length: size }, (_, streamIndex) => fake(streamIndex)),
    leaseView: (streamIndex, lease) => Object.assign(fake(streamIndex, ++views), { lease }), // a view keeps its lease, as in pool.ts
    retire: (view, why) => {
      view.retired ??= why;
    },
    isIdle: (streamIndex) => {
      probes.push(streamIndex);
      return idle[streamIndex]!;
    },
    used: (view) => view.used === true,
    scope: enterScope,
    drain: async (streamIndex) => {
      await drainHook?.(streamIndex);
      drained.push(streamIndex);
    },
    inScope,
    idle,
    drained,
    probes,
  };
}

/** A pool core over a fresh JS SharedArrayBuffer, as environment `environment`. */
export function rig(size: number, environment = 1, drainHook?: (streamIndex: number) => Promise<void>, memoryLimitBytes?: number): Rig {
  const words = new Int32Array(new SharedArrayBuffer(poolLayout(size).words * 4));
  const poolStreams = fakeStreamsFor(size, drainHook);
  return { core: new PoolCore(words, size, environment, poolStreams, memoryLimitBytes), words, poolStreams };
}

/** A second handle on the same words, as another environment (another "thread" in this thread). */
export function sibling(of: Rig, environment: number): Rig {
  const poolStreams = fakeStreamsFor(of.core.size);
  return { core: new PoolCore(of.words, of.core.size, environment, poolStreams), words: of.words, poolStreams };
}

export const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
export const streamIndexOf = (lease: StreamLease<Fake>) => lease.stream.streamIndex;

/** Settles once `promise` settles, or reports that it is still pending after a few turns of the loop. */
export async function state<T>(promise: Promise<T>): Promise<'pending' | 'resolved' | 'rejected'> {
  let result: 'pending' | 'resolved' | 'rejected' = 'pending';
  promise.then(
    () => (result = 'resolved'),
    () => (result = 'rejected'),
  );
  for (let i = 0; i < 3; i++) await tick();
  return result;
}

/** A pool core over native shared words (poolCreateShared) in this thread, which workers attach by its id. */
export function shared(size: number, memoryLimitBytes?: number) {
  const description = native.poolCreateShared(size, poolLayout(size));
  const poolStreams = fakeStreamsFor(size);
  const core = new PoolCore(new Int32Array(description.memory), size, native.environmentId, poolStreams, memoryLimitBytes);
  return { description, core, destroy: () => core.destroyEverywhere(() => native.poolDestroy(description.handle)) };
}

/** One step of the pool model: who (thread 0 to 2) does what; `pick` chooses among held leases or pending acquires,
 * `budget` is the memory budget of an acquire or tryAcquire (none when undefined). */
export interface ModelStep {
  kind: 'acquire' | 'try' | 'release' | 'abort' | 'die' | 'tick';
  who: number;
  pick: number;
  budget?: number;
}

/** A lease the model holds, and the thread that holds it. */
export interface ModelHeld {
  lease: StreamLease<Fake>;
  who: number;
}

/** Runs `steps` on three "threads" (pool cores of environments 11 to 13 over one pool's native shared words, so that a
 * death is the native thread-exit release itself), calling `check(held, survivor)` after each step; then releases
 * everything and waits until every live waiter was served, and checks that every stream is free again, no waiter is
 * left, and each stream can be leased. Returns the surviving core for more checks, before the pool is destroyed. */
export async function runPoolModel(
  size: number,
  steps: readonly ModelStep[],
  o: { memoryLimitBytes?: number; check: (held: readonly ModelHeld[], core: PoolCore<Fake>) => void; finally?: (survivor: PoolCore<Fake>) => void },
): Promise<void> {
  const description = native.poolCreateShared(size, poolLayout(size));
  const words = new Int32Array(description.memory);
  const threads = [11, 12, 13].map((environment) => ({
    environment,
    core: new PoolCore(words, size, environment, fakeStreamsFor(size), o.memoryLimitBytes),
    alive: true,
  }));
  const held: ModelHeld[] = [];
  const pending: Array<{ controller: AbortController; who: number }> = [];
  const check = () => {
    const indices = held.map((h) => streamIndexOf(h.lease));
    assert.equal(new Set(indices).size, indices.length, `two leases hold one stream: ${indices}`);
    assert.ok(indices.length <= size);
    o.check(held, threads[0]!.core);
  };
  const options = (budget: number | undefined) => (budget === undefined ? undefined : { memoryBytes: budget });
  try {
    for (const { kind, who, pick, budget } of steps) {
      const thread = threads[who]!;
      if (!thread.alive) {
        await tick();
        continue;
      }
      const core = thread.core;
      if (kind === 'acquire') {
        const controller = new AbortController();
        const entry = { controller, who };
        pending.push(entry);
        // An entry is gone from `pending` already when its thread died (splice(-1) would drop another's).
        const forget = () => {
          const at = pending.indexOf(entry);
          if (at >= 0) pending.splice(at, 1);
        };
        core.acquire({ signal: controller.signal, ...options(budget) }).then(
          (lease) => {
            forget();
            if (!threads[who]!.alive) return; // granted just before its thread died: its word went back
            held.push({ lease, who });
            check();
          },
          forget,
        );
      } else if (kind === 'try') {
        const lease = core.tryAcquire(options(budget));
        if (lease) held.push({ lease, who });
      } else if (kind === 'release' && held.length > 0) {
        held.splice(pick % held.length, 1)[0]!.lease.release();
      } else if (kind === 'abort' && pending.length > 0) {
        pending[pick % pending.length]!.controller.abort();
      } else if (kind === 'die' && threads.filter((t) => t.alive).length > 1) {
        // The thread stops where it is, holding and waiting; its cleanup hook gives its words back.
        thread.alive = false;
        core.stopAsIfTerminated();
        native.poolThreadExit(description.handle, thread.environment);
        for (let i = held.length - 1; i >= 0; i--) if (held[i]!.who === who) held.splice(i, 1);
        for (let i = pending.length - 1; i >= 0; i--) if (pending[i]!.who === who) pending.splice(i, 1);
      } else {
        await tick();
      }
      check();
    }
    // Everything still waiting in a live thread is served once the holders let go: nothing was lost. A memory turn
    // left by a dead thread is seen within the backstop.
    const deadline = Date.now() + 20 * BACKSTOP_MS;
    while ((held.length > 0 || pending.length > 0) && Date.now() < deadline) {
      for (const h of held.splice(0)) h.lease.release();
      await new Promise((resolve) => setTimeout(resolve, 1));
      check();
    }
    assert.deepEqual([held.length, pending.length], [0, 0], 'every waiter was served');
    const survivor = threads.find((t) => t.alive)!.core;
    assert.equal(survivor.counters().leased, 0, 'every stream is free again');
    assert.equal(survivor.counters().waiters, 0);
    o.finally?.(survivor);
    const leases = Array.from({ length: size }, (_, i) => {
      const lease = survivor.tryAcquire();
      assert.ok(lease, `stream ${i} can be leased`);
      return lease;
    });
    for (const lease of leases) lease.release();
  } finally {
    for (const t of threads) t.core.stopAsIfTerminated();
    native.poolDestroy(description.handle);
  }
}
