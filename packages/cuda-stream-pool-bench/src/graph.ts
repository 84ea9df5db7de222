// Micro-benchmarks of CUDA graphs: one GraphExec.launch() of a 3-node graph (copy in, kernel, copy out) beside the same
// three calls made one by one, both beside cuGraphLaunch of the same graph in a C++ loop of the same run
// (native/graph-baseline.cc, in the benchmark addon).
import { Device, DeviceBuffer, Graph, PinnedBuffer, Stream } from 'cuda-stream-pool';
import { benchAddon } from './bench-addon.js';
import { steadySync, summarize, targetRatio, targetUnlessRecorded } from './harness.js';
import type { MicroResult, Sample } from './schema.js';
import { benchKernels, benchPtx } from './kernels.js';

const BASELINE = 'cuGraphLaunch of the same 3-node graph (C++ loop)';
/** Bytes each copy moves: small, so that the host's cost per launch is what is measured. */
const BYTES = 4096;
/** Launches per run: few enough that the driver's queue never fills and blocks a launch. */
const ITERATIONS = 200;
const RUNS = 9;

/** Options of {@link graphMicroBenchmarks}. */
export interface GraphMicroOptions {
  /** The device, as an ordinal. @defaultValue 0 */
  device?: number;
}

/** ns per `body()` call (which queues work on `stream`) in steady state (Note [steady state] in harness.ts): at most
 * `ITERATIONS` calls per run, so that the queue never fills, the stream idle before each run, untimed. */
async function timeQueued(stream: Stream, body: () => void): Promise<Sample> {
  const sample = steadySync((calls) => {
    for (let i = 0; i < calls; i++) body();
  }, { minCalls: ITERATIONS, maxCalls: ITERATIONS, runs: RUNS, between: () => stream.synchronizeSync() });
  await stream.synchronize();
  return sample;
}

function row(name: string, value: Sample, baseline: Sample): MicroResult {
  return { name, unit: 'ns', value, baselineName: BASELINE, baseline, ratio: value.median / baseline.median, better: 'lower' };
}

/** Measures, in ns per task of 3 operations (copy 4 KiB pinned to device, empty_kernel, copy back), each beside the C++
 * loop of cuGraphLaunch from the same run (ratio = library / native, lower is better):
 * - `GraphExec.launch()` of the captured graph (target: ≤ 1.2× the C loop);
 * - `stream.copy()` + `kernel.launch()` + `stream.copy()`, the three calls the graph replaces.
 * Needs a GPU. @throws {@link CudaUnavailableError} without a GPU; {@link CudaError} when the driver fails. */
export async function graphMicroBenchmarks(options: GraphMicroOptions = {}): Promise<MicroResult[]> {
  const device = Device.get(options.device ?? 0);
  const kernels = await benchKernels(device);
  const addon = benchAddon();
  const ptx = benchPtx();
  const values: number[] = [];
  for (let r = -1; r < RUNS; r++) {
    const ns = addon.graphLaunchLoop(device.ordinal, ITERATIONS, ptx, BYTES);
    if (r >= 0) values.push(ns);
  }
  const baseline: Sample = { ...summarize(values), callsPerRun: ITERATIONS };
  using stream = Stream.create({ device });
  using buffer = DeviceBuffer.alloc(BYTES, { stream });
  using input = PinnedBuffer.alloc(BYTES);
  using output = PinnedBuffer.alloc(BYTES);
  const threeCalls = (): void => {
    stream.copy(buffer, input);
    kernels.empty.launch({ grid: 1, block: 1, stream });
    stream.copy(output, buffer);
  };
  using graph = await Graph.capture(stream, threeCalls);
  using exec = graph.instantiate();
  const launch = await timeQueued(stream, () => exec.launch(stream));
  const calls = await timeQueued(stream, threeCalls);
  return [
    targetUnlessRecorded(row('GraphExec.launch() of 3 nodes (copy in, kernel, copy out)', launch, baseline), (result) => targetRatio(result, 1.2, 'the C loop')),
    row('stream.copy() + kernel.launch() + stream.copy(), the same 3 calls', calls, baseline),
  ];
}
