// The shape of a soak operation, and small helpers the operation tables share. Adding an operation means adding an
// entry to one of the tables in test/soak/operations/ (see test/soak/operations/index.ts).
import { DestroyedError, Stream } from 'cuda-stream-pool';

import type { NotSimulated } from '../support/gpu.js';
import type { ErrorKind } from './check.js';
import type { Context } from './context.js';
import type { BufferEntry, ModuleEntry, StreamEntry } from './model.js';

/** A chosen step: its description (printed and kept for failure reports before it runs) and its action. */
export interface Planned {
  text: string;
  run(): void | Promise<void>;
}

/** One kind of step. `plan` makes every random choice (so a seed replays the same steps) and returns undefined when
 * it does not apply to the model now (then another operation is drawn). Any exception from `run` other than the
 * checks' own SoakFailure fails the run: a valid call must not throw. */
export interface Operation {
  readonly name: string;
  /** How often it is drawn, relative to the others. */
  readonly weight: number;
  /** Which threads draw it. */
  readonly threads: 'main' | 'worker' | 'any';
  /** Why the simulated driver cannot run it (a key of test/support/gpu.ts's notSimulated): left out there. */
  readonly notSimulated?: NotSimulated;
  plan(ctx: Context): Planned | undefined;
}

/** An invalid call for an operation's table of them: its description, the error kinds it may get, and the call. */
export type InvalidCase = [text: string, kinds: readonly ErrorKind[], call: () => unknown];

/** Draws one of `cases` as the step: the call must throw (`how` 'throw', Context.invalid) or throw or reject
 * (`how` 'either', Context.invalidEither) a typed error of its kinds. */
export function pickInvalid(ctx: Context, cases: readonly InvalidCase[], how: 'throw' | 'either' = 'throw'): Planned {
  const [text, kinds, call] = ctx.random.pick(cases);
  return { text, run: () => (how === 'throw' ? ctx.invalid(text, kinds, call) : ctx.invalidEither(text, kinds, call)) };
}

/** A live stream entry to queue work on (any kind), or undefined. */
export function workStream(ctx: Context, filter?: (entry: StreamEntry) => boolean): StreamEntry | undefined {
  return ctx.model.streams.pick(ctx.random, filter);
}

/** A live stream entry, or this thread's per-thread default stream when the model has none. */
export function anyStream(ctx: Context): { stream: Stream; label: string } {
  const entry = workStream(ctx);
  return entry ? { stream: entry.stream, label: entry.label } : { stream: Stream.perThread(), label: 'perThread()' };
}

/** A stream to queue work on `entry` with: for a view in a worker, never a per-thread default stream. A free by the
 * owning thread orders itself after another thread's per-thread stream only once that thread recorded its use, so
 * a free racing with the worker's copy could let the memory go while the copy runs (a device fault would end the
 * soak). Undefined when no stream fits. */
export function streamFor(ctx: Context, entry: BufferEntry): { stream: Stream; label: string } | undefined {
  if (!entry.view || ctx.isMain) return anyStream(ctx);
  const s = workStream(ctx, (s) => s.kind !== 'perThread');
  return s && { stream: s.stream, label: s.label };
}

/** A live module with the test kernels, or undefined. */
export function kernels(ctx: Context): ModuleEntry | undefined {
  return ctx.model.modules.pick(ctx.random);
}

/** Bytes that depend on their position and `salt`, so misplaced or stale bytes show. */
export function pattern(length: number, salt: number): Uint8Array {
  const out = new Uint8Array(length);
  let state = salt >>> 0;
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state ^ i, 0x2c1b3c6d) + 0x297a2d39) >>> 0;
    out[i] = state >>> 24;
  }
  return out;
}

/** The index of the first byte where `a` and `b` differ, or -1 when they are equal. */
export function firstDifference(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/** Runs `fn` on a buffer; for a borrowed view, whose owner (another thread, or this one) may have freed the memory
 * meanwhile, DestroyedError is a right outcome too. */
export function onBuffer(entry: BufferEntry, fn: () => void): void {
  try {
    fn();
  } catch (error) {
    if (entry.view && error instanceof DestroyedError) return;
    throw error;
  }
}

/** A short spin on `stream` when kernels are loaded, so that work queued next is still pending for a while. */
export function spinFirst(ctx: Context, stream: Stream, ns: bigint): boolean {
  const module = kernels(ctx);
  if (!module) return false;
  module.spin.launch({ grid: 1, block: 1, stream }, ns, 0n);
  return true;
}
