// Soak operations on modules and kernels: loading the prebuilt test kernels (never the faulting one: a device fault
// is sticky for the process), programs compiled at run time, valid launches, launches refused for bad arguments,
// attributes and the dynamic shared memory limit, unload, and every method after unload.
import { DeviceBuffer, Module, Program } from 'cuda-stream-pool';

import { SoakFailure } from '../check.js';
import type { Context } from '../context.js';
import { anyStream, kernels, workStream, type InvalidCase, type Operation } from '../operation.js';

/** Loads the test kernels into the model: spin (ns: u64, stamps: ptr), empty, fill_u32 (out: ptr, value: u32, n: u32). */
export async function loadKernels(ctx: Context): Promise<void> {
  const module = await ctx.within(Module.load(ctx.ptx), 'Module.load(test kernels)');
  const serial = ctx.model.serial();
  ctx.model.modules.add({
    serial,
    label: `module#${serial}`,
    alive: true,
    module,
    spin: module.getFunction('spin', ['u64', 'ptr']),
    empty: module.getFunction('empty', []),
    fill: module.getFunction('fill_u32', ['ptr', 'u32', 'u32']),
  });
}

export const kernelOperations: Operation[] = [
  {
    name: 'module.load',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      if (ctx.model.modules.full) return undefined;
      return { text: 'Module.load(test kernels PTX)', run: () => loadKernels(ctx) };
    },
  },
  {
    name: 'kernel.launch',
    weight: 6,
    threads: 'any',
    plan(ctx) {
      const module = kernels(ctx);
      if (!module) return undefined;
      const which = ctx.random.pick(['spin', 'empty', 'fill'] as const);
      const stream = ctx.random.chance(0.8) ? workStream(ctx) : undefined; // else currentStream()
      const on = stream ? `, stream: ${stream.label}` : '';
      if (which === 'spin') {
        const ns = BigInt(ctx.random.int(1, 500)) * 1000n;
        return {
          text: `${module.label} spin ${ns / 1000n} µs${on}`,
          run: () => module.spin.launch({ grid: 1, block: 32, stream: stream?.stream }, ns, 0n),
        };
      }
      if (which === 'empty') {
        const grid = ctx.random.int(1, 64);
        return { text: `${module.label} empty grid ${grid}${on}`, run: () => module.empty.launch({ grid, block: [32, 2], stream: stream?.stream }) };
      }
      // Only this thread's own buffers: see streamFor() on views in workers.
      const buffer = ctx.model.buffers.pick(ctx.random, (b) => !b.view && b.buffer.byteLength >= 4);
      if (!buffer) return undefined;
      const n = Math.floor(buffer.buffer.byteLength / 4);
      const value = ctx.random.int(0, 2 ** 32 - 1);
      return {
        text: `${module.label} fill_u32(${buffer.label}, ${value}, ${n})${on}`,
        run: () => module.fill.launch({ grid: Math.ceil(n / 128), block: 128, stream: stream?.stream }, buffer.buffer, value, n),
      };
    },
  },
  {
    name: 'kernel.invalid',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const module = kernels(ctx);
      if (!module) return undefined;
      const { stream, label } = anyStream(ctx);
      const buffer = ctx.model.buffers.pick(ctx.random, (b) => !b.view);
      const cases: InvalidCase[] = [
        ['spin with 1 argument', ['value'], () => module.spin.launch({ grid: 1, block: 1, stream }, 1000n)],
        ['spin with a string', ['type'], () => module.spin.launch({ grid: 1, block: 1, stream }, 'x', 0n)],
        ['spin with -1 for u64', ['range'], () => module.spin.launch({ grid: 1, block: 1, stream }, -1n, 0n)],
        ['empty with grid 0', ['range'], () => module.empty.launch({ grid: 0, block: 1, stream })],
        ['empty with grid 1.5', ['range'], () => module.empty.launch({ grid: 1.5, block: 1, stream })],
        ['empty with block "x"', ['type'], () => module.empty.launch({ grid: 1, block: 'x' as never, stream })],
        ['empty with block [1, 2, 3, 4]', ['type', 'value', 'range'], () => module.empty.launch({ grid: 1, block: [1, 2, 3, 4] as never, stream })],
        ['empty with options 42', ['type'], () => module.empty.launch(42 as never)],
        ['empty with stream 42', ['type'], () => module.empty.launch({ grid: 1, block: 1, stream: 42 as never })],
        ['empty with { grd: 1 }', ['value'], () => module.empty.launch({ grd: 1, block: 1 } as never)],
        ['empty with block 4096 (the driver refuses)', ['cuda', 'range'], () => module.empty.launch({ grid: 1, block: 4096, stream })],
        ['getFunction("missing", [])', ['cuda'], () => module.module.getFunction('missing', [])],
        ['getFunction("spin", ["u64", "x"])', ['type', 'value'], () => module.module.getFunction('spin', ['u64', 'x' as never])],
        ['getFunction(42, [])', ['type'], () => module.module.getFunction(42 as never, [])],
        ['Module.load("")', ['value'], () => Module.load('')],
        ['Module.load(42)', ['type'], () => Module.load(42 as never)],
        ['maxPotentialBlockSize({ blockSizeLimit: -1 })', ['range'], () => module.spin.maxPotentialBlockSize({ blockSizeLimit: -1 })],
      ];
      if (buffer) {
        cases.push(
          [`fill_u32(${buffer.label}, 2 ** 32, 1)`, ['range'], () => module.fill.launch({ grid: 1, block: 1, stream }, buffer.buffer, 2 ** 32, 1)],
          [`fill_u32(${buffer.label}, -1, 1)`, ['range'], () => module.fill.launch({ grid: 1, block: 1, stream }, buffer.buffer, -1, 1)],
          [`fill_u32(${buffer.label}, 1.5, 1)`, ['range', 'type'], () => module.fill.launch({ grid: 1, block: 1, stream }, buffer.buffer, 1.5, 1)],
          [`fill_u32("${buffer.label}", 0, 1) as a string`, ['type'], () => module.fill.launch({ grid: 1, block: 1, stream }, 'ptr', 0, 1)],
        );
      }
      const [text, kinds, fn] = ctx.random.pick(cases);
      const rejects = text.startsWith('Module.load');
      return {
        text: `${module.label} ${text} on ${label}`,
        run: () => (rejects ? ctx.invalidAsync(text, kinds, fn() as Promise<unknown>) : ctx.invalid(text, kinds, fn)),
      };
    },
  },
  {
    name: 'kernel.inspect',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const module = kernels(ctx);
      if (!module) return undefined;
      return {
        text: `${module.label} spin.attributes, maxPotentialBlockSize()`,
        run() {
          const a = module.spin.attributes;
          if (!(a.maxThreadsPerBlock >= 1 && a.registers >= 0)) throw new Error(`attributes ${JSON.stringify(a)}`);
          const b = module.fill.maxPotentialBlockSize();
          if (!(b.blockSize >= 1 && b.minGridSize >= 1)) throw new Error(`maxPotentialBlockSize() ${JSON.stringify(b)}`);
        },
      };
    },
  },
  {
    name: 'kernel.sharedMemory',
    weight: 0.7,
    threads: 'any',
    plan(ctx) {
      const module = kernels(ctx);
      const stream = workStream(ctx);
      if (!module || !stream) return undefined;
      const bytes = ctx.random.pick([0, 1024, 48 * 1024, 64 * 1024, 96 * 1024]);
      const invalid = ctx.random.chance(0.3) ? ctx.random.pick(['negative', 'huge', 'overLaunch'] as const) : undefined;
      return {
        text: invalid ? `${module.label} empty: dynamic shared memory made invalid: ${invalid}` : `${module.label} empty.setMaxDynamicSharedMemBytes(${bytes}), launch with ${bytes} B on ${stream.label}`,
        run() {
          const kernel = module.empty;
          if (invalid === 'negative') return ctx.invalid('setMaxDynamicSharedMemBytes(-1)', ['range'], () => kernel.setMaxDynamicSharedMemBytes(-1));
          if (invalid === 'huge') return ctx.invalid('setMaxDynamicSharedMemBytes(16 MiB)', ['cuda'], () => kernel.setMaxDynamicSharedMemBytes(1 << 24));
          if (invalid === 'overLaunch') {
            kernel.setMaxDynamicSharedMemBytes(48 * 1024);
            return ctx.invalid('a launch with 64 KiB of dynamic shared memory over a 48 KiB limit', ['cuda'], () =>
              kernel.launch({ grid: 1, block: 32, dynamicSharedMemBytes: 64 * 1024, stream: stream.stream }),
            );
          }
          kernel.setMaxDynamicSharedMemBytes(bytes);
          const now = kernel.attributes.maxDynamicSharedMemBytes;
          if (now !== bytes) throw new SoakFailure(`attributes.maxDynamicSharedMemBytes is ${now} after setMaxDynamicSharedMemBytes(${bytes})`);
          kernel.launch({ grid: 2, block: 32, dynamicSharedMemBytes: bytes, stream: stream.stream });
        },
      };
    },
  },
  {
    name: 'program.compile',
    notSimulated: 'nvrtc',
    weight: 0.3,
    threads: 'any',
    plan(ctx) {
      const stream = workStream(ctx);
      if (!stream) return undefined;
      // A few values only, so that later compiles of the same program come from the compile cache.
      const value = ctx.random.pick([7, 1234, 0xdeadbeef]);
      const cache = ctx.random.chance(0.5);
      const words = ctx.random.size(4096);
      const invalid = ctx.random.chance(0.2);
      const source = `extern "C" __global__ void set_u32(unsigned* out, unsigned n) {\n  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = ${value}u;\n}\n`;
      if (invalid) return { text: 'Program.compile() of a program with a syntax error', run: () => ctx.invalidEither('Program.compile("this is not CUDA")', ['compile'], () => Program.compile('__global__ void k( {', { name: 'broken.cu' })) };
      return {
        text: `Program.compile(set_u32 = ${value}${cache ? '' : ', { cache: false }'}), launch on ${stream.label} over ${words} words, read back, unload`,
        async run() {
          const module = await ctx.within(Program.compile(source, { cache, name: 'soak.cu' }), 'Program.compile()');
          const buffer = DeviceBuffer.alloc(4 * words, { stream: stream.stream });
          try {
            module.getFunction('set_u32', ['ptr', 'u32']).launch({ grid: Math.ceil(words / 128), block: 128, stream: stream.stream }, buffer, words);
            const back = await ctx.within(buffer.toArray(Uint32Array, { stream: stream.stream }), 'compiled kernel: toArray()');
            const at = back.findIndex((v) => v !== value);
            if (at >= 0) throw new SoakFailure(`the compiled set_u32 = ${value}: word ${at} of ${words} is ${back[at]}`);
            ctx.roundTrips++;
          } finally {
            buffer.free();
            module.unload();
          }
        },
      };
    },
  },
  {
    name: 'module.unload',
    weight: 0.5,
    threads: 'any',
    plan(ctx) {
      const module = kernels(ctx);
      if (!module) return undefined;
      return {
        text: `${module.label}.unload() (launches may be queued)`,
        run() {
          module.module.unload();
          module.module.unload(); // idempotent
          if (!module.module.unloaded) throw new Error('unloaded is false after unload()');
          ctx.model.modules.retire(module);
        },
      };
    },
  },
  {
    name: 'module.afterUnload',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const module = ctx.model.modules.pickDead(ctx.random);
      if (!module) return undefined;
      const { stream, label } = anyStream(ctx);
      const method = ctx.random.pick(['launch', 'getFunction', 'attributes', 'maxPotentialBlockSize'] as const);
      return {
        text: `${module.label} (unloaded) ${method} on ${label}`,
        run() {
          const what = `${module.label} ${method} after unload`;
          switch (method) {
            case 'launch':
              return ctx.invalid(what, ['destroyed'], () => module.empty.launch({ grid: 1, block: 1, stream }));
            case 'getFunction':
              return ctx.invalid(what, ['destroyed'], () => module.module.getFunction('empty', []));
            case 'attributes':
              return ctx.invalid(what, ['destroyed'], () => module.spin.attributes);
            case 'maxPotentialBlockSize':
              return ctx.invalid(what, ['destroyed'], () => module.spin.maxPotentialBlockSize());
          }
        },
      };
    },
  },
];
