// Soak operations on typed-array round trips and views of device buffers: DeviceBuffer.from and toArray over every
// element type, subarray views with every kind of bound, and their invalid calls.
import { DeviceBuffer, PinnedBuffer, Stream, type TypedArrayConstructor } from 'cuda-stream-pool';

import { SoakFailure } from '../check.js';
import { firstDifference, pickInvalid, workStream, type InvalidCase, type Operation } from '../operation.js';
import { addBuffer } from './memory.js';

type TypedArrayCtor = TypedArrayConstructor & { new (length: number): ArrayBufferView & ArrayLike<number | bigint>; readonly name: string };

const CTORS: readonly TypedArrayCtor[] = [Uint8Array, Int16Array, Uint32Array, Float32Array, Float64Array, BigInt64Array] as unknown as TypedArrayCtor[];

export const bufferViewOperations: Operation[] = [
  {
    name: 'buffer.fromToArray',
    weight: 3,
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
          const buffer = DeviceBuffer.from(source, options);
          try {
            const back = await ctx.within(buffer.toArray(Ctor, options), 'toArray()');
            const at = firstDifference(new Uint8Array(back.buffer as ArrayBuffer, back.byteOffset, back.byteLength), bytes);
            if (back.constructor !== Ctor || at >= 0) {
              // Which half went wrong: the device's bytes, read again through pinned memory and a blocking wait.
              const pinned = PinnedBuffer.alloc(bytes.length);
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
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.buffers.pick(ctx.random, (b) => !b.view);
      const cases: InvalidCase[] = [
        ['DeviceBuffer.from(new Uint8Array(0))', ['range'], () => DeviceBuffer.from(new Uint8Array(0))],
        ['DeviceBuffer.from(42)', ['type'], () => DeviceBuffer.from(42 as never)],
        ['DeviceBuffer.from([1, 2])', ['type'], () => DeviceBuffer.from([1, 2] as never)],
      ];
      if (entry) {
        const b = entry.buffer;
        cases.push([`${entry.label}.toArray(Object)`, ['type'], () => b.toArray(Object as never)]);
        if (entry.buffer.byteLength % 8 !== 0) cases.push([`${entry.label}.toArray(Float64Array) (${entry.buffer.byteLength} B)`, ['value'], () => b.toArray(Float64Array as never)]);
        cases.push([`${entry.label}.subarray(1.5)`, ['type'], () => b.subarray(1.5)]);
      }
      return pickInvalid(ctx, cases);
    },
  },
  {
    name: 'buffer.subarray',
    weight: 2,
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
          const view = entry.buffer.subarray(begin, end);
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
];
