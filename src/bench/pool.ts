// Micro-benchmarks of the stream pool, each beside cuStreamCreate+cuStreamDestroy timed in a C++ loop of the same run
// (benchStreamCreateDestroy in src/native/pool.cc): what a task would pay for a stream of its own.
// See Note [pool hand-out] in src/pool.ts.
import { AsyncLocalStorage } from 'node:async_hooks';

import { Device, StreamPool } from '../index.js';
import { native } from '../native.js';
import { summarize, timeAsync, timeSync, type MicroResult, type Sample } from './harness.js';

/** Options of {@link poolMicroBenchmarks}. */
export interface PoolMicroOptions {
  /** The device, as an ordinal. @defaultValue 0 */
  device?: number;
}

const BASELINE = 'cuStreamCreate+cuStreamDestroy (C++ loop)';

function nativeCreateDestroy(device: number, iterations: number, runs = 9): Sample {
  const values: number[] = [];
  for (let r = -1; r < runs; r++) {
    const ns = native.benchStreamCreateDestroy(device, iterations);
    if (r >= 0) values.push(ns);
  }
  return summarize(values);
}

function row(name: string, value: Sample, baseline: Sample, target?: string, met?: boolean): MicroResult {
  return { name, unit: 'ns', value, baselineName: BASELINE, baseline, ratio: value.median / baseline.median, better: 'lower', target, met };
}

/** 64 tasks contending for the streams of `pool` (8 of them), each doing `perTask` acquire/release pairs with a turn
 * of the event loop's microtasks while holding the lease; ns per pair over `runs` runs after a warm-up. */
async function contended(pool: StreamPool, tasks: number, perTask: number, runs = 9): Promise<Sample> {
  const values: number[] = [];
  for (let r = -1; r < runs; r++) {
    const started = process.hrtime.bigint();
    await Promise.all(
      Array.from({ length: tasks }, async () => {
        for (let i = 0; i < perTask; i++) {
          const lease = await pool.acquire();
          await null;
          lease.release();
        }
      }),
    );
    if (r >= 0) values.push(Number(process.hrtime.bigint() - started) / (tasks * perTask));
  }
  return summarize(values);
}

/** Measures the pool's per-call costs, each beside cuStreamCreate+cuStreamDestroy from a C++ loop of the same run
 * (ratio = pool / create+destroy, lower is better):
 * - `pool.getStream()` per call (target ≤ 50 ns, aim ≤ 20 ns, and ≥ 80× cheaper than create+destroy);
 * - `acquire()` + `release()` per pair, uncontended, inside an AsyncLocalStorage context (target ≤ 1 µs);
 * - `run(fn)` per call with an empty fn, uncontended (lease + scope + release);
 * - `acquire()` + `release()` per pair with 64 tasks contending for 8 streams, AsyncLocalStorage in use.
 * Needs a GPU. Creates two pools and destroys them before returning.
 * @throws {@link CudaUnavailableError} without a GPU; {@link CudaError} when the driver fails. */
export async function poolMicroBenchmarks(options: PoolMicroOptions = {}): Promise<MicroResult[]> {
  const device = Device.get(options.device ?? 0);
  const baseline = nativeCreateDestroy(device.ordinal, 2_000);
  const results: MicroResult[] = [];
  const pool = new StreamPool({ device, size: 32 });
  const eight = new StreamPool({ device, size: 8 });
  try {
    let sink = 0;
    const getStream = timeSync(() => (sink += pool.getStream().priority), 2_000_000);
    const cheaper = baseline.median / getStream.median;
    results.push(
      row('pool.getStream()', getStream, baseline, '≤ 50 ns (aim ≤ 20 ns) and ≥ 80× cheaper than create+destroy',
        getStream.median <= 50 && cheaper >= 80),
    );
    if (sink === Number.MIN_SAFE_INTEGER) console.log(sink); // keeps the calls from being optimized away

    const storage = new AsyncLocalStorage<number>();
    // The loop awaits each acquire directly: a wrapper async function per pair (as timeAsync adds) would cost one
    // more promise, which AsyncLocalStorage's promise hooks make dearer than the pair itself.
    const pair = await storage.run(1, async () => {
      const perPair: number[] = [];
      for (let run = -1; run < 9; run++) {
        const start = process.hrtime.bigint();
        for (let i = 0; i < 20_000; i++) (await pool.acquire()).release();
        if (run >= 0) perPair.push(Number(process.hrtime.bigint() - start) / 20_000);
      }
      return summarize(perPair);
    });
    results.push(row('pool.acquire() + lease.release(), uncontended', pair, baseline, '≤ 1 µs', pair.median <= 1000));
    const tryPair = storage.run(1, () => timeSync(() => pool.tryAcquire()!.release(), 20_000));
    results.push(row('pool.tryAcquire() + lease.release(), uncontended', tryPair, baseline));

    const run = await timeAsync(() => pool.run(() => undefined), 20_000);
    results.push(row('pool.run(fn), uncontended, empty fn', run, baseline));

    const busy = await storage.run(2, () => contended(eight, 64, 500));
    results.push(row('pool.acquire() + lease.release(), 64 tasks on 8 streams', busy, baseline));
  } finally {
    pool.destroy();
    eight.destroy();
  }
  return results;
}
