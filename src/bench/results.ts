// The executor benchmark's results: what `bench --json` prints (schema documented in README.md, "The executor
// benchmark's JSON"), derived from the batches' records.
import type { Environment } from './environment.js';
import type { PhaseTimes } from './calibrate.js';
import { summarize, type Sample } from './harness.js';
import type { BatchResult } from './batch.js';
import { MODE_DESCRIPTIONS, type Mode, type ResultMode } from './modes.js';

/** The phases of a task in order, as the timeline and the phase table name them. */
export const PHASES = ['copy-in', 'kernel', 'copy-out'] as const;

/** The `schema` value of `bench --json` output; bumped when a field changes meaning or goes away. */
export const BENCH_SCHEMA = 'cuda-stream-pool/bench/2';

/** The parameters of a run, every one printed with the results. */
export interface BenchParameters {
  tasks: number;
  concurrency: number;
  workers: number;
  elements: number;
  /** Bytes per partition (elements × 4). */
  partitionBytes: number;
  intensity: number;
  /** True when --intensity was not given and the benchmark chose it. */
  intensityCalibrated: boolean;
  modes: ResultMode[];
  poolSize: number;
  runs: number;
  /** Warm-up tasks per mode (not measured). */
  warmupTasks: number;
  /** Distinct input partitions, reused round-robin. */
  partitions: number;
  /** Output elements verified per task. */
  sampleSize: number;
  ulpTolerance: number;
  /** The kernel's constants: v = fmaf(v, a, b). */
  fma: { a: number; b: number };
  /** True with --phases, --timeline or --trace: every task also recorded 4 timing events, read back after it
   * completed, and each mode's `lastRunTasks` holds them. */
  phaseTimes: boolean;
  /** The devices the tasks were spread over, as ordinals (`--devices`; one device: `--device`). Absent in results
   * saved before it was added, which ran on `environment.device` alone. */
  devices?: number[];
}

/** One task of a mode's last run, placed on the GPU by the events recorded between its phases. */
export interface TaskPhaseTimes {
  /** The task number over the whole run (0 to tasks - 1). */
  task: number;
  /** The thread that ran it: 0 the main thread, 1.. a worker (or a C++ thread of the native mode). */
  thread: number;
  /** The stream's driver id (cuStreamGetId), as a decimal string. */
  streamId: string;
  /** GPU times in ms from the run's timing origin: copy-in start, kernel start, copy-out start, copy-out end; the
   * phase `PHASES[i]` runs from `marksMs[i]` to `marksMs[i + 1]`. */
  marksMs: [number, number, number, number];
}

/** One mode's results over its runs. */
export interface ModeResult {
  mode: ResultMode;
  /** Wall time of each run in ms: first task started to last task verified, over all threads. */
  wallMs: number[];
  /** Tasks per second, over the runs. */
  tasksPerSecond: Sample;
  /** Bytes copied in and out per second / 1e9, over the runs. */
  gigabytesPerSecond: Sample;
  /** Host latency of a task (stream taken to output complete), over every task of every run. */
  latencyMs: { p50: number; p99: number };
  /** Median tasks/s divided by legacy's; null when legacy did not run. */
  speedupOverLegacy: number | null;
  /** Median tasks/s divided by native's; null when native did not run. */
  speedupOverNative: number | null;
  /** tasks × max(phase alone) / wall time, over the runs: 1 means the busiest engine never idled. */
  overlapFraction: Sample;
  /** Tasks verified against the CPU reference, over all runs (tasks × runs when all went well). */
  verifiedTasks: number;
  /** Distinct streams the tasks ran on in the last run. */
  streams: number;
  /** The phase times of every task of the last run, in task order; null when phase times were not recorded. */
  lastRunTasks: TaskPhaseTimes[] | null;
  /** With several devices (`--devices`): each device's share, in the order of `parameters.devices`; the fields above
   * are the total over all of them. Absent with one device. */
  perDevice?: DeviceModeResult[];
}

/** One device's share of a mode's runs with `--devices`: its own tasks, timed from its first task's start to its last
 * task's verified end. */
