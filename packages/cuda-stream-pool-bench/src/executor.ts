// The executor benchmark behind `cuda-stream-pool bench`: many short tasks (copy in, kernel, copy out, verify) on
// one GPU or spread over several (`--devices`), in each mode, on the main thread or split among worker threads sharing
// one pool per device (README.md, "The executor benchmark").
import { Worker } from 'node:worker_threads';

import { Device, StreamPool } from 'cuda-stream-pool';
import { BatchThread, type BatchSetup } from './batch.js';
import { calibrate } from './calibrate.js';
import { describeEnvironment } from './environment.js';
import type { FromWorker, ToWorker } from './executor-worker.js';
import { benchKernels } from './kernels.js';
import { usesPool, type Mode } from './modes.js';
import { computeReferences, FMA_A, FMA_B, MAX_PARTITIONS, sampleIndices, type InputSpec } from './reference.js';
import type { Progress } from './progress.js';
import { addSpeedups, overlapBoundMs, summarizeDevice, summarizeMode } from './results.js';
import { BENCH_SCHEMA, type BenchResult } from './schema.js';
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
  progress: Progress;
}

/** The `index`-th of `parts` near-equal shares of `total` (the first `total % parts` shares get one more). */
function share(total: number, parts: number, index: number): number {
  return Math.floor(total / parts) + (index < total % parts ? 1 : 0);
}

/** Runs a mode's tasks on some threads: the main thread alone, or a group of workers. */
interface Runner {
  /** Runs `count` tasks numbered from `first` (split among the threads); resolves with each thread's batch. */
  run(mode: Mode, first: number, count: number, timed: boolean, onTasksDone: (tasks: number) => void): Promise<BatchResult[]>;
  /** Frees every thread's state. `failed`: a run failed, and workers may still have tasks in flight, so they are
   * terminated (a terminated worker gives its leases back) instead of asked to finish. */
  dispose(failed: boolean): Promise<void>;
}

/** The main thread runs every task itself (--workers 0). */
class LocalRunner implements Runner {
  private constructor(private readonly thread: BatchThread) {}

  static async create(setup: BatchSetup, pool: StreamPool | undefined): Promise<LocalRunner> {
    return new LocalRunner(await BatchThread.create(setup, pool));
  }

  async run(mode: Mode, first: number, count: number, timed: boolean, onTasksDone: (tasks: number) => void): Promise<BatchResult[]> {
    return [await this.thread.run(mode, first, count, timed, timed ? onTasksDone : undefined)];
  }

  async dispose(): Promise<void> {
    // The main thread's batch has no task in flight once run() settled, failed or not.
    this.thread.dispose();
  }
}

/** An error a worker reported, rebuilt on the main thread with the worker's name and message. */
function workerError(message: Extract<FromWorker, { kind: 'failed' }>, worker: number): Error {
  const error = new Error(message.message);
  error.name = message.name;
  error.stack = `${message.name}: ${message.message}\n    (in worker ${worker})${message.stack ? `\n${message.stack.split('\n').slice(1).join('\n')}` : ''}`;
  return error;
}

/** One worker thread and the request it is answering. */
class WorkerLink {
  readonly worker: Worker;
  #pending: { resolve: (result: BatchResult | undefined) => void; reject: (error: Error) => void } | undefined;
  #onTick: ((tasks: number) => void) | undefined;
  #dead: Error | undefined;
  readonly exited: Promise<number>;

