// Micro-benchmarks of streams and events, each beside the same driver calls in a native C++ loop of the same run
// (the benchmark addon, native/calls.cc): stream create+destroy, synchronize on an idle stream and after a
// short kernel, event record; and 10,000 concurrent awaits.
import { cuda, Device, Event, Stream, StreamPool } from 'cuda-stream-pool';
import { native, streamRef } from 'cuda-stream-pool/internal';
import { benchAddon } from './bench-addon.js';
import { nativeSample, RECORDED_CALLS_PER_RUN, steadySync, steadySyncBeside, summarize, targetAddedNs, targetRatio, targetUnlessRecorded, timeAsync } from './harness.js';
import type { MicroResult, Sample } from './schema.js';
import { benchKernels, benchPtx } from './kernels.js';

function inMicroseconds(sample: Sample): Sample {
  return { ...sample, median: sample.median / 1000, p10: sample.p10 / 1000, p90: sample.p90 / 1000 };
}

function row(name: string, unit: 'ns' | 'µs', value: Sample, baselineName: string, baseline: Sample): MicroResult {
  return { name, unit, value, baselineName, baseline, ratio: value.median / baseline.median, better: 'lower' };
}

/** Concurrent awaits of the 10,000-await row, spread round-robin over the streams of a pool of 32. */
const CONCURRENT_AWAITS = 10_000;

/** Milliseconds for 10,000 concurrent `stream.synchronize()` awaits on the 32 streams of a pool to be issued and all
 * settle, over `runs` runs after a warm-up. The streams first wait on an event behind a `hold` kernel that spins for at
 * least twice the time the issuing took in the warm-up (50 ms or more), so every await is pending when issued and
 * none settles on a fast path. The figure is the issuing time plus the time from the hold's end (its device time after
 * the first call) to the last await settled: the library's cost of the awaits, without the GPU's. Only runs whose gate
 * was still closed after the issuing count; none (NaN, 0 runs) where the hold does not spin. */
async function concurrentAwaits(device: Device, runs = 5): Promise<Sample> {
  const { hold } = await benchKernels(device);
  const pool = new StreamPool({ device, size: 32 });
  const gate = Stream.create({ device });
  const opened = Event.create({ device });
  const values: number[] = [];
  let holdMs = 50;
  try {
    for (let r = -1; r < runs; r++) {
      hold.launch({ grid: 1, block: 1, stream: gate }, BigInt(Math.round(holdMs * 1e6)));
      opened.record(gate);
      for (let s = 0; s < pool.size; s++) pool.getStream(s).waitEvent(opened);
      const start = process.hrtime.bigint();
      const waits: Promise<void>[] = [];
      for (let i = 0; i < CONCURRENT_AWAITS; i++) waits.push(pool.getStream(i).synchronize());
      const issuedMs = Number(process.hrtime.bigint() - start) / 1e6;
      // The gate must still be closed now, or some waits settled at once and the run measures something else (a
      // hold kernel that does not spin: no real GPU, as with the null driver).
      const held = !opened.query();
      await Promise.all(waits);
      const totalMs = Number(process.hrtime.bigint() - start) / 1e6;
      if (r < 0) holdMs = Math.max(holdMs, 2 * issuedMs);
      // After both the issuing and the hold ended, only the delivery is left to time.
      else if (held) values.push(issuedMs + Math.max(0, totalMs - Math.max(holdMs, issuedMs)));
    }
  } finally {
    await gate.synchronize();
    opened.destroy();
    gate.destroy();
    pool.destroy();
  }
  return summarize(values);
}

/** Waits in flight at once in the wake-latency row, over the 32 streams of a pool. */
const WAKE_WAITS = 1000;

/** The wake latency of waits under load: 1,000 waits in flight over the 32 streams of a pool, each behind its own
 * 50 µs kernel; the streams are held behind a gate until every wait is issued. A C++ observer thread of the benchmark
 * addon spins on each wait's completion ticket (the same word and value the library's poller reads) and stamps when
 * it is reached; the figure is, for each wait, the time from that stamp to its promise's reaction running on the JS
 * thread, in µs, over `runs` runs (every wait of every run is one value). Needs ticket markers: empty with events. */
async function wakeLatency(device: Device, runs = 3): Promise<number[]> {
  if (native.completionMarker(device.ordinal) !== 'ticket') return [];
  const { hold } = await benchKernels(device);
  const addon = benchAddon();
  const pool = new StreamPool({ device, size: 32 });
  const streams = Array.from({ length: pool.size }, (_, s) => pool.getStream(s));
  const latencies: number[] = [];
  try {
    for (let r = -1; r < runs; r++) {
      const observer = addon.wakeObserverStart(device.ordinal, WAKE_WAITS);
      // The public handle: the gate is work from outside the library, which is what reading `handle` declares (each
      // wait here follows a launch, so it gets a ticket of its own either way).
      for (const stream of streams) addon.wakeObserverHold(observer, stream.handle);
      const resolvedNs = new Float64Array(WAKE_WAITS);
      const waits: Promise<void>[] = [];
      for (let i = 0; i < WAKE_WAITS; i++) {
        const stream = streams[i % streams.length]!;
        hold.launch({ grid: 1, block: 1, stream }, 50_000n);
        waits.push(stream.synchronize().then(() => void (resolvedNs[i] = Number(process.hrtime.bigint()))));
        // None when the wait settled at once (its stream found idle): nothing to observe, and it counts for nothing.
        const ticket = native.streamLastTicket(streamRef(stream, 'synchronize'));
        if (ticket) addon.wakeObserverWatch(observer, i, ticket.address, ticket.value);
      }
      addon.wakeObserverRelease(observer);
      await Promise.all(waits);
      const seenNs = addon.wakeObserverFinish(observer);
      if (r < 0) continue; // warm-up
      for (let i = 0; i < WAKE_WAITS; i++) if (seenNs[i]! > 0) latencies.push((resolvedNs[i]! - seenNs[i]!) / 1000);
    }
  } finally {
    pool.destroy();
  }
  return latencies;
}

