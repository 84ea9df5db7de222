// `bench micro`'s partition group: small latency-critical tasks beside a batch load that fills the GPU, with and
// without device partitions (green contexts). The latency tasks' p99 on a partition of their own is compared with
// their p99 on an idle GPU (target ≤ 1.5×), the same tasks sharing the whole device with the load are shown beside it,
// and the batch load's throughput on the rest of the device is compared with its throughput on all of it.
import { Device, DeviceBuffer, Stream, type DevicePartition, type Kernel } from 'cuda-stream-pool';
import { benchKernels, FMA_BLOCK } from './kernels.js';
import { summarize } from './harness.js';
import type { MicroResult, Sample } from './schema.js';

/** Options of {@link partitionMicroBenchmarks}. */
export interface PartitionMicroOptions {
  /** The device, as an ordinal. @defaultValue 0 */
  device?: number;
}

/** Multiprocessors of the latency tasks' partition. */
const LATENCY_MULTIPROCESSORS = 16;
/** A latency task: fma_steps over 16 blocks of 256 elements, 2,000 steps (tens of µs on one multiprocessor each). */
const TASK_ELEMENTS = 16 * FMA_BLOCK;
const TASK_STEPS = 2000;
/** Latency tasks per measurement, at least (the p99 is the 10th slowest of 1,000). */
const TASKS = 1000;
/** How long the batch load is measured, at least: the latency tasks beside it go on as long. */
const LOAD_MS = 2000;
/** The batch load: streams, each running kernels of 64 blocks per multiprocessor and 20,000 steps back to back. */
const BATCH_STREAMS = 4;
const BATCH_STEPS = 20_000;
/** The target: the latency tasks' p99 beside the load, on their partition, at most this many times their idle p99. */
const TARGET = 1.5;

/** The partition group's reason not to run on device `ordinal` (default 0), or undefined when it can: a device whose
 * driver cannot split it or cannot make a stream on a partition (the null driver splits, then refuses the stream), or
 * the simulated driver, which runs kernels on the CPU, where the batch load would take hours. Splits the device, as
 * the group does (once per process). */
