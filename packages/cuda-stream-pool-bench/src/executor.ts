// The executor benchmark behind `cuda-stream-pool bench`: many short tasks (copy in, kernel, copy out, verify) on
// one GPU or spread over several (`--devices`), in each mode, on the main thread or split among worker threads sharing
// one pool per device (README.md, "The executor benchmark").
import { Device, StreamPool } from 'cuda-stream-pool';
import type { BatchSetup } from './batch.js';
import { calibrate } from './calibrate.js';
import { describeEnvironment } from './environment.js';
import { benchKernels } from './kernels.js';
import { usesPool, type Mode } from './modes.js';
import { computeReferences, FMA_A, FMA_B, MAX_PARTITIONS, sampleIndices, type InputSpec } from './reference.js';
import type { Progress } from './progress.js';
import { addSpeedups, overlapBoundMs, summarizeDevice, summarizeMode } from './results.js';
import { createRunner, ProcessRunner, share, type Runner } from './runners.js';
import { BENCH_SCHEMA, type BenchResult, type ModeResult } from './schema.js';
import { ULP_TOLERANCE, type BatchResult } from './task.js';

/** What `bench` was asked to do, already validated (src/cli/options.ts). */
export interface ExecutorOptions {
  tasks: number;
  concurrency: number;
  workers: number;
  elements: number;
  /** Undefined: calibrate. */
  intensity: number | undefined;
  modes: Mode[];
  poolSize: number;
  runs: number;
  /** The devices, as ordinals: one (`--device`) or several (`--devices`). The tasks are spread over them; each device
   * has its own slots (`concurrency` of them), pool, pinned partitions and threads. */
  devices: number[];
  corrupt: { task: number; element: number } | undefined;
  /** Record every task's phase events (4 event records and 4 elapsed-time reads per task), for the timeline, the
   * trace and the results' `lastRunTasks`. */
  phaseTimes: boolean;
  /** Also run every mode with one executor process per device (--processes), after the one-process runs. */
  processes: boolean;
  progress: Progress;
}

/** One device's share of the run: its pool (in this process) and its runner. */
interface DeviceRun {
  device: Device;
  pool: StreamPool | undefined;
  runner: Runner | undefined;
}

/** What every measured pass shares: the tasks' split over the devices and how to summarize. */
interface Plan {
  o: ExecutorOptions;
  counts: number[];
  firsts: number[];
  warmupTasks: number;
  partitionBytes: number;
  boundMs: number;
  phasesAlone: BenchResult['phasesAloneMs'];
}

/** Measures every mode with `runs` (one per device, runners ready): a warm-up, then `o.runs` measured runs of the
 * tasks spread over the devices, all at once. `label` goes in the progress line. */
async function measureModes(plan: Plan, runs: DeviceRun[], label: string): Promise<ModeResult[]> {
  const { o, counts, firsts, partitionBytes, boundMs } = plan;
  const modes: ModeResult[] = [];
  for (const mode of o.modes) {
    o.progress.status(`${mode}${label} (warm-up)`);
    await Promise.all(runs.map((run) => run.runner!.run(mode, 0, plan.warmupTasks, false, () => {})));
    const measured: BatchResult[][][] = []; // [run][device][batch]
    for (let r = 0; r < o.runs; r++) {
      o.progress.status(`${mode}${label} (run ${r + 1}/${o.runs})`);
      measured.push(await Promise.all(runs.map((run, k) => run.runner!.run(mode, firsts[k]!, counts[k]!, true, (tasks) => o.progress.tick(tasks)))));
    }
    const summary = summarizeMode(mode, measured.map((perDevice) => perDevice.flat()), o.tasks, partitionBytes, boundMs, o.phaseTimes);
    // Stream ids are unique within a process only: executor processes' streams are counted process by process.
    if (label !== '')
      summary.streams = measured[measured.length - 1]!.reduce((sum, batches) => sum + new Set(batches.flatMap((b) => b.records.map((r) => r.streamId))).size, 0);
    if (runs.length > 1)
      summary.perDevice = runs.map((run, k) => ({
        device: run.device.ordinal,
        ...summarizeDevice(mode, measured.map((perDevice) => perDevice[k]!), counts[k]!, partitionBytes, overlapBoundMs(counts[k]!, plan.phasesAlone)),
      }));
    modes.push(summary);
  }
  addSpeedups(modes);
  return modes;
}

/** Frees the runners (and pools) of a pass; `failed`: it threw, so threads and processes are stopped at once. */
async function disposeRuns(runs: DeviceRun[], failed: boolean): Promise<void> {
  for (const run of runs) {
    await run.runner?.dispose(failed);
    run.pool?.destroy();
  }
}

