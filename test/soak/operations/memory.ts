// Soak operations on memory: device buffers (alloc, fill, copy, free, views shared across threads), pinned buffers,
// round trips whose bytes are checked, invalid sizes and offsets, use after free, and references dropped with
// copies still queued before a forced garbage collection.
import { DeviceBuffer, PinnedBuffer, Stream } from 'cuda-stream-pool';

import { SoakFailure } from '../check.js';
import type { Context } from '../context.js';
import type { BufferEntry } from '../model.js';
import { anyStream, firstDifference, kernels, onBuffer, pattern, pickInvalid, spinFirst, streamFor, workStream, type InvalidCase, type Operation } from '../operation.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/** Registers a buffer this thread allocated or attached. */
export function addBuffer(ctx: Context, buffer: DeviceBuffer, view: boolean): BufferEntry {
  const serial = ctx.model.serial();
  return ctx.model.buffers.add({ serial, label: `buffer#${serial}(${buffer.byteLength} B${view ? ', view' : ''})`, alive: true, buffer, view });
}

/** A size for a buffer: mostly small, sometimes several staging chunks. */
function bufferSize(ctx: Context): number {
  return ctx.random.chance(0.05) ? ctx.random.int(1, 8) * MiB + ctx.random.int(0, 4095) : ctx.random.size(256 * KiB);
}

type HostKind = 'Uint8Array' | 'Buffer' | 'DataView' | 'ArrayBuffer' | 'SharedArrayBuffer' | 'pinned' | 'pinned.bytes' | 'pinned.view';
const HOST_KINDS: readonly HostKind[] = ['Uint8Array', 'Buffer', 'DataView', 'ArrayBuffer', 'SharedArrayBuffer', 'pinned', 'pinned.bytes', 'pinned.view'];

/** Host memory of `length` bytes in one of the shapes copies accept, at `offset` into something larger where the
 * shape allows; `bytes` sees exactly those bytes; `free` returns any pinned memory. */
function hostMemory(kind: HostKind, length: number, offset: number): { operand: ArrayBufferLike | ArrayBufferView | PinnedBuffer; bytes: Uint8Array; free: () => void } {
  const none = () => undefined;
  switch (kind) {
    case 'Uint8Array': {
      const bytes = new Uint8Array(new ArrayBuffer(offset + length + 7), offset, length);
      return { operand: bytes, bytes, free: none };
    }
    case 'Buffer': {
      const buffer = Buffer.alloc(length);
      return { operand: buffer, bytes: new Uint8Array(buffer.buffer, buffer.byteOffset, length), free: none };
    }
    case 'DataView': {
      const memory = new ArrayBuffer(offset + length);
      return { operand: new DataView(memory, offset, length), bytes: new Uint8Array(memory, offset, length), free: none };
    }
    case 'ArrayBuffer': {
      const memory = new ArrayBuffer(length);
      return { operand: memory, bytes: new Uint8Array(memory), free: none };
    }
    case 'SharedArrayBuffer': {
      const memory = new SharedArrayBuffer(length);
      return { operand: memory, bytes: new Uint8Array(memory), free: none };
    }
    case 'pinned': {
      const pinned = PinnedBuffer.alloc(length);
      return { operand: pinned, bytes: pinned.bytes, free: () => pinned.free() };
    }
    case 'pinned.bytes': {
      const pinned = PinnedBuffer.alloc(length);
      return { operand: pinned.bytes, bytes: pinned.bytes, free: () => pinned.free() };
    }
    case 'pinned.view': {
      const pinned = PinnedBuffer.alloc(offset + length);
      const view = pinned.view(Uint8Array, offset, length);
      return { operand: view, bytes: view, free: () => pinned.free() };
    }
  }
}

