// Soak operations on events: create, record, query, waits (awaited, pending, blocking), elapsed time, destroy, and
// every method after destroy.
import { CudaError, Event } from 'cuda-stream-pool';

import { mustResolve } from '../context.js';
import { spinFirst, workStream, type Operation } from '../operation.js';

export const eventOperations: Operation[] = [
  {
    name: 'event.create',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      if (ctx.model.events.full) return undefined;
      const timing = ctx.random.chance(0.5);
      const blockingSync = ctx.random.chance(0.3);
      return {
        text: `Event.create({ timing: ${timing}, blockingSync: ${blockingSync} })`,
        run() {
          const event = Event.create({ timing, blockingSync });
          const serial = ctx.model.serial();
          ctx.model.events.add({ serial, label: `event#${serial}`, alive: true, event, timing, recorded: false });
        },
      };
    },
  },
  {
    name: 'event.record',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.events.pick(ctx.random);
      const stream = workStream(ctx);
      if (!entry || !stream) return undefined;
      const spin = ctx.random.chance(0.3);
      return {
        text: `${spin ? `spin 200 µs on ${stream.label}, ` : ''}${entry.label}.record(${stream.label})`,
        run() {
          if (spin) spinFirst(ctx, stream.stream, 200_000n);
          if (entry.event.record(stream.stream) !== entry.event) throw new Error('record() did not return the event');
          entry.recorded = true;
        },
      };
    },
  },
  {
    name: 'event.wait',
    weight: 4,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.events.pick(ctx.random);
      if (!entry) return undefined;
      const how = ctx.random.pick(['query', 'synchronize', 'pending', 'synchronizeSync'] as const);
      return {
        text: `${entry.label}.${how === 'pending' ? 'synchronize() pending' : `${how}()`}`,
        async run() {
          const what = `${entry.label}.${how}()`;
          if (how === 'query') {
            if (typeof entry.event.query() !== 'boolean') throw new Error(`${what} did not return a boolean`);
          } else if (how === 'synchronize') await ctx.within(entry.event.synchronize(), what);
          else if (how === 'pending') ctx.track(what, entry.event.synchronize(), mustResolve);
          else entry.event.synchronizeSync();
        },
      };
    },
  },
  {
    name: 'event.elapsed',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const start = ctx.model.events.pick(ctx.random);
      const end = ctx.model.events.pick(ctx.random);
      if (!start || !end) return undefined;
      const valid = start.timing && end.timing && start.recorded && end.recorded;
      return {
        text: `Event.elapsedMs(${start.label}, ${end.label})${valid ? '' : ' (refused: timing off or never recorded)'}`,
        run() {
          if (!valid) return ctx.invalid(`Event.elapsedMs(${start.label}, ${end.label})`, ['value'], () => Event.elapsedMs(start.event, end.event));
          try {
            const ms = Event.elapsedMs(start.event, end.event);
            if (!Number.isFinite(ms)) throw new Error(`elapsedMs returned ${ms}`);
          } catch (error) {
            // The one place NOT_READY is an error: either event may still be pending.
            if (!(error instanceof CudaError) || !String(error.name + error.message + (error as { code: unknown }).code).includes('NOT_READY')) throw error;
          }
        },
      };
    },
  },
  {
    name: 'event.destroy',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.events.pick(ctx.random);
      if (!entry) return undefined;
      return {
        text: `${entry.label}.destroy()`,
        run() {
          entry.event.destroy();
          entry.event.destroy(); // idempotent
          if (!entry.event.destroyed) throw new Error('destroyed is false after destroy()');
          ctx.model.events.retire(entry);
        },
      };
    },
  },
  {
    name: 'event.afterDestroy',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      const entry = ctx.model.events.pickDead(ctx.random);
      const stream = workStream(ctx);
      if (!entry) return undefined;
      const method = ctx.random.pick(['record', 'query', 'synchronize', 'synchronizeSync', 'stream.waitEvent', 'elapsedMs'] as const);
      if ((method === 'record' || method === 'stream.waitEvent') && !stream) return undefined;
      return {
        text: `${entry.label} (destroyed) ${method}`,
        async run() {
          const e = entry.event;
          const what = `${entry.label}.${method}() after destroy`;
          switch (method) {
            case 'record':
              return ctx.invalid(what, ['destroyed'], () => e.record(stream!.stream));
            case 'query':
              return ctx.invalid(what, ['destroyed'], () => e.query());
            case 'synchronize':
              return ctx.invalidAsync(what, ['destroyed'], e.synchronize());
            case 'synchronizeSync':
              return ctx.invalid(what, ['destroyed'], () => e.synchronizeSync());
            case 'stream.waitEvent':
              return ctx.invalid(`${stream!.label}.waitEvent(${entry.label} destroyed)`, ['destroyed'], () => stream!.stream.waitEvent(e));
            case 'elapsedMs':
              return ctx.invalid(what, ['destroyed'], () => Event.elapsedMs(e, e));
          }
        },
      };
    },
  },
  {
    name: 'event.invalid',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const live = ctx.model.events.pick(ctx.random);
      const cases: Array<[string, Parameters<typeof ctx.invalid>[1], () => unknown]> = [
        ['Event.create({ timing: "yes" })', ['type'], () => Event.create({ timing: 'yes' as never })],
        ['Event.create({ blocking: true })', ['value'], () => Event.create({ blocking: true } as never)],
        ['Event.create({ device: -1 })', ['range'], () => Event.create({ device: -1 })],
        ['Event.elapsedMs(42, 42)', ['type'], () => Event.elapsedMs(42 as never, 42 as never)],
      ];
      if (live) {
        cases.push(
          [`${live.label}.record(42)`, ['type'], () => live.event.record(42 as never)],
          [`${live.label}.synchronize({ signal: "x" })`, ['type'], () => live.event.synchronize({ signal: 'x' as never }).catch((e: unknown) => { throw e; })],
        );
      }
      const [text, kinds, fn] = ctx.random.pick(cases);
      if (text.includes('synchronize')) return { text, run: () => ctx.invalidAsync(text, kinds, fn() as Promise<unknown>) };
      return { text, run: () => ctx.invalid(text, kinds, fn) };
    },
  },
];
