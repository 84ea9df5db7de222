// Micro-benchmarks of the stream pool, beside cuStreamCreateWithPriority+cuStreamDestroy timed in a C++ loop of the
// same run (the benchmark addon): what a task would pay for a stream of its own; and beside plain-JS baselines of the
// same run where the pool's cost is JS work (the hand-out, the scope of run). Also the CPU an idle process with live
// pools uses. See Note [pool hand-out] in packages/cuda-stream-pool/src/pool/pool.ts.
import { AsyncLocalStorage } from 'node:async_hooks';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { Device, StreamPool, type Stream } from 'cuda-stream-pool';
import { benchAddon } from './bench-addon.js';
import { libraryUrl } from './package.js';
import { nativeSample, steadyAsync, steadySync, summarize } from './harness.js';
import type { MicroResult, Sample } from './schema.js';

/** Options of {@link poolMicroBenchmarks}. */
export interface PoolMicroOptions {
  /** The device, as an ordinal. @defaultValue 0 */
  device?: number;
}

const BASELINE = 'cuStreamCreateWithPriority+cuStreamDestroy (C++ loop)';

function row(name: string, value: Sample, baseline: Sample, target?: string, met?: boolean, baselineName = BASELINE): MicroResult {
  return { name, unit: 'ns', value, baselineName, baseline, ratio: value.median / baseline.median, better: 'lower', target, met };
}

const execute = promisify(execFile);

/** Percent of one CPU core that a process with live pools uses while idle: a fresh process creates a pool of 32 and
 * the device's default pool, waits for real work (a 256 MiB fill) on a stream of each, so that every thread the
 * library starts for waiting is running, lets 200 ms pass, then reads process.cpuUsage() (user + system time of all
 * its threads) over 1 s of idling. Over `runs` processes. */
async function idleCpuSample(device: number, runs: number): Promise<Sample> {
  const index = libraryUrl();
  const script = `
    const { DeviceBuffer, StreamPool } = await import(${JSON.stringify(index)});
    const pool = new StreamPool({ device: ${device}, size: 32 });
    const shared = StreamPool.default(${device});
    for (const stream of [pool.getStream(), shared.getStream()]) {
      const buffer = DeviceBuffer.alloc(256 * 2 ** 20, { stream });
      stream.fill(buffer, 0);
      await stream.synchronize();
      buffer.free();
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    const before = process.cpuUsage();
    const start = process.hrtime.bigint();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const used = process.cpuUsage(before);
    const wallUs = Number(process.hrtime.bigint() - start) / 1000;
    pool.destroy();
    console.log(JSON.stringify({ percent: (100 * (used.user + used.system)) / wallUs }));
    process.exit(0);`;
  const values: number[] = [];
  for (let r = 0; r < runs; r++) {
    const { stdout } = await execute(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000 });
    values.push((JSON.parse(stdout.trim().split('\n').pop()!) as { percent: number }).percent);
  }
  return summarize(values);
}

/** What AsyncLocalStorage (which pool.run uses for currentStream()) adds to every await of a process once it is in
 * use: promise hooks on Node 20 and 22, nothing on Node 24 (async context frames). Measured in a fresh process, since
 * this one used it already: ns per await of a settled promise, before and after, over 9 runs of 200,000. */
async function asyncContextTax(): Promise<{ before: Sample; after: Sample }> {
  const script = `
    const { AsyncLocalStorage } = await import('node:async_hooks');
    const settled = Promise.resolve();
    const sample = async () => {
      const values = [];
      for (let run = -1; run < 9; run++) {
        const start = process.hrtime.bigint();
        for (let i = 0; i < 200000; i++) await settled;
        if (run >= 0) values.push(Number(process.hrtime.bigint() - start) / 200000);
      }
      return values;
    };
    const before = await sample();
    await new AsyncLocalStorage().run(0, async () => await settled);
    console.log(JSON.stringify({ before, after: await sample() }));`;
  const { stdout } = await execute(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000 });
  const { before, after } = JSON.parse(stdout.trim().split('\n').pop()!) as { before: number[]; after: number[] };
  return { before: { ...summarize(before), callsPerRun: 200_000 }, after: { ...summarize(after), callsPerRun: 200_000 } };
}

/** `tasks` tasks contending for the streams of `pool` (8 of them), each doing its share of a run's acquire/release
 * pairs with a turn of the event loop's microtasks while holding the lease; ns per pair in steady state (Note [steady
 * state] in harness.ts), at least `tasks × perTask` pairs per run (each task's share rounded up: fewer than `tasks`
 * extra pairs in a run of thousands). */
function contended(pool: StreamPool, tasks: number, perTask: number): Promise<Sample> {
  return steadyAsync(async (calls) => {
    const each = Math.ceil(calls / tasks);
    await Promise.all(
      Array.from({ length: tasks }, async () => {
        for (let i = 0; i < each; i++) {
          const lease = await pool.acquire();
          await null;
          lease.release();
        }
      }),
    );
  }, { minCalls: tasks * perTask });
}