export const memoryOperations: Operation[] = [
  {
    name: 'buffer.alloc',
    weight: 5,
    threads: 'any',
    plan(ctx) {
      if (ctx.model.buffers.full) return undefined;
      const size = bufferSize(ctx);
      const entry = ctx.random.chance(0.8) ? workStream(ctx) : undefined;
      return {
        text: `DeviceBuffer.alloc(${size}${entry ? `, { stream: ${entry.label} }` : ''})`,
        run() {
          const buffer = DeviceBuffer.alloc(size, entry ? { stream: entry.stream } : undefined);
          if (buffer.byteLength !== size || typeof buffer.ptr !== 'bigint' || buffer.ptr === 0n) throw new Error(`alloc gave ${buffer.byteLength} bytes at ${buffer.ptr}`);
          addBuffer(ctx, buffer, false);
        },
      };
    },
  },
  {
    name: 'buffer.fill',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.buffers.pick(ctx.random);
      const on = entry && streamFor(ctx, entry);
      if (!entry || !on) return undefined;
      const { stream, label } = on;
      // 4-byte fills need 4-byte aligned memory: a subarray that starts elsewhere takes 1-byte fills only.
      const elementSize = entry.buffer.ptr % 4n === 0n ? ctx.random.pick([1, 4] as const) : 1;
      const elements = Math.floor(entry.buffer.byteLength / elementSize);
      if (elements === 0) return undefined;
      const first = ctx.random.int(0, elements - 1);
      const count = ctx.random.int(0, elements - first);
      const value = elementSize === 1 ? ctx.random.int(0, 255) : ctx.random.int(0, 2 ** 32 - 1);
      const options = { offset: first * elementSize, byteLength: count * elementSize, elementSize };
      return {
        text: `${label}.fill(${entry.label}, ${value}, ${JSON.stringify(options)})`,
        run: () => onBuffer(entry, () => stream.fill(entry.buffer, value, options)),
      };
    },
  },
  {
    name: 'buffer.copyDeviceToDevice',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      const dst = ctx.model.buffers.pick(ctx.random);
      const overlaps = (a: BufferEntry, b: BufferEntry) => a.buffer.ptr < b.buffer.ptr + BigInt(b.buffer.byteLength) && b.buffer.ptr < a.buffer.ptr + BigInt(a.buffer.byteLength);
      const src = dst && ctx.model.buffers.pick(ctx.random, (b) => b !== dst && !overlaps(b, dst));
      const on = dst && src && (dst.view ? streamFor(ctx, dst) : streamFor(ctx, src));
      if (!dst || !src || !on) return undefined;
      const { stream, label } = on;
      const byteLength = ctx.random.int(0, Math.min(dst.buffer.byteLength, src.buffer.byteLength));
      const dstOffset = ctx.random.int(0, dst.buffer.byteLength - byteLength);
      const srcOffset = ctx.random.int(0, src.buffer.byteLength - byteLength);
      const options = { byteLength, dstOffset, srcOffset };
      return {
        text: `${label}.copy(${dst.label}, ${src.label}, ${JSON.stringify(options)})`,
        run: () => onBuffer(dst.view ? dst : src, () => stream.copy(dst.buffer, src.buffer, options)),
      };
    },
  },
  {
    name: 'buffer.roundTrip',
    weight: 6,
    threads: 'any',
    plan(ctx) {
      const length = bufferSize(ctx);
      const source = ctx.random.pick(HOST_KINDS);
      const target = ctx.random.pick(HOST_KINDS);
      const sourceOffset = ctx.random.int(0, 64);
      const targetOffset = ctx.random.int(0, 64);
      const first = workStream(ctx);
      const second = ctx.random.chance(0.4) ? workStream(ctx) : undefined;
      const salt = ctx.random.int(0, 2 ** 31);
      const spin = ctx.random.chance(0.3);
      const through = second ? `${first?.label ?? 'perThread()'} -> ${second.label} (waitStream)` : (first?.label ?? 'perThread()');
      return {
        text: `round trip ${length} B: ${source}+${sourceOffset} -> device -> ${target}+${targetOffset} on ${through}${spin ? ' behind a spin' : ''}`,
        async run() {
          const s1 = first?.stream ?? Stream.perThread();
          const s2 = second?.stream ?? s1;
          const expected = pattern(length, salt);
          const input = hostMemory(source, length, sourceOffset);
          const output = hostMemory(target, length, targetOffset);
          const a = DeviceBuffer.alloc(length, { stream: s1 });
          let b: DeviceBuffer | undefined;
          try {
            input.bytes.set(expected);
            if (spin) spinFirst(ctx, s1, 300_000n);
            s1.copy(a, input.operand);
            if (!source.startsWith('pinned')) input.bytes.fill(0); // a pageable source is read at call time
            if (s2 !== s1) {
              s2.waitStream(s1);
              b = DeviceBuffer.alloc(length, { stream: s2 });
              s2.copy(b, a);
              s2.copy(output.operand, b);
            } else {
              s1.copy(output.operand, a);
            }
            await ctx.within(s2.synchronize(), `round trip: ${s2 === s1 ? 'the' : 'the second'} stream's synchronize()`);
            const at = firstDifference(output.bytes, expected);
            if (at >= 0)
              throw new SoakFailure(`round trip of ${length} bytes (${source} -> ${target}): byte ${at} is ${output.bytes[at]}, expected ${expected[at]}`);
            ctx.roundTrips++;
          } finally {
            b?.free();
            a.free();
            input.free();
            output.free();
          }
        },
      };
    },
  },
  {
    name: 'buffer.fillCheck',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const words = ctx.random.size(64 * KiB);
      const value = ctx.random.int(0, 2 ** 32 - 1);
      const byKernel = ctx.random.chance(0.5);
      return {
        text: `fill ${words} words with ${value} by ${byKernel ? 'fill_u32 kernel' : 'stream.fill'} and read them back`,
        async run() {
          const module = byKernel ? kernels(ctx) : undefined;
          const stream = Stream.perThread();
          const buffer = DeviceBuffer.alloc(4 * words, { stream });
          const out = new Uint32Array(words);
          try {
            if (module) module.fill.launch({ grid: Math.ceil(words / 256), block: 256, stream }, buffer, value, words);
            else stream.fill(buffer, value, { elementSize: 4 });
            stream.copy(out, buffer);
            await ctx.within(stream.synchronize(), 'fill check: synchronize()');
            const at = out.findIndex((v) => v !== value);
            if (at >= 0) throw new SoakFailure(`fill of ${words} words with ${value}: word ${at} is ${out[at]}`);
            ctx.roundTrips++;
          } finally {
            buffer.free();
          }
        },
      };
    },
  },
  {
    name: 'buffer.free',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.buffers.pick(ctx.random);
      if (!entry) return undefined;
      const how = ctx.random.pick(['free', 'free on stream', 'dispose', 'asyncDispose'] as const);
      const on = how === 'free on stream' ? workStream(ctx) : undefined;
      if (how === 'free on stream' && !on) return undefined;
      return {
        text: `${entry.label}.${how === 'free on stream' ? `free({ stream: ${on!.label} })` : how}`,
        async run() {
          ctx.model.buffers.retire(entry);
          if (how === 'free') entry.buffer.free();
          else if (how === 'free on stream') entry.buffer.free({ stream: on!.stream });
          else if (how === 'dispose') entry.buffer[Symbol.dispose]();
          else await ctx.within(entry.buffer[Symbol.asyncDispose](), `${entry.label}[Symbol.asyncDispose]()`);
          entry.buffer.free(); // idempotent
          if (!entry.buffer.freed) throw new Error('freed is false after free()');
        },
      };
    },
  },
  {
    name: 'buffer.recordStream',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.buffers.pick(ctx.random);
      const stream = entry && streamFor(ctx, entry);
      if (!entry || !stream) return undefined;
      return { text: `${entry.label}.recordStream(${stream.label})`, run: () => onBuffer(entry, () => entry.buffer.recordStream(stream.stream)) };
    },
  },
  {
    name: 'buffer.afterFree',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.buffers.pickDead(ctx.random);
      if (!entry) return undefined;
      const { stream, label } = anyStream(ctx);
      const method = ctx.random.pick(['fill', 'copy to', 'copy from', 'recordStream', 'share', 'launch'] as const);
      const module = method === 'launch' ? kernels(ctx) : undefined;
      if (method === 'launch' && !module) return undefined;
      return {
        text: `${entry.label} (freed) ${method} on ${label}`,
        run() {
          const b = entry.buffer;
          const what = `${entry.label}.${method} after free`;
          const host = new Uint8Array(Math.min(16, b.byteLength));
          switch (method) {
            case 'fill':
              return ctx.invalid(what, ['destroyed'], () => stream.fill(b, 0));
            case 'copy to':
              return ctx.invalid(what, ['destroyed'], () => stream.copy(b, host));
            case 'copy from':
              return ctx.invalid(what, ['destroyed'], () => stream.copy(host, b, { byteLength: host.byteLength }));
            case 'recordStream':
              return ctx.invalid(what, ['destroyed'], () => b.recordStream(stream));
            case 'share':
              // A subarray (a view) can never be shared: ERR_INVALID_ARG_VALUE before the freed check is right too.
              return ctx.invalid(what, entry.view ? ['destroyed', 'value'] : ['destroyed'], () => b.share());
            case 'launch':
              return ctx.invalid(what, ['destroyed'], () => module!.fill.launch({ grid: 1, block: 1, stream }, b, 0, 0));
          }
        },
      };
    },
  },
  {
    name: 'buffer.invalid',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.buffers.pick(ctx.random, (b) => !b.view);
      const { stream, label } = anyStream(ctx);
      const cases: InvalidCase[] = [
        ['DeviceBuffer.alloc(0)', ['range'], () => DeviceBuffer.alloc(0)],
        ['DeviceBuffer.alloc(-4)', ['range'], () => DeviceBuffer.alloc(-4)],
        ['DeviceBuffer.alloc(1.5)', ['range'], () => DeviceBuffer.alloc(1.5)],
        ['DeviceBuffer.alloc("4")', ['type'], () => DeviceBuffer.alloc('4' as never)],
        ['DeviceBuffer.alloc(4, { stream: 42 })', ['type'], () => DeviceBuffer.alloc(4, { stream: 42 as never })],
        ['DeviceBuffer.alloc(4, { strem })', ['value'], () => DeviceBuffer.alloc(4, { strem: stream } as never)],
        ['DeviceBuffer.attach({})', ['type'], () => DeviceBuffer.attach({} as never)],
        [`${label}.copy(new Uint8Array(4), new Uint8Array(4))`, ['value'], () => stream.copy(new Uint8Array(4), new Uint8Array(4))],
        [`${label}.copy(42, new Uint8Array(4))`, ['type'], () => stream.copy(42 as never, new Uint8Array(4))],
        [`${label}.fill(new Uint8Array(4), 0)`, ['type'], () => stream.fill(new Uint8Array(4) as never, 0)],
      ];
      if (entry) {
        const n = entry.buffer.byteLength;
        const b = entry.buffer;
        const l = entry.label;
        cases.push(
          [`${label}.copy(${l}, host, { dstOffset: ${n + 1} })`, ['range'], () => stream.copy(b, new Uint8Array(1), { dstOffset: n + 1 })],
          [`${label}.copy(${l}, host of ${n + 1} B)`, ['range'], () => stream.copy(b, new Uint8Array(n + 1))],
          [`${label}.copy(host, ${l}, { byteLength: ${n + 1} })`, ['range'], () => stream.copy(new Uint8Array(n + 8), b, { byteLength: n + 1 })],
          [`${label}.copy(${l}, host, { srcOffset: -1 })`, ['range'], () => stream.copy(b, new Uint8Array(4), { srcOffset: -1 })],
          [`${label}.copy(${l}, host, { byteLength: 1.5 })`, ['range'], () => stream.copy(b, new Uint8Array(4), { byteLength: 1.5 })],
          [`${label}.copy(${l}, host, { bytelength: 1 })`, ['value'], () => stream.copy(b, new Uint8Array(4), { bytelength: 1 } as never)],
          [`${label}.copy(${l}, ${l}) (overlapping)`, ['value', 'range'], () => stream.copy(b, b)],
          [`${label}.fill(${l}, 256)`, ['range'], () => stream.fill(b, 256)],
          [`${label}.fill(${l}, -1)`, ['range'], () => stream.fill(b, -1)],
          [`${label}.fill(${l}, 0, { elementSize: 2 })`, ['type', 'value', 'range'], () => stream.fill(b, 0, { elementSize: 2 as never })],
          [`${label}.fill(${l}, 0, { offset: ${n + 1} })`, ['range'], () => stream.fill(b, 0, { offset: n + 1 })],
          [`${l}.free({ stream: 42 })`, ['type'], () => b.free({ stream: 42 as never })],
          [`${l}.recordStream(42)`, ['type'], () => b.recordStream(42 as never)],
        );
        if (n >= 8) cases.push([`${label}.fill(${l}, 0, { offset: 2, elementSize: 4 })`, ['range'], () => stream.fill(b, 0, { offset: 2, elementSize: 4 })]);
      }
      return pickInvalid(ctx, cases);
    },
  },
  {
    name: 'buffer.pendingDestination',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      if (!kernels(ctx)) return undefined;
      const length = ctx.random.size(64 * KiB);
      return {
        text: `copy ${length} B into a pageable array behind a 50 ms spin, then use that array as a copy source (refused)`,
        async run() {
          const stream = Stream.perThread();
          const buffer = DeviceBuffer.alloc(length, { stream });
          const host = new Uint8Array(length);
          try {
            // Long enough to outlast a first staging allocation (a pinned slab takes milliseconds) between the calls.
            const spinning = spinFirst(ctx, stream, 50_000_000n);
            const started = performance.now();
            stream.copy(host, buffer);
            const copyMs = performance.now() - started;
            // The refusal holds only while the copy is pending: not when no module was left to spin with, or when the
            // stream is idle already (pinning a new staging slab can take longer than the spin under memory pressure),
            // or when the call itself took most of the spin (waiting for staging that other threads held): then the
            // copy may finish between the query and the next call, and acceptance is right (a deferred-mode soak
            // seed saw a 49.6 ms call).
            if (spinning && copyMs < 25 && !stream.query())
              ctx.invalid(`a pending copy destination used as a copy source (the copy call took ${copyMs.toFixed(1)} ms)`, ['value'], () => stream.copy(buffer, host));
          } finally {
            buffer.free();
          }
          await ctx.within(stream.synchronize(), 'pending destination: synchronize()');
        },
      };
    },
  },
  {
    name: 'pinned.alloc',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      if (ctx.model.pinned.full) return undefined;
      const size = ctx.random.chance(0.1) ? ctx.random.int(1, 4) * MiB : ctx.random.size(64 * KiB);
      return {
        text: `PinnedBuffer.alloc(${size})`,
        run() {
          const pinned = PinnedBuffer.alloc(size);
          if (pinned.byteLength !== size || pinned.bytes.byteLength !== size) throw new Error(`alloc gave ${pinned.byteLength} bytes`);
          const serial = ctx.model.serial();
          ctx.model.pinned.add({ serial, label: `pinned#${serial}(${size} B)`, alive: true, pinned });
        },
      };
    },
  },
  {
    name: 'pinned.use',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.pinned.pick(ctx.random);
      const buffer = ctx.model.buffers.pick(ctx.random);
      const on = buffer && streamFor(ctx, buffer);
      if (!entry || !buffer || !on) return undefined;
      const { stream, label } = on;
      const toDevice = ctx.random.chance(0.5);
      const byteLength = ctx.random.int(0, Math.min(entry.pinned.byteLength, buffer.buffer.byteLength));
      return {
        text: `${label}.copy(${toDevice ? `${buffer.label}, ${entry.label}` : `${entry.label}, ${buffer.label}`}, { byteLength: ${byteLength} })`,
        run: () =>
          onBuffer(buffer, () =>
            toDevice ? stream.copy(buffer.buffer, entry.pinned, { byteLength }) : stream.copy(entry.pinned, buffer.buffer, { byteLength }),
          ),
      };
    },
  },
  {
    name: 'pinned.free',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.pinned.pick(ctx.random);
      if (!entry) return undefined;
      return {
        text: `${entry.label}.free() (copies may be queued)`,
        run() {
          const view = entry.pinned.view(Uint8Array);
          entry.pinned.free();
          entry.pinned.free(); // idempotent
          if (entry.pinned.bytes.byteLength !== 0 || view.byteLength !== 0) throw new Error('views of a freed pinned buffer are not detached');
          ctx.model.pinned.retire(entry);
        },
      };
    },
  },
  {
    name: 'pinned.afterFree',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.pinned.pickDead(ctx.random);
      const buffer = ctx.model.buffers.pick(ctx.random, (b) => !b.view);
      if (!entry) return undefined;
      const { stream, label } = anyStream(ctx);
      const method = buffer && ctx.random.chance(0.5) ? 'copy' : 'view';
      return {
        text: `${entry.label} (freed) ${method}${method === 'copy' ? ` into ${buffer!.label} on ${label}` : ''}`,
        run() {
          if (method === 'view') return ctx.invalid(`${entry.label}.view() after free`, ['destroyed'], () => entry.pinned.view(Uint8Array));
          ctx.invalid(`copy from ${entry.label} after free`, ['destroyed'], () => stream.copy(buffer!.buffer, entry.pinned, { byteLength: 0 }));
        },
      };
    },
  },
  {
    name: 'pinned.invalid',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.pinned.pick(ctx.random);
      const cases: InvalidCase[] = [
        ['PinnedBuffer.alloc(0)', ['range'], () => PinnedBuffer.alloc(0)],
        ['PinnedBuffer.alloc(2 ** 32)', ['range'], () => PinnedBuffer.alloc(2 ** 32)],
        ['PinnedBuffer.alloc("1")', ['type'], () => PinnedBuffer.alloc('1' as never)],
      ];
      if (entry) {
        cases.push(
          [`${entry.label}.view(Object)`, ['type'], () => entry.pinned.view(Object as never)],
          [`${entry.label}.view(Float32Array, 3)`, ['range'], () => entry.pinned.view(Float32Array, 3)],
          [`${entry.label}.view(Uint8Array, 0, ${entry.pinned.byteLength + 1})`, ['range'], () => entry.pinned.view(Uint8Array, 0, entry.pinned.byteLength + 1)],
        );
      }
      return pickInvalid(ctx, cases);
    },
  },
  {
    name: 'pinned.cache',
    weight: 0.3,
    threads: 'any',
    plan(ctx) {
      const trim = ctx.random.chance(0.3);
      return {
        text: trim ? 'PinnedBuffer.trimCache()' : 'PinnedBuffer.cacheInfo()',
        run() {
          if (trim) {
            const released = PinnedBuffer.trimCache();
            if (!Number.isSafeInteger(released) || released < 0) throw new Error(`trimCache() returned ${released}`);
            return;
          }
          const info = PinnedBuffer.cacheInfo();
          if (!(info.idleBytes >= 0 && info.totalBytes >= info.idleBytes)) throw new Error(`cacheInfo() returned ${JSON.stringify(info)}`);
        },
      };
    },
  },
  {
    name: 'gc.dropQueued',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const length = ctx.random.size(1 * MiB);
      const stream = workStream(ctx);
      const dropBuffer = ctx.model.buffers.pick(ctx.random, (b) => !b.view);
      const dropStream = ctx.random.chance(0.3) ? workStream(ctx, (s) => s.kind === 'owned' && s.borrowers.size === 0) : undefined;
      const dropEvent = ctx.random.chance(0.3) ? ctx.model.events.pick(ctx.random) : undefined;
      const dropped = [dropBuffer?.label, dropStream?.label, dropEvent?.label].filter(Boolean).join(', ');
      return {
        text: `queue copies of ${length} B on ${stream?.label ?? 'perThread()'} behind a spin, drop the arrays and buffers${dropped ? ` and ${dropped}` : ''}, gc()`,
        run() {
          const s = stream?.stream ?? Stream.perThread();
          spinFirst(ctx, s, 500_000n);
          let buffer: DeviceBuffer | undefined = DeviceBuffer.alloc(length, { stream: s });
          let pinned: PinnedBuffer | undefined = PinnedBuffer.alloc(length);
          let host: Uint8Array | undefined = new Uint8Array(length);
          s.copy(buffer, pinned);
          s.copy(host, buffer);
          if (dropBuffer) {
            s.copy(dropBuffer.buffer, pinned, { byteLength: Math.min(length, dropBuffer.buffer.byteLength) });
            ctx.model.buffers.drop(dropBuffer);
          }
          if (dropStream) ctx.model.streams.drop(dropStream);
          if (dropEvent) {
            dropEvent.event.record(s);
            ctx.model.events.drop(dropEvent);
          }
          buffer = pinned = host = undefined;
          void buffer, pinned, host;
          ctx.gc();
        },
      };
    },
  },
  {
    name: 'buffer.shareHere',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.buffers.pick(ctx.random, (b) => !b.view);
      if (!entry || ctx.model.buffers.full) return undefined;
      return {
        text: `DeviceBuffer.attach(${entry.label}.share()) in this thread`,
        run() {
          const view = DeviceBuffer.attach(entry.buffer.share());
          if (view.ptr !== entry.buffer.ptr || view.byteLength !== entry.buffer.byteLength || !view.borrowed) throw new Error('the view does not match its buffer');
          addBuffer(ctx, view, true);
        },
      };
    },
  },
  {
    name: 'buffer.attachShared',
    weight: 3,
    threads: 'worker',
    plan(ctx) {
      if (ctx.inbox.length === 0 || ctx.model.buffers.full) return undefined;
      const at = ctx.random.int(0, ctx.inbox.length - 1);
      const shared = ctx.inbox[at]!;
      const stream = ctx.random.chance(0.5) ? workStream(ctx, (s) => s.kind !== 'perThread') : undefined;
      return {
        text: `DeviceBuffer.attach(shared buffer ${shared.id}${stream ? `, { stream: ${stream.label} }` : ''})`,
        run() {
          ctx.inbox.splice(at, 1);
          try {
            addBuffer(ctx, DeviceBuffer.attach(shared, stream ? { stream: stream.stream } : undefined), true);
          } catch (error) {
            // The owner may have freed it since it was posted.
            ctx.invalid(`DeviceBuffer.attach(shared buffer ${shared.id})`, ['destroyed'], () => {
              throw error;
            });
          }
        },
      };
    },
  },
];
