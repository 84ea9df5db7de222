// Soak operations on streams: owned, borrowed (fromHandle, legacy, per-thread), their queries and waits, destroy, and
// every method after destroy.
import { Event, Stream } from 'cuda-stream-pool';

import { mustResolve } from '../context.js';
import type { Context } from '../context.js';
import type { StreamEntry } from '../model.js';
import { pickInvalid, spinFirst, workStream, type InvalidCase, type Operation } from '../operation.js';

/** Destroys a stream entry the way its kind allows, borrowers first (a wrapper of a destroyed driver stream would
 * pass a dead handle to the driver). */
export function destroyStream(ctx: Context, entry: StreamEntry): void {
  for (const borrower of [...entry.borrowers]) destroyStream(ctx, borrower);
  entry.stream.destroy();
  ctx.model.retireStream(entry);
}

const destroyable = (s: StreamEntry) => s.kind !== 'pool' && s.kind !== 'lease';

export const streamOperations: Operation[] = [
  {
    name: 'stream.create',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      if (ctx.model.streams.full) return undefined;
      const nonBlocking = ctx.random.chance(0.8);
      const priority = ctx.random.pick([undefined, 0, -1, -5, -100, 3]);
      const options = priority === undefined ? { nonBlocking } : { nonBlocking, priority };
      return {
        text: `Stream.create(${JSON.stringify(options)})`,
        run() {
          ctx.model.addStream(Stream.create(options), 'owned');
        },
      };
    },
  },
  {
    name: 'stream.borrow',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      if (ctx.model.streams.full) return undefined;
      const which = ctx.random.int(0, 3);
      if (which === 0) {
        const lender = workStream(ctx, (s) => s.kind === 'owned');
        if (!lender) return undefined;
        return {
          text: `Stream.fromHandle(${lender.label}.handle)`,
          run() {
            const stream = Stream.fromHandle(lender.stream.handle);
            if (stream.id !== lender.stream.id) throw new Error(`fromHandle gave stream id ${stream.id}, not ${lender.stream.id}`);
            ctx.model.addStream(stream, 'borrowed', { lender });
          },
        };
      }
      const kind = which === 1 ? 'legacy' : which === 2 ? 'perThread' : 'legacy';
      const byHandle = which === 3; // fromHandle(1n): the legacy stream's own handle value
      return {
        text: byHandle ? 'Stream.fromHandle(1n) (CU_STREAM_LEGACY)' : `Stream.${kind}()`,
        run() {
          const stream = byHandle ? Stream.fromHandle(1n) : kind === 'legacy' ? Stream.legacy() : Stream.perThread();
          // legacy() and perThread() give the same object until it is destroyed: one entry per object, so that
          // destroying one entry never leaves another entry holding a destroyed wrapper.
          if (!ctx.model.streams.alive.some((s) => s.stream === stream)) ctx.model.addStream(stream, byHandle ? 'legacy' : kind);
        },
      };
    },
  },
  {
    name: 'stream.query',
    weight: 6,
    threads: 'any',
    plan(ctx) {
      const entry = workStream(ctx);
      if (!entry) return undefined;
      return {
        text: `${entry.label}.query()`,
        run() {
          const done = entry.stream.query();
          if (typeof done !== 'boolean') throw new Error(`query() returned ${String(done)}`);
        },
      };
    },
  },
  {
    name: 'stream.synchronize',
    weight: 5,
    threads: 'any',
    plan(ctx) {
      const entry = workStream(ctx);
      if (!entry) return undefined;
      const spin = ctx.random.chance(0.5) ? BigInt(ctx.random.int(20, 1000)) * 1000n : 0n;
      // A wait still pending on a borrowed wrapper would outlive its lender's destroy: fromHandle's caller keeps the
      // driver stream alive until every use is done.
      const now = ctx.random.chance(0.5) || entry.kind === 'borrowed';
      return {
        text: `${spin ? `spin ${spin / 1000n} µs, ` : ''}${entry.label}.synchronize()${now ? ' awaited' : ' pending'}`,
        async run() {
          if (spin) spinFirst(ctx, entry.stream, spin);
          const wait = entry.stream.synchronize();
          if (now) await ctx.within(wait, `${entry.label}.synchronize()`);
          else ctx.track(`${entry.label}.synchronize()`, wait, mustResolve);
        },
      };
    },
  },
  {
    name: 'stream.synchronizeSync',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = workStream(ctx);
      if (!entry) return undefined;
      return { text: `${entry.label}.synchronizeSync()`, run: () => entry.stream.synchronizeSync() };
    },
  },
  {
    name: 'stream.wait',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = workStream(ctx);
      const other = workStream(ctx);
      if (!entry || !other) return undefined;
      const byEvent = ctx.random.chance(0.5);
      return {
        text: byEvent ? `${entry.label}.waitEvent(${other.label}.recordEvent())` : `${entry.label}.waitStream(${other.label})`,
        run() {
          if (!byEvent) return entry.stream.waitStream(other.stream);
          const event = other.stream.recordEvent();
          try {
            entry.stream.waitEvent(event);
          } finally {
            event.destroy();
          }
        },
      };
    },
  },
  {
    name: 'stream.destroy',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      const entry = workStream(ctx, destroyable);
      if (!entry) return undefined;
      const spin = ctx.random.chance(0.5);
      const borrowers = entry.borrowers.size ? ` (borrowers first: ${[...entry.borrowers].map((b) => b.label).join(', ')})` : '';
      return {
        text: `${spin ? 'spin 500 µs, ' : ''}${entry.label}.destroy() with work queued${borrowers}`,
        run() {
          if (spin) spinFirst(ctx, entry.stream, 500_000n);
          destroyStream(ctx, entry);
          if (!entry.stream.destroyed) throw new Error('destroyed is false after destroy()');
          entry.stream.destroy(); // idempotent
        },
      };
    },
  },
  {
    name: 'stream.poolStreamDestroy',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const entry = workStream(ctx, (s) => s.kind === 'pool');
      if (!entry) return undefined;
      return {
        text: `${entry.label}.destroy() (a pool stream: refused)`,
        run: () => ctx.invalid(`${entry.label}.destroy()`, ['value'], () => entry.stream.destroy()),
      };
    },
  },
  {
    name: 'stream.afterDestroy',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.streams.pickDead(ctx.random);
      const live = workStream(ctx);
      if (!entry) return undefined;
      const method = ctx.random.pick(['query', 'synchronize', 'synchronizeSync', 'waitEvent', 'waitStream', 'recordEvent', 'live.waitStream'] as const);
      if ((method === 'waitStream' || method === 'live.waitStream') && !live) return undefined;
      return {
        text: `${entry.label} (destroyed).${method}()`,
        async run() {
          const s = entry.stream;
          const what = `${entry.label}.${method}() after destroy`;
          switch (method) {
            case 'query':
              return ctx.invalid(what, ['destroyed'], () => s.query());
            case 'synchronize':
              return ctx.invalidAsync(what, ['destroyed'], s.synchronize());
            case 'synchronizeSync':
              return ctx.invalid(what, ['destroyed'], () => s.synchronizeSync());
            case 'waitEvent': {
              const event = Event.create();
              try {
                return ctx.invalid(what, ['destroyed'], () => s.waitEvent(event));
              } finally {
                event.destroy();
              }
            }
            case 'waitStream':
              return ctx.invalid(what, ['destroyed'], () => s.waitStream(live!.stream));
            case 'recordEvent':
              return ctx.invalid(what, ['destroyed'], () => s.recordEvent());
            case 'live.waitStream':
              return ctx.invalid(`${live!.label}.waitStream(${entry.label} destroyed)`, ['destroyed'], () => live!.stream.waitStream(s));
          }
        },
      };
    },
  },
  {
    name: 'stream.invalid',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      const live = workStream(ctx);
      const cases: InvalidCase[] = [
        ['Stream.create({ nonblocking: true })', ['value'], () => Stream.create({ nonblocking: true } as never)],
        ['Stream.create({ priority: 1.5 })', ['range'], () => Stream.create({ priority: 1.5 })],
        ['Stream.create({ nonBlocking: 1 })', ['type'], () => Stream.create({ nonBlocking: 1 as never })],
        ['Stream.create({ device: 4096 })', ['range'], () => Stream.create({ device: 4096 })],
        ['Stream.create({ device: "0" })', ['type'], () => Stream.create({ device: '0' as never })],
        ['Stream.create(42)', ['type'], () => Stream.create(42 as never)],
        ['Stream.fromHandle(5)', ['type'], () => Stream.fromHandle(5 as never)],
        ['Stream.fromHandle(0n)', ['value'], () => Stream.fromHandle(0n)],
        ['Stream.fromHandle(-1n)', ['value'], () => Stream.fromHandle(-1n)],
        ['Stream.legacy(-1)', ['range'], () => Stream.legacy(-1)],
      ];
      if (live) {
        cases.push(
          [`${live.label}.waitEvent({})`, ['type'], () => live.stream.waitEvent({} as never)],
          [`${live.label}.waitStream(42)`, ['type'], () => live.stream.waitStream(42 as never)],
          [`${live.label}.recordEvent("event")`, ['type', 'destroyed'], () => live.stream.recordEvent('event' as never)],
        );
      }
      return pickInvalid(ctx, cases);
    },
  },
  {
    name: 'stream.synchronizeAbort',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      const entry = workStream(ctx);
      if (!entry) return undefined;
      const variant = ctx.random.pick(['aborted', 'later', 'bad-signal', 'bad-key'] as const);
      return {
        text: `${entry.label}.synchronize({ signal }) ${variant}`,
        async run() {
          const what = `${entry.label}.synchronize() ${variant}`;
          if (variant === 'bad-signal') return ctx.invalidAsync(what, ['type'], entry.stream.synchronize({ signal: 42 as never }));
          if (variant === 'bad-key') return ctx.invalidAsync(what, ['value'], entry.stream.synchronize({ sigal: undefined } as never));
          const reason = new Error(`soak abort at step ${ctx.step}`);
          if (variant === 'aborted') {
            const outcome = await ctx.within(entry.stream.synchronize({ signal: AbortSignal.abort(reason) }).then(() => 'resolved', (e: unknown) => e), what);
            if (outcome !== reason) throw new Error(`${what} settled with ${String(outcome)}, not the signal's reason`);
            return;
          }
          const controller = new AbortController();
          spinFirst(ctx, entry.stream, 2_000_000n);
          const wait = entry.stream.synchronize({ signal: controller.signal });
          controller.abort(reason);
          // Settled now by the abort, or already done when there were no kernels to spin.
          const outcome = await ctx.within(wait.then(() => 'resolved', (e: unknown) => e), what);
          if (outcome !== reason && outcome !== 'resolved') throw new Error(`${what} settled with ${String(outcome)}, not the signal's reason`);
        },
      };
    },
  },
];