/** Runs the executor benchmark: calibration and phases alone (on the first device), references, then for each mode a
 * warm-up and `runs` measured runs of `tasks` tasks, spread over the devices (device k of D runs tasks
 * `share(tasks, D, k)` of them, on its own slots, pool, partitions and threads, all devices at once).
 * @throws `VerificationError` (from the main thread, or rebuilt from a worker) when a task's output is wrong; the
 * library's errors when CUDA fails. */
export async function runExecutorBenchmark(o: ExecutorOptions): Promise<BenchResult> {
  const devices = o.devices.map((ordinal) => Device.get(ordinal));
  const device = devices[0]!;
  const environment = describeEnvironment(device);
  o.progress.status('calibrating');
  const kernels = await benchKernels(device);
  const calibration = await calibrate(device, kernels, o.elements, o.intensity);
  const spec: InputSpec = {
    elements: o.elements,
    intensity: calibration.intensity,
    partitions: Math.min(o.tasks, MAX_PARTITIONS),
    sample: sampleIndices(o.elements, o.corrupt?.element),
  };
  o.progress.status('computing references');
  const references = computeReferences(spec);
  const partitionBytes = o.elements * 4;
  const warmupTasks = 2 * o.concurrency;
  const counts = devices.map((_, k) => share(o.tasks, devices.length, k));
  const firsts = counts.map((_, k) => counts.slice(0, k).reduce((sum, n) => sum + n, 0));
  // Each device has its own engines: the bound is that of the device with the most tasks.
  const boundMs = overlapBoundMs(Math.max(...counts), calibration.phases);
  const result: BenchResult = {
    schema: BENCH_SCHEMA,
    environment,
    parameters: {
      tasks: o.tasks,
      concurrency: o.concurrency,
      workers: o.workers,
      elements: o.elements,
      partitionBytes,
      intensity: calibration.intensity,
      intensityCalibrated: calibration.calibrated,
      modes: o.modes,
      poolSize: o.poolSize,
      runs: o.runs,
      warmupTasks,
      partitions: spec.partitions,
      sampleSize: spec.sample.length,
      ulpTolerance: ULP_TOLERANCE,
      fma: { a: FMA_A, b: FMA_B },
      phaseTimes: o.phaseTimes,
      devices: devices.map((d) => d.ordinal),
      processes: o.processes,
    },
    phasesAloneMs: calibration.phases,
    overlapBoundMs: boundMs,
    modes: [],
  };
  if (devices.length > 1) result.devices = devices.map((d) => describeEnvironment(d).device);

  const plan: Plan = { o, counts, firsts, warmupTasks, partitionBytes, boundMs, phasesAlone: calibration.phases };
  const usePool = o.modes.some(usesPool);
  // Thread numbers are unique over the devices: device k's main thread is k × (workers + 1), its workers follow.
  const setupOf = (k: number, d: Device): BatchSetup => ({ device: d.ordinal, spec, references, slots: o.concurrency, corrupt: o.corrupt, marks: o.phaseTimes, thread: k * (o.workers + 1) });

  o.progress.status('preparing inputs');
  const runs: DeviceRun[] = devices.map((d) => ({ device: d, pool: undefined, runner: undefined }));
  let failed = true;
  try {
    for (const [k, run] of runs.entries()) {
      run.pool = usePool ? new StreamPool({ device: run.device, size: o.poolSize }) : undefined;
      run.runner = await createRunner(setupOf(k, run.device), run.pool, o.workers, o.concurrency);
    }
    result.modes = await measureModes(plan, runs, '');
    failed = false;
  } finally {
    await disposeRuns(runs, failed);
  }
  if (!o.processes) return result;

  o.progress.status('starting executor processes');
  const processRuns: DeviceRun[] = devices.map((d) => ({ device: d, pool: undefined, runner: undefined }));
  failed = true;
  try {
    // Started together: each process opens the driver and prepares its inputs on its own.
    const runners = await Promise.allSettled(
      devices.map((d, k) => ProcessRunner.create({ setup: setupOf(k, d), workers: o.workers, concurrency: o.concurrency, poolSize: usePool ? o.poolSize : 0 })),
    );
    runners.forEach((outcome, k) => {
      if (outcome.status === 'fulfilled') processRuns[k]!.runner = outcome.value;
    });
    const refused = runners.find((outcome) => outcome.status === 'rejected');
    if (refused) throw (refused as PromiseRejectedResult).reason;
    result.processModes = await measureModes(plan, processRuns, `, ${devices.length} process${devices.length > 1 ? 'es' : ''}`);
    failed = false;
  } finally {
    await disposeRuns(processRuns, failed);
  }
  return result;
}
