// Soak operations on managed (unified) memory, kept across steps in the model: allocation, kernels writing it and
// the host reading it, prefetches to the device and to the host, advice, free, every method after free, buffers
// dropped for their finalizer, and invalid calls.
import { ManagedBuffer, type ManagedAdvice } from 'cuda-stream-pool';

import { SoakFailure } from '../check.js';
import { kernels, pickInvalid, workStream, type InvalidCase, type Operation } from '../operation.js';

const ADVICE: readonly ManagedAdvice[] = ['setReadMostly', 'unsetReadMostly', 'setPreferredLocation', 'unsetPreferredLocation', 'setAccessedBy', 'unsetAccessedBy'];

export const managedOperations: Operation[] = [
  {
    name: 'managed.alloc',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      if (ctx.model.managed.full) return undefined;
      const bytes = 4 * ctx.random.size(64 * 1024);
      return {
        text: `ManagedBuffer.alloc(${bytes})`,
        run() {
          const managed = ManagedBuffer.alloc(bytes);
          if (managed.byteLength !== bytes || managed.bytes.length !== bytes) throw new SoakFailure(`ManagedBuffer.alloc(${bytes}) has ${managed.byteLength} bytes`);
          const serial = ctx.model.serial();
          ctx.model.managed.add({ serial, label: `managed#${serial}(${bytes} B)`, alive: true, managed });
        },
      };
    },
  },
  {
    name: 'managed.fillCheck',
    weight: 1.5,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.managed.pick(ctx.random);
      const module = kernels(ctx);
      const stream = workStream(ctx);
      if (!entry || !module || !stream) return undefined;
      const words = entry.managed.byteLength / 4;
      const value = ctx.random.int(0, 2 ** 32 - 1);
      const prefetch = ctx.random.chance(0.5);
      return {
        text: `${entry.label}: zero on the host,${prefetch ? ' prefetch to device 0,' : ''} fill_u32 ${value} on ${stream.label}, read on the host`,
        async run() {
          // The host writes only once the device is done with the memory: an earlier fill may still be queued.
          await ctx.within(stream.stream.synchronize(), `${stream.label}.synchronize() before the host writes`);
          entry.managed.bytes.fill(0);
          if (prefetch) entry.managed.prefetch(0, stream.stream);
          module.fill.launch({ grid: Math.ceil(words / 256), block: 256, stream: stream.stream }, entry.managed, value, words);
          await ctx.within(stream.stream.synchronize(), `${entry.label}: synchronize()`);
          const view = entry.managed.view(Uint32Array);
          const at = view.findIndex((v) => v !== value);
          if (at >= 0) throw new SoakFailure(`${entry.label} filled with ${value}: word ${at} of ${words} is ${view[at]}`);
          ctx.roundTrips++;
        },
      };
    },
  },
  {
    name: 'managed.prefetch',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.managed.pick(ctx.random);
      const stream = workStream(ctx);
      if (!entry || !stream) return undefined;
      const target = ctx.random.pick([0, 'cpu'] as const);
      return { text: `${entry.label}.prefetch(${target}, ${stream.label})`, run: () => entry.managed.prefetch(target, stream.stream) };
    },
  },
  {
    name: 'managed.advise',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.managed.pick(ctx.random);
      if (!entry) return undefined;
      const advice = ctx.random.pick(ADVICE);
      const device = ctx.random.pick([0, 'cpu', undefined] as const);
      const bytes = entry.managed.byteLength;
      const byteOffset = ctx.random.int(0, bytes - 1);
      const byteLength = ctx.random.chance(0.5) ? undefined : ctx.random.int(1, bytes - byteOffset);
      const options = { device, byteOffset, byteLength };
      return { text: `${entry.label}.advise('${advice}', ${JSON.stringify(options)})`, run: () => entry.managed.advise(advice, options) };
    },
  },
  {
    name: 'managed.free',
    weight: 0.7,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.managed.pick(ctx.random);
      if (!entry) return undefined;
      const drop = ctx.random.chance(0.25);
      return {
        text: drop ? `drop ${entry.label} (its finalizer frees it) and gc` : `${entry.label}.free() (queued work may still use it)`,
        run() {
          if (drop) {
            ctx.model.managed.drop(entry);
            ctx.gc();
            return;
          }
          entry.managed.free();
          if (!entry.managed.freed || entry.managed.bytes.length !== 0)
            throw new SoakFailure(`${entry.label} after free(): freed ${entry.managed.freed}, bytes.length ${entry.managed.bytes.length}`);
          ctx.model.managed.retire(entry);
        },
      };
    },
  },
  {
    name: 'managed.invalid',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.managed.pick(ctx.random);
      const dead = ctx.model.managed.pickDead(ctx.random);
      const cases: InvalidCase[] = [
        ['ManagedBuffer.alloc(0)', ['range'], () => ManagedBuffer.alloc(0)],
        ['ManagedBuffer.alloc("1")', ['type', 'range'], () => ManagedBuffer.alloc('1' as never)],
        ['ManagedBuffer.alloc(16, { device: 4096 })', ['range'], () => ManagedBuffer.alloc(16, { device: 4096 })],
      ];
      if (entry) {
        const n = entry.managed.byteLength;
        cases.push([`${entry.label}.advise('sometimes')`, ['value'], () => entry.managed.advise('sometimes' as never)]);
        cases.push([`${entry.label}.advise('setReadMostly', { byteOffset: ${n} })`, ['range'], () => entry.managed.advise('setReadMostly', { byteOffset: n })]);
        cases.push([`${entry.label}.prefetch('gpu')`, ['type', 'value', 'range'], () => entry.managed.prefetch('gpu' as never)]);
        cases.push([`${entry.label}.prefetch(0, 42)`, ['type'], () => entry.managed.prefetch(0, 42 as never)]);
        cases.push([`${entry.label}.view(Uint32Array, 2)`, ['range'], () => entry.managed.view(Uint32Array, 2)]);
      }
      if (dead) {
        cases.push([`${dead.label}.view() after free`, ['destroyed'], () => dead.managed.view(Uint8Array)]);
        cases.push([`${dead.label}.prefetch(0) after free`, ['destroyed'], () => dead.managed.prefetch(0)]);
        cases.push([`${dead.label}.advise() after free`, ['destroyed'], () => dead.managed.advise('setReadMostly')]);
      }
      return pickInvalid(ctx, cases);
    },
  },
];