export function partitionSkipReason(ordinal = 0): string | undefined {
  try {
    const device = Device.get(ordinal);
    if (device.name.startsWith('Simulated GPU'))
      return `${device.name} runs kernels on the CPU: the batch load (${BATCH_STREAMS} streams of kernels with 64 blocks per multiprocessor) would take hours`;
    const [mine] = device.partitions ?? device.partition([LATENCY_MULTIPROCESSORS]);
    Stream.create({ partition: mine! }).destroy();
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

function microseconds(sample: Sample): Sample {
  return { ...sample, median: sample.median / 1000, p10: sample.p10 / 1000, p90: sample.p90 / 1000 };
}

/** The times of latency tasks on `stream`, each launched and awaited in turn (after 50 not counted), in ns: their
 * summary and their p99. `TASKS` of them; with `forMs`, as many as `forMs` milliseconds take, and at least 100. */
async function latency(kernel: Kernel, stream: Stream, data: DeviceBuffer, forMs = 0): Promise<{ sample: Sample; p99: number }> {
  const times: number[] = [];
  const until = process.hrtime.bigint() + BigInt(forMs) * 1_000_000n;
  const least = forMs > 0 ? 100 : TASKS;
  for (let i = -50; i < least || (forMs > 0 && process.hrtime.bigint() < until); i++) {
    const start = process.hrtime.bigint();
    kernel.launch({ grid: TASK_ELEMENTS / FMA_BLOCK, block: FMA_BLOCK, stream }, data, TASK_ELEMENTS, TASK_STEPS, 1.0001, 0.5);
    await stream.synchronize();
    if (i >= 0) times.push(Number(process.hrtime.bigint() - start));
  }
  times.sort((a, b) => a - b);
  return { sample: summarize(times), p99: times[Math.floor(times.length * 0.99)]! };
}

/** The batch load on `streams` while `during` runs: kernels kept queued two deep on each stream. Returns `during`'s
 * result and the load's throughput in kernels per second. */
async function underLoad<T>(kernel: Kernel, streams: Stream[], data: DeviceBuffer, blocks: number, during: () => Promise<T>): Promise<{ result: T; kernelsPerSecond: number }> {
  let running = true;
  let kernels = 0;
  const feed = async (stream: Stream) => {
    while (running) {
      for (let k = 0; k < 2; k++) kernel.launch({ grid: blocks, block: FMA_BLOCK, stream }, data, blocks * FMA_BLOCK, BATCH_STEPS, 1.0001, 0.5);
      await stream.synchronize();
      kernels += 2;
    }
  };
  // Warm up: the load fills the device before the measurement starts.
  const feeders = streams.map(feed);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const before = kernels;
  const start = process.hrtime.bigint();
  const result = await during();
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const done = kernels - before;
  running = false;
  await Promise.all(feeders);
  // Kernels are counted in pairs as their waits settle: at most 2 per stream off over the whole window.
  return { result, kernelsPerSecond: done / seconds };
}

/** Measures the latency tasks and the batch load as the file header says. Splits device 0's multiprocessors into
 * 16 and the rest (once per process). Needs a GPU whose driver has green contexts; takes about 10 seconds (the load is measured 2 s with and 2 s without partitions).
 * @throws {@link UnsupportedError} without partitions; {@link CudaError} when the driver fails. */
export async function partitionMicroBenchmarks(options: PartitionMicroOptions = {}): Promise<MicroResult[]> {
  const device = Device.get(options.device ?? 0);
  const [mine, rest] = (device.partitions ?? device.partition([LATENCY_MULTIPROCESSORS])) as [DevicePartition, DevicePartition];
  const { fmaSteps } = await benchKernels(device);
  const blocks = 64 * device.multiprocessorCount;
  const onPartition = Stream.create({ partition: mine });
  const onDevice = Stream.create({ device });
  const batchOnRest = Array.from({ length: BATCH_STREAMS }, () => Stream.create({ partition: rest }));
  const batchOnDevice = Array.from({ length: BATCH_STREAMS }, () => Stream.create({ device }));
  const taskData = DeviceBuffer.alloc(TASK_ELEMENTS * 4, { stream: onDevice });
  const batchData = DeviceBuffer.alloc(blocks * FMA_BLOCK * 4, { stream: onDevice });
  onDevice.fill(taskData, 0);
  onDevice.fill(batchData, 0);
  await onDevice.synchronize();
  try {
    const idle = await latency(fmaSteps, onPartition, taskData);
    const idleWhole = await latency(fmaSteps, onDevice, taskData);
    const partitioned = await underLoad(fmaSteps, batchOnRest, batchData, blocks, () => latency(fmaSteps, onPartition, taskData, LOAD_MS));
    const shared = await underLoad(fmaSteps, batchOnDevice, batchData, blocks, () => latency(fmaSteps, onDevice, taskData, LOAD_MS));
    // The p99 of one run of TASKS tasks, shown as the figure itself.
    const p99 = (p: number, of: Sample): Sample => microseconds({ median: p, p10: p, p90: p, runs: of.runs });
    const idleP99 = p99(idle.p99, idle.sample);
    const perKernel = (perSecond: number): Sample => ({ median: 1e6 / perSecond, p10: 1e6 / perSecond, p90: 1e6 / perSecond, runs: 1 });
    const rows: MicroResult[] = [
      {
        name: `latency task p99 on a partition of ${mine.multiprocessorCount} multiprocessors, a batch load filling the other ${rest.multiprocessorCount}`,
        unit: 'µs',
        value: p99(partitioned.result.p99, partitioned.result.sample),
        baselineName: 'the same task on its partition of an idle GPU (p99)',
        baseline: idleP99,
        ratio: partitioned.result.p99 / idle.p99,
        better: 'lower',
        target: `≤ ${TARGET}× the idle p99`,
        met: partitioned.result.p99 <= TARGET * idle.p99,
      },
      {
        name: 'latency task p99 without partitions, the batch load filling the whole device',
        unit: 'µs',
        value: p99(shared.result.p99, shared.result.sample),
        baselineName: 'the same task on an idle GPU (p99)',
        baseline: p99(idleWhole.p99, idleWhole.sample),
        ratio: shared.result.p99 / idleWhole.p99,
        better: 'lower',
      },
      {
        name: `batch load on the ${rest.multiprocessorCount} multiprocessors left beside the partition, time per kernel (its throughput's inverse)`,
        unit: 'µs',
        value: perKernel(partitioned.kernelsPerSecond),
        baselineName: 'the batch load on the whole device beside the same tasks',
        baseline: perKernel(shared.kernelsPerSecond),
        ratio: shared.kernelsPerSecond / partitioned.kernelsPerSecond,
        better: 'lower',
      },
    ];
    return rows;
  } finally {
    taskData.free();
    batchData.free();
    for (const s of [onPartition, onDevice, ...batchOnRest, ...batchOnDevice]) s.destroy();
  }
}