/** Options of {@link streamMicroBenchmarks}. */
export interface StreamMicroOptions {
  /** The device, as an ordinal. @defaultValue 0 */
  device?: number;
}

/** Measures the per-call cost of stream and event operations through the library, each beside its native C++
 * baseline from the same run (ratio = library / native, lower is better). Needs a GPU.
 * @throws {@link CudaUnavailableError} without a GPU; {@link CudaError} when the driver fails. */
export async function streamMicroBenchmarks(options: StreamMicroOptions = {}): Promise<MicroResult[]> {
  const device = Device.get(options.device ?? 0);
  const ordinal = device.ordinal;
  const addon = benchAddon();
  const results: MicroResult[] = [];

  const created = steadySyncBeside((calls) => {
    for (let i = 0; i < calls; i++) Stream.create({ device }).destroy();
  }, (calls) => addon.streamCreateDestroyLoop(ordinal, calls), { minCalls: 1000 });
  results.push(
    targetRatio(
      row('Stream.create() + destroy()', 'µs', inMicroseconds(created.library), 'cuStreamCreateWithPriority + cuStreamDestroy (C++ loop)', inMicroseconds(created.native)),
      1.2,
    ),
  );

  const stream = Stream.create({ device });
  const event = Event.create({ device });
  try {
    results.push(
      targetAddedNs(
        row(
          'await stream.synchronize() on an idle stream',
          'ns',
          await timeAsync(() => stream.synchronize(), 10_000),
          'cuStreamSynchronize on an idle stream (C++ loop)',
          nativeSample(() => addon.streamSynchronizeIdleLoop(ordinal, 10_000)),
        ),
        150,
      ),
    );

    const { empty } = await benchKernels(device);
    const ptx = benchPtx();
    // Both completion markers, measured on the same stream: the device's default (a ticket where the device has 64-bit
    // stream memory operations, which measured faster) with its target, then the other one.
    const launchAndWait = async (marker: string) =>
      row(
        `empty kernel.launch() + await stream.synchronize(), ${marker} marker`,
        'µs',
        inMicroseconds(
          await timeAsync(() => {
            empty.launch({ grid: 1, block: 1, stream });
            return stream.synchronize();
          }, 2000),
        ),
        'cuLaunchKernel + cuStreamSynchronize (C++ loop)',
        inMicroseconds(nativeSample(() => addon.kernelSynchronizeLoop(ordinal, 2000, ptx))),
      );
    const defaultMarker = native.completionMarker(ordinal);
    results.push(targetRatio(await launchAndWait(`${defaultMarker} (default)`), 1.5));
    const otherMarker = defaultMarker === 'ticket' ? 'event' : 'ticket';
    if (native.completionSetMarker(ordinal, otherMarker) === otherMarker) results.push(await launchAndWait(otherMarker));
    native.completionSetMarker(ordinal, defaultMarker);

    const recordsPerRun = cuda.submission().mode === 'deferred' ? RECORDED_CALLS_PER_RUN : 10_000;
    results.push(
      targetUnlessRecorded(
        row(
          'event.record(stream)',
          'ns',
          // Each record queues work: at most 10,000 a run, as the C++ loop makes (fewer where they are recorded), the
          // stream idle between runs.
          steadySync((calls) => {
            for (let i = 0; i < calls; i++) event.record(stream);
          }, { minCalls: recordsPerRun, maxCalls: recordsPerRun, between: () => stream.synchronizeSync() }),
          'cuEventRecord (C++ loop)',
          nativeSample(() => addon.eventRecordLoop(ordinal, 10_000), 9, 10_000),
        ),
        (result) => targetAddedNs(result, 100),
      ),
    );
  } finally {
    await stream.synchronize();
    event.destroy();
    stream.destroy();
  }

  const latencies = (await wakeLatency(device)).sort((a, b) => a - b);
  if (latencies.length > 0) {
    const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
    for (const [label, q] of [['median', 0.5], ['p99', 0.99]] as const)
      results.push({
        name: `wake latency, ${label}: a wait's work seen done by a C++ observer -> its promise resolved (${WAKE_WAITS.toLocaleString('en-US')} waits in flight on 32 streams)`,
        unit: 'µs',
        // The p99 row is one percentile: no spread of its own.
        value: q === 0.5 ? { median: at(0.5), p10: at(0.1), p90: at(0.9), runs: latencies.length } : { median: at(q), p10: at(q), p90: at(q), runs: latencies.length },
      });
  }

  const awaits = await concurrentAwaits(device);
  results.push({
    name: `${CONCURRENT_AWAITS.toLocaleString('en-US')} concurrent await stream.synchronize() on 32 pool streams, issued and all settled`,
    unit: 'ms',
    value: awaits,
    target: awaits.runs > 0 ? '≤ 30 ms' : '≤ 30 ms; not measured: the gate kernel did not hold the streams (no real GPU?)',
    met: awaits.runs > 0 ? awaits.median <= 30 : undefined,
  });
  return results;
}
