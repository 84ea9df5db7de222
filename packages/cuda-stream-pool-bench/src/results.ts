// The executor benchmark's results: what `bench --json` prints (schema documented in README.md, "The executor
// benchmark's JSON"), derived from the batches' records.
import * as z from 'zod';

import type { Environment } from './environment.js';
import type { PhaseTimes } from './calibrate.js';
import { summarize, type Sample } from './harness.js';
import type { BatchResult } from './batch.js';
import { MODES, type Mode, type ResultMode } from './modes.js';
import { LIMITS } from './cli/options.js';

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

// The shape of a results file, as the report, the timeline and the trace read it. `satisfies` ties it to the
// interfaces above: a field added there and not here (or typed differently) fails to compile.
const amount = z.number().nonnegative();
const count = z.int().nonnegative();
const sample = z.object({ median: amount, p10: amount, p90: amount, runs: count });
const latency = z.object({ p50: amount, p99: amount });
const deviceDescription = z.object({
  ordinal: count,
  name: z.string(),
  computeCapability: z.string(),
  multiprocessorCount: count,
  totalMemoryBytes: amount,
  asyncEngineCount: count,
});
const mode = z.enum(MODES);
/** An integer option of `bench` within the limits `bench` accepts (LIMITS in src/cli/options.ts). */
const limited = ([min, max]: readonly [number, number]) => z.int().min(min).max(max);
/** A list in which no entry appears twice, as `bench` writes it; a repeat is named by its index. */
function distinct<T extends z.ZodType>(entry: T, what: (value: z.infer<T>) => unknown = (value) => value) {
  return z.array(entry).superRefine((values, ctx) => {
    const keys = values.map(what);
    keys.forEach((key, i) => {
      const first = keys.indexOf(key);
      if (first !== i) ctx.addIssue({ code: 'custom', path: [i], input: values[i], message: `is ${JSON.stringify(key)} again (as at [${first}]); bench names each once` });
    });
  });
}
const taskPhaseTimesShape = z.object({
  task: count,
  thread: count,
  streamId: z.string().regex(/^(0|[1-9][0-9]*)$/, 'a decimal integer (the stream id cuStreamGetId gave, as digits)'),
  marksMs: z
    .tuple([z.number(), z.number(), z.number(), z.number()])
    .refine((marks) => marks.every((m, k) => k === 0 || m >= marks[k - 1]!), 'is not 4 ascending numbers'),
});
const deviceModeResult = z.object({
  device: count,
  tasks: count,
  wallMs: z.array(amount).min(1),
  tasksPerSecond: sample,
  gigabytesPerSecond: sample,
  latencyMs: latency,
  overlapFraction: sample,
  verifiedTasks: count,
  streams: count,
});
const benchResultShape = z.object({
  schema: z.literal(BENCH_SCHEMA),
  environment: z.object({
    date: z.string(),
    packageVersion: z.string(),
    node: z.string(),
    os: z.string(),
    cpu: z.string(),
    driverVersion: z.string().nullable(),
    device: deviceDescription,
  }),
  parameters: z.object({
    tasks: limited(LIMITS.tasks),
    concurrency: limited(LIMITS.concurrency),
    workers: limited(LIMITS.workers),
    elements: limited(LIMITS.elements),
    partitionBytes: count,
    intensity: limited(LIMITS.intensity),
    intensityCalibrated: z.boolean(),
    modes: distinct(mode),
    poolSize: limited(LIMITS.poolSize),
    runs: limited(LIMITS.runs),
    warmupTasks: count,
    partitions: z.int().positive(),
    sampleSize: count,
    ulpTolerance: amount,
    fma: z.object({ a: z.number(), b: z.number() }),
    phaseTimes: z.boolean(),
    devices: distinct(limited(LIMITS.device)).optional(),
  }),
  phasesAloneMs: z.object({ copyIn: amount, kernel: amount, copyOut: amount }),
  overlapBoundMs: amount,
  modes: distinct(
      z.object({
        mode,
        wallMs: z.array(amount).min(1),
        tasksPerSecond: sample,
        gigabytesPerSecond: sample,
        latencyMs: latency,
        speedupOverLegacy: amount.nullable(),
        speedupOverNative: amount.nullable(),
        overlapFraction: sample,
        verifiedTasks: count,
        streams: count,
        lastRunTasks: z.array(taskPhaseTimesShape).nullable(),
        perDevice: z.array(deviceModeResult).optional(),
      }),
      (result) => result.mode,
    )
    .min(1),
  devices: z.array(deviceDescription).optional(),
}) satisfies z.ZodType<BenchResult>;

