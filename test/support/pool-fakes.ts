// The pool policy's CPU rig: fake streams that say which stream index they are, and pool cores over them, on words
// made in JS (one thread playing several environments) or on native shared words (for workers and thread exits).
import { native } from '#library/binding/binding.js';
import { PoolCore, type PoolStreams } from '#library/pool/pool-policy.js';
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
