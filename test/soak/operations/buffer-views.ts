// Soak operations on parts of the API that newer versions add (DeviceBuffer.from, toArray and subarray,
// ManagedBuffer, Graph): each is drawn only when the library it runs against has that part, found at run time, so
// the same harness runs before and after they land. Typed by the small shapes used here.
import * as library from 'cuda-stream-pool';
import { DeviceBuffer, Stream, type Kernel } from 'cuda-stream-pool';

import { SoakFailure } from '../check.js';
import type { Context } from '../context.js';
import { firstDifference, kernels, workStream, type Operation } from '../operation.js';
import { addBuffer } from './memory.js';

type TypedArrayCtor = { new (length: number): ArrayBufferView & ArrayLike<number | bigint>; readonly BYTES_PER_ELEMENT: number; readonly name: string };

interface NewerBuffer {
  toArray?(Ctor: TypedArrayCtor, options?: { stream?: Stream }): Promise<ArrayBufferView>;
  subarray?(begin?: number, end?: number): DeviceBuffer;
}
const fromFunction = (DeviceBuffer as unknown as { from?: (source: ArrayBufferView, options?: { stream?: Stream }) => DeviceBuffer }).from;
const hasToArray = typeof (DeviceBuffer.prototype as NewerBuffer).toArray === 'function';
const hasSubarray = typeof (DeviceBuffer.prototype as NewerBuffer).subarray === 'function';

interface ManagedLike {
  readonly byteLength: number;
  readonly bytes: Uint8Array;
  prefetch(target: number | 'cpu', stream?: Stream): void;
  free(): void;
  view(Ctor: typeof Uint32Array): Uint32Array;
}
const Managed = (library as unknown as { ManagedBuffer?: { alloc(byteLength: number): ManagedLike } }).ManagedBuffer;

interface GraphLike {
  instantiate(): { launch(stream: Stream): void; destroy(): void };
  destroy(): void;
}
const Graph = (library as unknown as { Graph?: { capture(stream: Stream, fn: (stream: Stream) => unknown, options?: { mode: 'relaxed' }): Promise<GraphLike> } }).Graph;

const CTORS: readonly TypedArrayCtor[] = [Uint8Array, Int16Array, Uint32Array, Float32Array, Float64Array, BigInt64Array] as unknown as TypedArrayCtor[];

/** Reads `words` u32 of `buffer` back on `stream` and checks each is `value`. */
async function expectWords(ctx: Context, stream: Stream, buffer: DeviceBuffer, words: number, value: number, what: string): Promise<void> {
  const out = new Uint32Array(words);
  stream.copy(out, buffer, { byteLength: 4 * words });
  await ctx.within(stream.synchronize(), `${what}: synchronize()`);
  const at = out.findIndex((v) => v !== value);
  if (at >= 0) throw new SoakFailure(`${what}: word ${at} is ${out[at]}, expected ${value}`);
  ctx.roundTrips++;
}