/** `modes[0].perDevice[1].device`: where an issue is, as a reader of the file would write it. */
function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((key, i) => (typeof key === 'number' ? `[${key}]` : `${i === 0 ? '' : '.'}${String(key)}`)).join('');
}

/** A value as the message shows it, shortened: a number or text as written, an array or object by its size (never
 * serialized whole: a value nested thousands deep would overflow the stack). */
function shown(value: unknown): string {
  let text: string;
  if (value === undefined) text = 'missing';
  else if (typeof value === 'number') text = String(value);
  else if (typeof value === 'string') text = JSON.stringify(value);
  else if (Array.isArray(value)) text = value.length === 0 ? '[]' : `an array of ${value.length}`;
  else if (typeof value === 'object' && value !== null) text = Object.keys(value).length === 0 ? '{}' : 'an object';
  else text = String(value);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

/** "1 entry", "5 entries". */
function entries(n: number): string {
  return `${n} ${n === 1 ? 'entry' : 'entries'}`;
}

/** What a field is and should be, for the first issue zod found. */
function describeIssue(issue: z.core.$ZodIssue & { input?: unknown }): string {
  const at = fieldPath(issue.path);
  switch (issue.code) {
    case 'invalid_type': {
      if (typeof issue.input === 'number') return `${at} is beyond the range of a float64 (read as ${issue.input}), not a finite number`;
      const expected =
        issue.expected === 'int' ? 'an integer' : issue.expected === 'tuple' || issue.expected === 'array' ? 'an array' : issue.expected === 'object' ? 'an object' : `a ${issue.expected}`;
      return `${at} is ${shown(issue.input)}, not ${expected}`;
    }
    case 'invalid_value':
      return `${at} is ${shown(issue.input)}, not ${issue.values.length === 1 ? shown(issue.values[0]) : `one of ${issue.values.join(', ')}`}`;
    case 'too_small': {
      if (Array.isArray(issue.input)) return `${at} has ${entries(issue.input.length)}, fewer than ${String(issue.minimum)}`;
      return `${at} is ${shown(issue.input)}, ${issue.inclusive ? 'below' : 'not above'} ${String(issue.minimum)}`;
    }
    case 'too_big': {
      if (Array.isArray(issue.input)) return `${at} has ${entries(issue.input.length)}, more than ${String(issue.maximum)}`;
      return `${at} is ${shown(issue.input)}, above ${String(issue.maximum)}`;
    }
    case 'custom':
      return `${at} ${issue.message}`;
    case 'invalid_format':
      return `${at} is ${shown(issue.input)}, not ${issue.message}`;
    default:
      return `${at}: ${issue.message}`;
  }
}

/** Parses the text of a saved `bench --json` output (`source` names it in errors) and checks every field the report,
 * the timeline and the trace read: types, ranges (counts are non-negative integers, rates and times non-negative,
 * the run's parameters within the limits `bench` accepts), mode names (each once), decimal stream ids, and that each
 * task's phase marks ascend.
 * @throws {@link ResultsFileError} naming the first field that is missing or wrong and its value, the JSON syntax
 * error, or a schema of another version. */
export function parseBenchResults(text: string, source: string): BenchResult {
  const fail = (what: string): never => {
    throw new ResultsFileError(`${source} is not a cuda-stream-pool bench results file: ${what}.`);
  };
  let value: unknown;
  try {
    value = JSON.parse(text.replace(/^\uFEFF/, '')); // an editor's byte-order mark is not part of the JSON
  } catch (error) {
    return fail(`its JSON does not parse (${(error as Error).message.replace(/\n/g, '\\n')})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail('it is not a JSON object');
  const schema = (value as { schema?: unknown }).schema;
  if (typeof schema === 'string' && schema !== BENCH_SCHEMA && schema.startsWith('cuda-stream-pool/bench/'))
    fail(`its schema is ${JSON.stringify(schema)}, and this version reads ${JSON.stringify(BENCH_SCHEMA)} (run the benchmark again with this version)`);
  const checked = benchResultShape.safeParse(value, { reportInput: true });
  if (!checked.success) fail(describeIssue(checked.error.issues[0]!));
  return value as BenchResult;
}