export interface DeviceModeResult {
  /** The device ordinal. */
  device: number;
  /** The tasks this device ran per run. */
  tasks: number;
  wallMs: number[];
  tasksPerSecond: Sample;
  gigabytesPerSecond: Sample;
  latencyMs: { p50: number; p99: number };
  /** This device's tasks × max(phase alone) / its wall time, over the runs. */
  overlapFraction: Sample;
  verifiedTasks: number;
  /** Distinct streams this device's tasks ran on in the last run. */
  streams: number;
}

/** Everything `bench --json` prints. */
export interface BenchResult {
  schema: typeof BENCH_SCHEMA;
  environment: Environment;
  parameters: BenchParameters;
  /** Median time of each phase measured alone (one stream, nothing else on the GPU), ms. */
  phasesAloneMs: PhaseTimes;
  /** tasks × max(phasesAloneMs): the shortest wall time if the busiest engine never idled, ms. */
  overlapBoundMs: number;
  modes: ModeResult[];
  /** With several devices (`--devices`): each one's description, in the order of `parameters.devices`
   * (`environment.device` is the first, which calibrated the kernel and measured the phases alone). */
  devices?: Environment['device'][];
}

/** The q-quantile (0 to 1) of ascending `sorted`, interpolated. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/** tasks × the longest phase alone: the overlap bound in ms. */
export function overlapBoundMs(tasks: number, phases: PhaseTimes): number {
  return tasks * Math.max(phases.copyIn, phases.kernel, phases.copyOut);
}

/** Summarizes one mode's runs; each run is the batches of every thread. The speedups are filled in by
 * {@link addSpeedups} once every mode ran. `phaseTimes`: the tasks recorded their phase events. */
export function summarizeMode(
  mode: Mode,
  runs: BatchResult[][],
  tasks: number,
  partitionBytes: number,
  boundMs: number,
  phaseTimes: boolean,
): ModeResult {
  const wallMs = runs.map((batches) => Math.max(...batches.map((b) => b.endEpochMs)) - Math.min(...batches.map((b) => b.startEpochMs)));
  const latencies = runs
    .flatMap((batches) => batches.flatMap((b) => b.records.map((r) => r.latencyMs)))
    .sort((a, b) => a - b);
  const last = runs[runs.length - 1] ?? [];
  return {
    mode,
    wallMs,
    tasksPerSecond: summarize(wallMs.map((ms) => tasks / (ms / 1000))),
    gigabytesPerSecond: summarize(wallMs.map((ms) => (2 * tasks * partitionBytes) / (ms / 1000) / 1e9)),
    latencyMs: { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99) },
    speedupOverLegacy: null,
    speedupOverNative: null,
    overlapFraction: summarize(wallMs.map((ms) => boundMs / ms)),
    verifiedTasks: latencies.length,
    streams: new Set(last.flatMap((b) => b.records.map((r) => r.streamId))).size,
    lastRunTasks: phaseTimes ? taskPhaseTimes(last) : null,
  };
}

/** Summarizes one device's share of a mode's runs (`runs[r]`: that device's batches of run r). */
export function summarizeDevice(mode: Mode, runs: BatchResult[][], tasks: number, partitionBytes: number, boundMs: number): Omit<DeviceModeResult, 'device'> {
  const whole = summarizeMode(mode, runs, tasks, partitionBytes, boundMs, false);
  return {
    tasks,
    wallMs: whole.wallMs,
    tasksPerSecond: whole.tasksPerSecond,
    gigabytesPerSecond: whole.gigabytesPerSecond,
    latencyMs: whole.latencyMs,
    overlapFraction: whole.overlapFraction,
    verifiedTasks: whole.verifiedTasks,
    streams: whole.streams,
  };
}

/** The phase times of one run's tasks, in task order: each thread's GPU event times, shifted by the host time between
 * the threads' timing origins (events of different threads cannot be compared directly; the host clocks agree to a
 * few µs). */