export const newerOperations: Operation[] = [
  {
    name: 'buffer.fromToArray',
    weight: fromFunction && hasToArray ? 3 : 0,
    threads: 'any',
    plan(ctx) {
      const Ctor = ctx.random.pick(CTORS);
      const length = ctx.random.size(16 * 1024);
      const entry = ctx.random.chance(0.7) ? workStream(ctx) : undefined;
      const salt = ctx.random.int(0, 2 ** 31);
      return {
        text: `DeviceBuffer.from(${Ctor.name}(${length})${entry ? `, { stream: ${entry.label} }` : ''}).toArray(${Ctor.name})`,
        async run() {
          const source = new Ctor(length);
          const bytes = new Uint8Array(source.buffer as ArrayBuffer);
          for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + salt) & 0xff;
          const options = entry ? { stream: entry.stream } : undefined;
          const buffer = fromFunction!(source, options);
          try {
            const back = await ctx.within((buffer as unknown as NewerBuffer).toArray!(Ctor, options), 'toArray()');
            const at = firstDifference(new Uint8Array(back.buffer as ArrayBuffer, back.byteOffset, back.byteLength), bytes);
            if (back.constructor !== Ctor || at >= 0) {
              // Which half went wrong: the device's bytes, read again through pinned memory and a blocking wait.
              const pinned = library.PinnedBuffer.alloc(bytes.length);
              const check = Stream.create();
              check.copy(pinned, buffer);
              check.synchronizeSync();
              const onDevice = firstDifference(pinned.view(Uint8Array), bytes);
              const hex = (view: Uint8Array) => Buffer.from(view.subarray(0, 16)).toString('hex');
              const got = new Uint8Array(back.buffer as ArrayBuffer, back.byteOffset, back.byteLength);
              pinned.free();
              check.destroy();
              throw new SoakFailure(
                `DeviceBuffer.from/toArray of ${Ctor.name}(${length}): byte ${at} differs (expected ${hex(bytes)}, got ${hex(got)}; ` +
                  (onDevice < 0 ? 'the device holds the right bytes: the copy back is wrong)' : `the device differs at byte ${onDevice}: the copy there is wrong)`),
              );
            }
            ctx.roundTrips++;
          } finally {
            buffer.free();
          }
        },
      };
    },
  },
  {
    name: 'buffer.fromInvalid',
    weight: fromFunction && hasToArray ? 1 : 0,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.buffers.pick(ctx.random, (b) => !b.view);
      const cases: Array<[string, Parameters<Context['invalid']>[1], () => unknown]> = [
        ['DeviceBuffer.from(new Uint8Array(0))', ['range'], () => fromFunction!(new Uint8Array(0))],
        ['DeviceBuffer.from(42)', ['type'], () => fromFunction!(42 as never)],
        ['DeviceBuffer.from([1, 2])', ['type'], () => fromFunction!([1, 2] as never)],
      ];
      if (entry) {
        const b = entry.buffer as unknown as NewerBuffer;
        cases.push([`${entry.label}.toArray(Object)`, ['type'], () => b.toArray!(Object as never)]);
        if (entry.buffer.byteLength % 8 !== 0) cases.push([`${entry.label}.toArray(Float64Array) (${entry.buffer.byteLength} B)`, ['value'], () => b.toArray!(Float64Array as never)]);
        if (hasSubarray) cases.push([`${entry.label}.subarray(1.5)`, ['type'], () => b.subarray!(1.5)]);
      }
      const [text, kinds, fn] = ctx.random.pick(cases);
      return { text, run: () => ctx.invalid(text, kinds, fn) };
    },
  },
  {
    name: 'buffer.subarray',
    weight: hasSubarray ? 2 : 0,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.buffers.pick(ctx.random, (b) => !b.view);
      if (!entry || ctx.model.buffers.full) return undefined;
      const n = entry.buffer.byteLength;
      const begin = ctx.random.int(-n - 2, n + 2);
      const end = ctx.random.chance(0.2) ? undefined : ctx.random.int(-n - 2, n + 2);
      return {
        text: `${entry.label}.subarray(${begin}${end === undefined ? '' : `, ${end}`})`,
        run() {
          const view = (entry.buffer as unknown as NewerBuffer).subarray!(begin, end);
          const clamp = (at: number) => (at < 0 ? Math.max(n + at, 0) : Math.min(at, n));
          const first = clamp(begin);
          const length = Math.max(clamp(end ?? n) - first, 0);
          if (view.byteLength !== length || view.ptr !== entry.buffer.ptr + BigInt(first))
            throw new SoakFailure(`subarray(${begin}, ${end}) of ${n} bytes is ${view.byteLength} bytes at +${view.ptr - entry.buffer.ptr}; expected ${length} at +${first}`);
          // A view: its free only retires it; once its buffer is freed, DestroyedError is a right outcome.
          addBuffer(ctx, view, true);
        },
      };
    },
  },
  {
    name: 'managed.roundTrip',
    weight: Managed ? 1 : 0,
    threads: 'any',
    plan(ctx) {
      const module = kernels(ctx);
      if (!module) return undefined;
      const words = ctx.random.size(16 * 1024);
      const value = ctx.random.int(0, 2 ** 32 - 1);
      const prefetch = ctx.random.chance(0.5);
      return {
        text: `ManagedBuffer.alloc(${4 * words})${prefetch ? ', prefetch to device 0' : ''}, fill_u32 ${value}, read on the host, free, view after free`,
        async run() {
          const managed = Managed!.alloc(4 * words);
          const stream = Stream.create();
          try {
            managed.bytes.fill(0);
            if (prefetch) managed.prefetch(0, stream);
            (module.fill as Kernel).launch({ grid: Math.ceil(words / 256), block: 256, stream }, managed, value, words);
            await ctx.within(stream.synchronize(), 'managed: synchronize()');
            const view = managed.view(Uint32Array);
            const at = view.findIndex((v) => v !== value);
            if (at >= 0) throw new SoakFailure(`ManagedBuffer of ${words} words filled with ${value}: word ${at} is ${view[at]}`);
            ctx.roundTrips++;
          } finally {
            managed.free();
            stream.destroy();
          }
          ctx.invalid('ManagedBuffer.view() after free', ['destroyed'], () => managed.view(Uint32Array));
        },
      };
    },
  },
  {
    name: 'graph.captureLaunch',
    weight: Graph ? 1.5 : 0,
    threads: 'any',
    plan(ctx) {
      const module = kernels(ctx);
      if (!module) return undefined;
      const words = ctx.random.size(16 * 1024);
      const value = ctx.random.int(0, 2 ** 32 - 1);
      const launches = ctx.random.int(1, 4);
      const freeFirst = ctx.random.chance(0.3);
      return {
        text: `Graph.capture(owned non-blocking stream: fill_u32 ${value} into ${words} words, empty) x${launches}${freeFirst ? ', then free the buffer and launch again (refused)' : ''}`,
        async run() {
          // Non-blocking: legacy-stream work of other threads would invalidate a capture on a blocking stream (CUDA's
          // implicit synchronization), and the soak uses the legacy stream from every thread.
          const stream = Stream.create({ nonBlocking: true });
          const buffer = DeviceBuffer.alloc(4 * words, { stream });
          let graph: GraphLike | undefined;
          let exec: ReturnType<GraphLike['instantiate']> | undefined;
          try {
            graph = await ctx.within(
              // Relaxed: this thread's other pending steps (leases, runs, waits) go on while the capture awaits, and
              // their calls (the legacy stream, allocations) would invalidate a thread-local capture.
              Graph!.capture(stream, () => {
                module.fill.launch({ grid: Math.ceil(words / 256), block: 256 }, buffer, value, words);
                module.empty.launch({ grid: 1, block: 1 });
              }, { mode: 'relaxed' }),
              'Graph.capture()',
            );
            exec = graph.instantiate();
            for (let i = 0; i < launches; i++) exec.launch(stream);
            await expectWords(ctx, stream, buffer, words, value, 'graph launch');
            if (freeFirst) {
              buffer.free();
              ctx.invalid('launch of a graph whose buffer was freed', ['destroyed'], () => exec!.launch(stream));
            }
            exec.destroy();
            ctx.invalid('GraphExec.launch() after destroy', ['destroyed'], () => exec!.launch(stream));
          } finally {
            exec?.destroy();
            graph?.destroy();
            buffer.free();
            stream.destroy();
          }
        },
      };
    },
  },
];