  constructor(
    readonly index: number,
    setup: BatchSetup,
  ) {
    this.worker = new Worker(new URL('./executor-worker.js', import.meta.url), { workerData: setup });
    this.exited = new Promise((resolve) => this.worker.once('exit', resolve));
    this.worker.on('message', (message: FromWorker) => {
      if (message.kind === 'tick') this.#onTick?.(message.tasks);
      else if (message.kind === 'failed') this.#settle(workerError(message, index));
      else this.#settle(undefined, message.kind === 'done' ? message.result : undefined);
    });
    this.worker.on('error', (error) => this.#settle(error));
    this.worker.on('exit', (code) => this.#settle(new Error(`cuda-stream-pool bench: worker ${index} exited with code ${code} before answering.`)));
  }

  #settle(error: Error | undefined, result?: BatchResult): void {
    const pending = this.#pending;
    this.#pending = undefined;
    if (error) this.#dead ??= error;
    if (!pending) return;
    if (error) pending.reject(error);
    else pending.resolve(result);
  }

  /** Resolves when the worker sent its next answer ('ready' or 'done'); rejects when it failed or died. */
  next(message: ToWorker | undefined, onTick?: (tasks: number) => void): Promise<BatchResult | undefined> {
    if (this.#dead) return Promise.reject(this.#dead);
    this.#onTick = onTick;
    const answer = new Promise<BatchResult | undefined>((resolve, reject) => {
      this.#pending = { resolve, reject };
    });
    if (message) this.worker.postMessage(message);
    return answer;
  }
}

/** Worker threads sharing the main thread's pool (--workers N): tasks and slots are split among them. */
class WorkerRunner implements Runner {
  private constructor(
    private readonly links: WorkerLink[],
    private readonly workers: number,
  ) {}

  static async create(setup: BatchSetup, workers: number, concurrency: number): Promise<WorkerRunner> {
    const links: WorkerLink[] = [];
    for (let w = 0; w < workers; w++) {
      links.push(new WorkerLink(setup.thread + w + 1, { ...setup, slots: share(concurrency, workers, w), thread: setup.thread + w + 1 }));
    }
    const runner = new WorkerRunner(links, workers);
    try {
      await Promise.all(links.map((link) => link.next(undefined)));
    } catch (error) {
      await runner.dispose(true);
      throw error;
    }
    return runner;
  }

  async run(mode: Mode, start: number, count: number, timed: boolean, onTasksDone: (tasks: number) => void): Promise<BatchResult[]> {
    let first = start;
    const answers = this.links.map((link, w) => {
      const mine = share(count, this.workers, w);
      const message: ToWorker = { kind: 'run', mode, first, count: mine, timed };
      first += mine;
      return link.next(message, onTasksDone);
    });
    const results = await Promise.all(answers);
    return results.filter((r): r is BatchResult => r !== undefined);
  }

  async dispose(failed: boolean): Promise<void> {
    await Promise.all(
      this.links.map(async (link) => {
        if (failed) {
          await link.worker.terminate();
          return;
        }
        link.worker.postMessage({ kind: 'exit' } satisfies ToWorker);
        // A worker that does not exit within 10 s of being asked is terminated.
        const timer = setTimeout(() => void link.worker.terminate(), 10_000);
        await link.exited;
        clearTimeout(timer);
      }),
    );
  }
}

/** One device's share of the run: its pool, its threads, its tasks. */
interface DeviceRun {
  device: Device;
  pool: StreamPool | undefined;
  runner: Runner | undefined;
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
    },
    phasesAloneMs: calibration.phases,
    overlapBoundMs: boundMs,
    modes: [],
  };
  if (devices.length > 1) result.devices = devices.map((d) => describeEnvironment(d).device);

  o.progress.status('preparing inputs');
  const runs: DeviceRun[] = devices.map((d) => ({ device: d, pool: undefined, runner: undefined }));
  let failed = true;
  try {
    // Thread numbers are unique over the devices: device k's main thread is k × (workers + 1), its workers follow.
    for (const [k, run] of runs.entries()) {
      run.pool = o.modes.some(usesPool) ? new StreamPool({ device: run.device, size: o.poolSize }) : undefined;
      const setup: BatchSetup = { device: run.device.ordinal, spec, references, slots: o.concurrency, corrupt: o.corrupt, marks: o.phaseTimes, thread: k * (o.workers + 1) };
      if (run.pool && o.workers > 0) setup.sharedPool = run.pool.share();
      run.runner = o.workers === 0 ? await LocalRunner.create(setup, run.pool) : await WorkerRunner.create(setup, o.workers, o.concurrency);
    }
    for (const mode of o.modes) {
      o.progress.status(`${mode} (warm-up)`);
      await Promise.all(runs.map((run) => run.runner!.run(mode, 0, warmupTasks, false, () => {})));
      const measured: BatchResult[][][] = []; // [run][device][batch]
      for (let r = 0; r < o.runs; r++) {
        o.progress.status(`${mode} (run ${r + 1}/${o.runs})`);
        measured.push(await Promise.all(runs.map((run, k) => run.runner!.run(mode, firsts[k]!, counts[k]!, true, (tasks) => o.progress.tick(tasks)))));
      }
      const summary = summarizeMode(mode, measured.map((perDevice) => perDevice.flat()), o.tasks, partitionBytes, boundMs, o.phaseTimes);
      if (devices.length > 1)
        summary.perDevice = runs.map((run, k) => ({
          device: run.device.ordinal,
          ...summarizeDevice(mode, measured.map((perDevice) => perDevice[k]!), counts[k]!, partitionBytes, overlapBoundMs(counts[k]!, calibration.phases)),
        }));
      result.modes.push(summary);
    }
    failed = false;
  } finally {
    for (const run of runs) {
      await run.runner?.dispose(failed);
      run.pool?.destroy();
    }
  }
  addSpeedups(result.modes);
  return result;
}