/** Measures the pool's per-call costs beside cuStreamCreateWithPriority+cuStreamDestroy from a C++ loop of the same
 * run, or beside a plain-JS baseline of the same run where named (ratio = pool / baseline, lower is better):
 * - `pool.getStream()` per call (target ≤ 50 ns, aim ≤ 20 ns, and ≥ 80× cheaper than create+destroy);
 * - `acquire()` + `release()` per pair, uncontended, inside an AsyncLocalStorage context (target ≤ 1 µs);
 * - `run(fn)` per call with an empty fn, uncontended (lease + scope + release);
 * - `tryAcquire()` + `release()` per pair (target ≤ 250 ns), and the same reading `lease.stream` (its wrapper made);
 * - `acquire()` + `release()` per pair with 64 tasks contending for 8 streams, AsyncLocalStorage in use.
 * - `pool.getStream()` beside a plain JS round-robin over a SharedArrayBuffer counter (target ≤ 2×);
 * - `run(fn)` beside `acquire()` + `release()` awaited the same way: the cost of `currentStream()` scoping;
 * - the CPU an idle process with live pools uses over 1 s (target ≤ 1 % of a core).
 * Every loop is measured in steady state (Note [steady state] in harness.ts). Needs a GPU. Creates two pools and destroys them before returning; the idle-CPU row runs 3 child processes.
 * @throws {@link CudaUnavailableError} without a GPU; {@link CudaError} when the driver fails. */
export async function poolMicroBenchmarks(options: PoolMicroOptions = {}): Promise<MicroResult[]> {
  const device = Device.get(options.device ?? 0);
  const ordinal = device.ordinal;
  const addon = benchAddon();
  const baseline = nativeSample(() => addon.streamCreateDestroyLoop(ordinal, 2_000), 9, 2_000);
  const results: MicroResult[] = [];
  const pool = new StreamPool({ device, size: 32 });
  const eight = new StreamPool({ device, size: 8 });
  try {
    // Each loop is written out where it is measured (Note [steady state] in harness.ts): V8 optimizes the loop with
    // the call inlined, as it would a user's loop.
    let sink = 0;
    const getStream = steadySync((calls) => {
      for (let i = 0; i < calls; i++) sink += pool.getStream().priority;
    }, { minCalls: 100_000 });
    const cheaper = baseline.median / getStream.median;
    results.push(
      row('pool.getStream()', getStream, baseline, '≤ 50 ns (aim ≤ 20 ns) and ≥ 80× cheaper than create+destroy',
        getStream.median <= 50 && cheaper >= 80),
    );
    // The same pick written plainly in JS, over the pool's own streams: what the hand-out costs beyond the counter.
    const counter = new Int32Array(new SharedArrayBuffer(4));
    const streams: Stream[] = Array.from({ length: pool.size }, (_, i) => pool.getStream(i));
    const size = streams.length;
    const roundRobin = steadySync((calls) => {
      for (let i = 0; i < calls; i++) sink += streams[(Atomics.add(counter, 0, 1) >>> 0) % size]!.priority;
    }, { minCalls: 100_000 });
    const handOut = getStream.median / roundRobin.median;
    results.push(
      row('pool.getStream(), beside a plain JS pick', getStream, roundRobin, '≤ 2× the plain JS pick', handOut <= 2,
        'streams[Atomics.add(counter) % size] over a SharedArrayBuffer (JS loop)'),
    );
    if (sink === Number.MIN_SAFE_INTEGER) console.log(sink); // keeps the calls from being optimized away

    const tax = await asyncContextTax();
    results.push(
      row('await of a settled promise once AsyncLocalStorage is in use (pool.run), beside the same before', tax.after,
        tax.before, undefined, undefined, 'await of a settled promise before any AsyncLocalStorage use (JS loop)'),
    );

    const storage = new AsyncLocalStorage<number>();
    // The loop awaits each acquire directly: a wrapper async function per pair would cost one more promise, which
    // AsyncLocalStorage's promise hooks make dearer than the pair itself.
    const pair = await storage.run(1, () =>
      steadyAsync(async (calls) => {
        for (let i = 0; i < calls; i++) (await pool.acquire()).release();
      }, { minCalls: 10_000 }),
    );
    results.push(row('pool.acquire() + lease.release(), uncontended', pair, baseline, '≤ 1 µs', pair.median <= 1000));
    const tryPair = storage.run(1, () =>
      steadySync((calls) => {
        for (let i = 0; i < calls; i++) pool.tryAcquire()!.release();
      }, { minCalls: 10_000 }),
    );
    results.push(row('pool.tryAcquire() + lease.release(), uncontended', tryPair, baseline, '≤ 250 ns', tryPair.median <= 250));
    // A lease whose stream is read, as every real use does: the lease's own stream wrapper is made.
    const tryStream = storage.run(1, () =>
      steadySync((calls) => {
        for (let i = 0; i < calls; i++) {
          const lease = pool.tryAcquire()!;
          sink += lease.stream.priority;
          lease.release();
        }
      }, { minCalls: 10_000 }),
    );
    results.push(row('pool.tryAcquire() + lease.stream + lease.release(), uncontended', tryStream, baseline));

    const scoped = await steadyAsync(async (calls) => {
      for (let i = 0; i < calls; i++) await pool.run(() => undefined);
    }, { minCalls: 10_000 });
    results.push(row('pool.run(fn), uncontended, empty fn', scoped, baseline));
    // The same lease awaited the same way (one async call per iteration), without the scope: what currentStream()
    // scoping adds to a task.
    const leased = await steadyAsync(async (calls) => {
      for (let i = 0; i < calls; i++) await (async () => (await pool.acquire()).release())();
    }, { minCalls: 10_000 });
    results.push(
      row('pool.run(fn), empty fn, beside acquire() + release()', scoped, leased, undefined, undefined,
        'await pool.acquire() then lease.release() in an async function (JS loop)'),
    );

    const busy = await storage.run(2, () => contended(eight, 64, 500));
    results.push(row('pool.acquire() + lease.release(), 64 tasks on 8 streams', busy, baseline));
  } finally {
    pool.destroy();
    eight.destroy();
  }
  const idle = await idleCpuSample(ordinal, 3);
  results.push({ name: 'CPU of an idle process with live pools, over 1 s', unit: '%', value: idle, target: '≤ 1 % of a core', met: idle.median <= 1 });
  return results;
}
