// Soak operations on the rest of the surface: devices and their memory pool, process facts, the current-stream
// scope, and settling the waits earlier steps left pending (Note [soak waits] in test/soak/context.ts).
import { completionStats, cuda, CudaError, currentStream, Device, Stream, withStream } from 'cuda-stream-pool';

import { SoakFailure } from '../check.js';
import type { Context, Pending } from '../context.js';
import { pickInvalid, workStream, type InvalidCase, type Operation } from '../operation.js';
import { releaseEverything } from './pools.js';

/** Settles pending waits (all, or the oldest `count`), checking each outcome. */
export async function settle(ctx: Context, count = ctx.pending.length): Promise<void> {
  const chosen: Pending[] = ctx.pending.splice(0, count);
  for (const pending of chosen) {
    if (pending.pool) releaseEverything(ctx); // Note [soak waits]
    const outcome = await ctx.within(pending.outcome, `${pending.label} (pending since step ${pending.step})`);
    const problem = pending.check(outcome);
    if (problem) throw new SoakFailure(`${pending.label} (pending since step ${pending.step}) ${problem}`);
  }
}

export const miscOperations: Operation[] = [
  {
    name: 'waits.settle',
    weight: 3,
    threads: 'any',
    plan(ctx) {
      if (ctx.pending.length === 0) return undefined;
      const count = ctx.random.int(1, ctx.pending.length);
      return { text: `settle ${count} of ${ctx.pending.length} pending waits`, run: () => settle(ctx, count) };
    },
  },
  {
    name: 'device.inspect',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const which = ctx.random.pick(['device', 'driver', 'memoryPool', 'liveObjects', 'completionStats', 'memoryInfo', 'synchronize', 'synchronizeSync'] as const);
      return {
        text: which === 'synchronize' || which === 'synchronizeSync' ? `Device.get(0).${which}()` : which,
        async run() {
          const device = Device.get(0);
          // A device-wide wait is refused, with the driver's own code and without touching the driver, while a graph
          // capture is open on the device in any thread (the soak's graph steps capture concurrently).
          const refusedForCapture = (error: unknown) => {
            if (error instanceof CudaError && error.code === 'CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED') return;
            throw error;
          };
          if (which === 'synchronize') return ctx.within(device.synchronize(), 'device.synchronize()').catch(refusedForCapture);
          if (which === 'synchronizeSync') {
            try {
              device.synchronizeSync();
            } catch (error) {
              refusedForCapture(error);
            }
            return;
          }
          if (which === 'memoryInfo') {
            const info = device.memoryInfo();
            if (!(info.freeBytes >= 0 && info.totalBytes >= info.freeBytes)) throw new SoakFailure(`memoryInfo(): ${JSON.stringify(info)}`);
            return;
          }
          if (which === 'device') {
            const device = Device.get(0);
            if (Device.get(0) !== device || !(Device.count() >= 1) || !device.healthy || !(device.multiprocessorCount >= 1))
              throw new SoakFailure(`Device.get(0): count ${Device.count()}, healthy ${device.healthy}`);
          } else if (which === 'driver') {
            const version = cuda.driverVersion;
            const text = cuda.driverVersionString;
            if (!cuda.available || !Number.isSafeInteger(version) || version! < 11000 || text !== `${Math.floor(version! / 1000)}.${Math.floor((version! % 1000) / 10)}`)
              throw new SoakFailure(`cuda: available ${cuda.available}, driverVersion ${version}, driverVersionString ${text}`);
          } else if (which === 'memoryPool') {
            // Each getter is its own driver read and other threads allocate in between, so used may pass the
            // reserved bytes read a moment earlier: only each value's shape is checked here.
            const pool = Device.get(0).memoryPool;
            const [used, reserved] = [pool.usedBytes, pool.reservedBytes];
            if (!(Number.isSafeInteger(used) && used >= 0 && Number.isSafeInteger(reserved) && reserved >= 0))
              throw new SoakFailure(`memoryPool: used ${used}, reserved ${reserved}`);
          } else if (which === 'liveObjects') {
            const live = cuda.liveObjects();
            for (const [key, value] of Object.entries(live))
              for (const count of Array.isArray(value) ? value : [value])
                if (!Number.isSafeInteger(count) || count < 0) throw new SoakFailure(`cuda.liveObjects().${key} is ${value}`);
          } else {
            const stats = completionStats();
            if (!(stats.processPending >= 0 && stats.delivered >= 0)) throw new SoakFailure(`completionStats(): ${JSON.stringify(stats)}`);
          }
        },
      };
    },
  },
  {
    name: 'device.invalid',
    weight: 1,
    threads: 'any',
    plan(ctx) {
      const cases: InvalidCase[] = [
        ['Device.get(-1)', ['range'], () => Device.get(-1)],
        ['Device.get(4096)', ['range'], () => Device.get(4096)],
        ['Device.get("0")', ['type'], () => Device.get('0' as never)],
        ['Device.get(0.5)', ['range'], () => Device.get(0.5)],
        ['memoryPool.releaseThresholdBytes = -1', ['range'], () => (Device.get(0).memoryPool.releaseThresholdBytes = -1)],
        ['memoryPool.trim(-1)', ['range'], () => Device.get(0).memoryPool.trim(-1)],
        ['withStream(42, fn)', ['type'], () => withStream(42 as never, () => 1)],
        ['withStream(stream, 42)', ['type'], () => withStream(Stream.perThread(), 42 as never)],
        ['currentStream(-1)', ['range'], () => currentStream(-1)],
        ['Device.get(0).synchronize({ signal: 42 })', ['type'], () => Device.get(0).synchronize({ signal: 42 as never })],
      ];
      return pickInvalid(ctx, cases, 'either');
    },
  },
  {
    name: 'memoryPool.tune',
    weight: 0.5,
    threads: 'any',
    plan(ctx) {
      const threshold = ctx.random.pick([0, 1 << 20, 64 << 20, Infinity]);
      const keep = ctx.random.pick([0, 1 << 20, 256 << 20]);
      return {
        text: `Device.get(0).memoryPool: releaseThresholdBytes = ${threshold}, trim(${keep})`,
        run() {
          const pool = Device.get(0).memoryPool;
          pool.releaseThresholdBytes = threshold;
          // Other threads may set it meanwhile: the value read back is one of those the soak sets.
          const now = pool.releaseThresholdBytes;
          if (![0, 1 << 20, 64 << 20, Infinity].includes(now)) throw new SoakFailure(`memoryPool.releaseThresholdBytes reads ${now} after it was set to ${threshold}`);
          pool.trim(keep);
        },
      };
    },
  },
  {
    name: 'scope.withStream',
    weight: 2,
    threads: 'any',
    plan(ctx) {
      const entry = workStream(ctx);
      if (!entry) return undefined;
      const across = ctx.random.chance(0.5);
      return {
        text: `withStream(${entry.label}, fn${across ? ' awaiting a tick' : ''}) and currentStream() inside and after`,
        async run() {
          const outside = currentStream();
          const inside = await ctx.within(
            Promise.resolve(
              withStream(entry.stream, async () => {
                if (across) await new Promise((resolve) => setImmediate(resolve));
                return currentStream();
              }),
            ),
            'withStream(fn)',
          );
          if (inside !== entry.stream) throw new SoakFailure(`currentStream() inside withStream(${entry.label}) is another stream`);
          if (currentStream() !== outside) throw new SoakFailure('currentStream() after withStream() is not what it was before');
        },
      };
    },
  },
];
