// Micro-benchmarks of streams and events, each beside the same driver calls in a native C++ loop of the same run
// (src/native/bench.cc): stream create+destroy, synchronize on an idle stream and after a short kernel, event record.
// See DESIGN.md "Measuring" and issue 6, "Micro-benchmarks".
import { Device, Event, Stream } from '../index.js';
import { native } from '../native.js';
import { summarize, timeAsync, timeSync, type MicroResult, type Sample } from './harness.js';
import { benchKernels, benchPtx } from './kernels.js';

/** The native baselines: `benchNative(kind, device, iterations, ptx?)` → ns per operation (src/native/bench.cc).
 * Typed here, beside its only caller, rather than in the shared binding type. */
type NativeKind = 'streamCreateDestroy' | 'streamSynchronizeIdle' | 'kernelSynchronize' | 'eventRecord';
const benchNative = (native as unknown as { benchNative(kind: NativeKind, device: number, iterations: number, ptx?: Uint8Array): number }).benchNative;

/** Runs the native loop `runs` times after one warm-up run, as harness.timeSync does for JS. */
function nativeSample(kind: NativeKind, device: number, iterations: number, ptx?: Uint8Array, runs = 9): Sample {
  const values: number[] = [];
  for (let r = -1; r < runs; r++) {
    const ns = benchNative(kind, device, iterations, ptx);
    if (r >= 0) values.push(ns);
  }
  return summarize(values);
}

function inMicroseconds(sample: Sample): Sample {
  return { median: sample.median / 1000, p10: sample.p10 / 1000, p90: sample.p90 / 1000, runs: sample.runs };
}

function row(name: string, unit: 'ns' | 'µs', value: Sample, baselineName: string, baseline: Sample): MicroResult {
  return { name, unit, value, baselineName, baseline, ratio: value.median / baseline.median, better: 'lower' };
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
  const results: MicroResult[] = [];

  results.push(
    row(
      'Stream.create() + destroy()',
      'µs',
      inMicroseconds(timeSync(() => Stream.create({ device }).destroy(), 1000)),
      'cuStreamCreateWithPriority + cuStreamDestroy (C++ loop)',
      inMicroseconds(nativeSample('streamCreateDestroy', ordinal, 1000)),
    ),
  );

  const stream = Stream.create({ device });
  const event = Event.create({ device });
  try {
    results.push(
      row(
        'await stream.synchronize() on an idle stream',
        'ns',
        await timeAsync(() => stream.synchronize(), 10_000),
        'cuStreamSynchronize on an idle stream (C++ loop)',
        nativeSample('streamSynchronizeIdle', ordinal, 10_000),
      ),
    );

    const { empty } = await benchKernels(device);
    const ptx = new TextEncoder().encode(benchPtx());
    results.push(
      row(
        'empty kernel.launch() + await stream.synchronize()',
        'µs',
        inMicroseconds(
          await timeAsync(() => {
            empty.launch({ grid: 1, block: 1, stream });
            return stream.synchronize();
          }, 2000),
        ),
        'cuLaunchKernel + cuStreamSynchronize (C++ loop)',
        inMicroseconds(nativeSample('kernelSynchronize', ordinal, 2000, ptx)),
      ),
    );

    // Both completion markers, measured on the same stream; the faster one is the default where the device has both.
    const defaultMarker = native.completionMarker(ordinal);
    for (const kind of ['ticket', 'event'] as const) {
      if (native.completionSetMarker(ordinal, kind) !== kind) continue;
      results.push(
        row(
          `empty kernel.launch() + await stream.synchronize(), ${kind} marker`,
          'µs',
          inMicroseconds(
            await timeAsync(() => {
              empty.launch({ grid: 1, block: 1, stream });
              return stream.synchronize();
            }, 2000),
          ),
          'cuLaunchKernel + cuStreamSynchronize (C++ loop)',
          inMicroseconds(nativeSample('kernelSynchronize', ordinal, 2000, ptx)),
        ),
      );
    }
    native.completionSetMarker(ordinal, defaultMarker);

    results.push(
      row(
        'event.record(stream)',
        'ns',
        timeSync(() => event.record(stream), 10_000),
        'cuEventRecord (C++ loop)',
        nativeSample('eventRecord', ordinal, 10_000),
      ),
    );
  } finally {
    await stream.synchronize();
    event.destroy();
    stream.destroy();
  }
  return results;
}