function taskPhaseTimes(batches: BatchResult[]): TaskPhaseTimes[] {
  const zero = Math.min(...batches.map((b) => b.originEpochMs));
  const tasks = batches.flatMap((batch) => {
    const shift = batch.originEpochMs - zero;
    return batch.records.map((r) => ({
      task: r.task,
      thread: r.thread,
      streamId: r.streamId,
      marksMs: r.marks.map((t) => t + shift) as TaskPhaseTimes['marksMs'],
    }));
  });
  return tasks.sort((a, b) => a.task - b.task);
}

/** Fills in each mode's speedups over legacy and over native (median tasks/s ratios), each when that mode ran. */
export function addSpeedups(modes: ModeResult[]): void {
  const legacy = modes.find((m) => m.mode === 'legacy');
  const native = modes.find((m) => m.mode === 'native');
  for (const m of modes) {
    m.speedupOverLegacy = legacy ? m.tasksPerSecond.median / legacy.tasksPerSecond.median : null;
    m.speedupOverNative = native ? m.tasksPerSecond.median / native.tasksPerSecond.median : null;
  }
}



/** Why a saved results file cannot be read: the file's name and what is wrong in it. */
export class ResultsFileError extends Error {
  override name = 'ResultsFileError';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses the text of a saved `bench --json` output (`source` names it in errors) and checks what the report, the
 * timeline and the trace read: the schema, the sections, and every mode's numbers and phase times.
 * @throws {@link ResultsFileError} naming the first field that is missing or wrong, or the JSON syntax error. */
export function parseBenchResults(text: string, source: string): BenchResult {
  const fail = (what: string): never => {
    throw new ResultsFileError(`${source} is not a cuda-stream-pool bench results file: ${what}.`);
  };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return fail(`its JSON does not parse (${(error as Error).message})`);
  }
  if (!isRecord(value)) return fail('it is not a JSON object');
  if (value.schema !== BENCH_SCHEMA)
    fail(
      typeof value.schema === 'string' && value.schema.startsWith('cuda-stream-pool/bench/')
        ? `its schema is ${JSON.stringify(value.schema)}, and this version reads ${JSON.stringify(BENCH_SCHEMA)} (run the benchmark again with this version)`
        : `"schema" is ${JSON.stringify(value.schema)}, not ${JSON.stringify(BENCH_SCHEMA)}`,
    );
  for (const key of ['environment', 'parameters', 'phasesAloneMs'] as const) if (!isRecord(value[key])) fail(`"${key}" is not an object`);
  if (!Array.isArray(value.modes)) fail('"modes" is not an array');
  const finite = (x: unknown) => typeof x === 'number' && Number.isFinite(x);
  (value.modes as unknown[]).forEach((mode, i) => {
    const at = `modes[${i}]`;
    if (!isRecord(mode) || !Object.hasOwn(MODE_DESCRIPTIONS, mode.mode as string))
      return fail(`${at}.mode is ${JSON.stringify(isRecord(mode) ? mode.mode : mode)}, not one of ${Object.keys(MODE_DESCRIPTIONS).join(', ')}`);
    for (const key of ['tasksPerSecond', 'gigabytesPerSecond', 'overlapFraction', 'latencyMs'] as const)
      if (!isRecord(mode[key])) fail(`${at}.${key} is not an object`);
    if (!Array.isArray(mode.wallMs) || !mode.wallMs.every(finite)) fail(`${at}.wallMs is not an array of numbers`);
    const tasks = mode.lastRunTasks;
    if (tasks === null) return;
    if (!Array.isArray(tasks)) return fail(`${at}.lastRunTasks is neither null nor an array`);
    tasks.forEach((task: unknown, t) => {
      const where = `${at}.lastRunTasks[${t}]`;
      if (!isRecord(task) || !Number.isInteger(task.task) || !Number.isInteger(task.thread) || typeof task.streamId !== 'string')
        fail(`${where} needs an integer task and thread and a string streamId`);
      const marks = (task as Record<string, unknown>).marksMs;
      if (!Array.isArray(marks) || marks.length !== 4 || !marks.every(finite) || !marks.every((m, k) => k === 0 || m >= marks[k - 1]))
        fail(`${where}.marksMs is not 4 ascending numbers`);
    });
  });
  return value as unknown as BenchResult;
}
