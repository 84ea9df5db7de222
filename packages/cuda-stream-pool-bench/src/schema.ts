// The JSON the benchmark prints, defined once: `bench --json` (BenchResult) and `bench micro --json` (MicroReport) as
// zod schemas, each TS type inferred from its schema. `report` checks a saved `bench --json` file against
// benchResultSchema (parseBenchResults in results.ts), so the ranges here are what `bench` can write. The objects
// themselves are built by the code that measures (results.ts, micro.ts), whose key order is the JSON's.
import * as z from 'zod';

import { MODES } from './modes.js';
import { LIMITS } from './cli/options.js';

/** The `schema` value of `bench --json` output; bumped when a field changes meaning or goes away. */
export const BENCH_SCHEMA = 'cuda-stream-pool/bench/2';

/** The `schema` value of `bench micro --json` output. */
export const MICRO_SCHEMA = 'cuda-stream-pool/bench-micro/2';

const amount = z.number().nonnegative();
const count = z.int().nonnegative();
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

/** One timed quantity: the median and the 10th/90th percentiles over `runs` runs, in the unit of the field that holds
 * it. */
export const sampleSchema = z.object({
  median: amount,
  p10: amount,
  p90: amount,
  /** The runs summarized (0: nothing measured, and the figures are NaN, written as null). */
  runs: count,
  /** Calls per measured run, for a figure per call of a loop (`bench micro`); absent otherwise. */
  callsPerRun: z.int().positive().optional(),
});
export type Sample = z.output<typeof sampleSchema>;

const latencySchema = z.object({
  /** Median, ms. */
  p50: amount,
  /** 99th percentile, ms. */
  p99: amount,
});

/** A GPU as the results describe it. */
const deviceDescriptionSchema = z.object({
  ordinal: count,
  name: z.string(),
  /** 'major.minor', for example '9.0'. */
  computeCapability: z.string(),
  multiprocessorCount: count,
  /** Bytes. */
  totalMemoryBytes: amount,
  /** Copy engines that run alongside kernels. */
  asyncEngineCount: count,
});

/** The machine a benchmark ran on. */
export const environmentSchema = z.object({
  /** When the results were taken, ISO 8601. */
  date: z.string(),
  /** The version of cuda-stream-pool-bench (the benchmark), from its package.json. Before 0.2.0 the benchmark was
   * part of the library, so a file saved by 0.1.x holds the library's version here. */
  packageVersion: z.string(),
  /** The version of cuda-stream-pool (the library it measured), from its package.json. `bench` writes it; results
   * saved before it was recorded lack it, and still read. */
  libraryVersion: z.string().optional(),
  /** `process.version`, for example 'v20.19.0'. */
  node: z.string(),
  /** `${os.platform()} ${os.release()} ${os.arch()}`. */
  os: z.string(),
  /** The first CPU's model name and the number of logical CPUs. */
  cpu: z.string(),
  /** The driver's CUDA version as 'major.minor' (cuDriverGetVersion), null when unknown. */
  driverVersion: z.string().nullable(),
  /** The device it ran on (with `--devices`, the first). */
  device: deviceDescriptionSchema,
  /** How the JS threads' stream work reached the driver (`cuda.submission()`): `direct`, each call from the calling
   * thread, or `deferred` (CUDA_STREAM_POOL_SUBMISSION=deferred), recorded by the calling thread and issued by
   * `threads` native submission threads per JS thread. Results saved before it was recorded lack it, and still
   * read; they ran in direct mode unless the variable was set. */
  submission: z
    .discriminatedUnion('mode', [
      z.object({ mode: z.literal('direct'), threads: z.literal(0) }),
      z.object({ mode: z.literal('deferred'), threads: z.int().min(1).max(8) }),
    ])
    .optional(),
});
export type Environment = z.output<typeof environmentSchema>;

/** Median GPU times in ms of a task's phases, each measured alone. */
export const phaseTimesSchema = z.object({ copyIn: amount, kernel: amount, copyOut: amount });
export type PhaseTimes = z.output<typeof phaseTimesSchema>;

/** The parameters of a run, every one printed with the results. */
export const benchParametersSchema = z.object({
  /** Tasks per measured run (`--tasks`). */
  tasks: limited(LIMITS.tasks),
  /** Tasks in flight in total (`--concurrency`). */
  concurrency: limited(LIMITS.concurrency),
  /** Worker threads sharing the pool (`--workers`); 0: every task on the main thread. */
  workers: limited(LIMITS.workers),
  /** float32 elements per partition (`--elements`). */
  elements: limited(LIMITS.elements),
  /** Bytes per partition (elements × 4). */
  partitionBytes: count,
  /** `fmaf` steps per element (`--intensity`, or calibrated). */
  intensity: limited(LIMITS.intensity),
  /** True when --intensity was not given and the benchmark chose it. */
  intensityCalibrated: z.boolean(),
  /** The modes run, in run order. */
  modes: distinct(z.enum(MODES)),
  /** Streams in the pool of the pool, lease and graph modes (`--pool-size`). */
  poolSize: limited(LIMITS.poolSize),
  /** Measured runs per mode (`--runs`). */
  runs: limited(LIMITS.runs),
  /** Warm-up tasks per mode (not measured). */
  warmupTasks: count,
  /** Distinct input partitions, reused round-robin. */
  partitions: z.int().positive(),
  /** Output elements verified per task. */
  sampleSize: count,
  /** The most float32 ulps a verified element may be off. */
  ulpTolerance: amount,
  /** The kernel's constants: v = fmaf(v, a, b). */
  fma: z.object({ a: z.number(), b: z.number() }),
  /** True with --phases, --timeline or --trace: every task also recorded 4 timing events, read back after it
   * completed, and each mode's `lastRunTasks` holds them. */
  phaseTimes: z.boolean(),
  /** The devices the tasks were spread over, as ordinals (`--devices`; one device: `--device`). Absent in results
   * saved before it was added, which ran on `environment.device` alone. */
  devices: distinct(limited(LIMITS.device)).optional(),
  /** True with --processes: every mode also ran with one executor process per device (`processModes`). Absent in
   * results saved before it was added. */
  processes: z.boolean().optional(),
});
export type BenchParameters = z.output<typeof benchParametersSchema>;

/** One task of a mode's last run, placed on the GPU by the events recorded between its phases. */
export const taskPhaseTimesSchema = z.object({
  /** The task number over the whole run (0 to tasks - 1). */
  task: count,
  /** The thread that ran it: 0 the main thread, 1.. a worker (or a C++ thread of the native mode). */
  thread: count,
  /** The stream's driver id (cuStreamGetId), as a decimal string. */
  streamId: z.string().regex(/^(0|[1-9][0-9]*)$/, 'a decimal integer (the stream id cuStreamGetId gave, as digits)'),
  /** GPU times in ms from the run's timing origin (an event recorded just before the run): copy-in start, kernel
   * start, copy-out start, copy-out end; the phase `PHASES[i]` runs from `marksMs[i]` to `marksMs[i + 1]`. With
   * `--workers`, each thread's times are shifted by the host time between the threads' origins (events of different
   * threads cannot be compared directly), good to a few µs. */
  marksMs: z
    .tuple([z.number(), z.number(), z.number(), z.number()])
    .refine((marks) => marks.every((m, k) => k === 0 || m >= marks[k - 1]!), 'is not 4 ascending numbers'),
});
export type TaskPhaseTimes = z.output<typeof taskPhaseTimesSchema>;

/** One device's share of a mode's runs with `--devices`: its own tasks, timed from its first task's start to its last
 * task's verified end. */
export const deviceModeResultSchema = z.object({
  /** The device ordinal. */
  device: count,
  /** The tasks this device ran per run. */
  tasks: count,
  /** This device's wall time of each run, ms. */
  wallMs: z.array(amount).min(1),
  /** This device's tasks per second, over the runs. */
  tasksPerSecond: sampleSchema,
  /** Bytes this device copied in and out per second / 1e9, over the runs. */
  gigabytesPerSecond: sampleSchema,
  /** Host latency of this device's tasks, over every task of every run. */
  latencyMs: latencySchema,
  /** This device's tasks × max(phase alone) / its wall time, over the runs. */
  overlapFraction: sampleSchema,
  /** This device's tasks verified against the CPU reference, over all runs. */
  verifiedTasks: count,
  /** Distinct streams this device's tasks ran on in the last run. */
  streams: count,
});
export type DeviceModeResult = z.output<typeof deviceModeResultSchema>;

/** One mode's results over its runs. */
export const modeResultSchema = z.object({
  mode: z.enum(MODES),
  /** Wall time of each run in ms: first task started to last task verified, over all threads. */
  wallMs: z.array(amount).min(1),
  /** Tasks per second, over the runs. */
  tasksPerSecond: sampleSchema,
  /** Bytes copied in and out per second / 1e9, over the runs. */
  gigabytesPerSecond: sampleSchema,
  /** Host latency of a task (stream taken to output complete), over every task of every run. */
  latencyMs: latencySchema,
  /** Median tasks/s divided by legacy's; null when legacy did not run. */
  speedupOverLegacy: amount.nullable(),
  /** Median tasks/s divided by native's; null when native did not run. */
  speedupOverNative: amount.nullable(),
  /** tasks × max(phase alone) / wall time, over the runs: 1 means the busiest engine never idled. */
  overlapFraction: sampleSchema,
  /** Tasks verified against the CPU reference, over all runs (tasks × runs when all went well). */
  verifiedTasks: count,
  /** Distinct streams the tasks ran on in the last run. */
  streams: count,
  /** The phase times of every task of the last run, in task order; null when phase times were not recorded. */
  lastRunTasks: z.array(taskPhaseTimesSchema).nullable(),
  /** With several devices (`--devices`): each device's share, in the order of `parameters.devices`; the fields above
   * are the total over all of them. Absent with one device. */
  perDevice: z.array(deviceModeResultSchema).optional(),
  /** Deferred submission's order waits (`cuda.submission().orderWaits`, summed over the threads): operations held back
   * until another thread had issued an earlier operation of their stream, per task, and the milliseconds they waited
   * per run, in all threads together. 0 in direct mode; absent for `native`. */
  orderWaits: z.object({ perTask: amount, msPerRun: amount }).optional(),
});
export type ModeResult = z.output<typeof modeResultSchema>;

/** Everything `bench --json` prints. */
export const benchResultSchema = z.object({
  schema: z.literal(BENCH_SCHEMA),
  environment: environmentSchema,
  parameters: benchParametersSchema,
  /** Median time of each phase measured alone (one stream, nothing else on the GPU), ms. */
  phasesAloneMs: phaseTimesSchema,
  /** tasks × max(phasesAloneMs): the shortest wall time if the busiest engine never idled, ms. */
  overlapBoundMs: amount,
  /** One entry per mode run, in run order, each mode once: every device driven by this one process. */
  modes: distinct(modeResultSchema, (result) => result.mode).min(1),
  /** With --processes: the same modes, each device's share run by an executor process of its own (a child process
   * with its own context, pool and threads); `perDevice` is then each process's share. Speedups are against the
   * modes of this list. */
  processModes: distinct(modeResultSchema, (result) => result.mode).optional(),
  /** With several devices (`--devices`): each one's description, in the order of `parameters.devices`
   * (`environment.device` is the first, which calibrated the kernel and measured the phases alone). */
  devices: z.array(deviceDescriptionSchema).optional(),
}).superRefine((result, ctx) => {
  // A mode verifies at most every task of every run: more is a file bench did not write.
  const most = result.parameters.tasks * result.parameters.runs;
  for (const [list, name] of [[result.modes, 'modes'], [result.processModes ?? [], 'processModes']] as const)
    list.forEach((mode, i) => {
      if (mode.verifiedTasks > most)
        ctx.addIssue({
          code: 'custom',
          path: [name, i, 'verifiedTasks'],
          input: mode.verifiedTasks,
          message: `is ${mode.verifiedTasks}, more than the ${most} tasks of its runs (parameters.tasks × parameters.runs)`,
        });
    });
});
export type BenchResult = z.output<typeof benchResultSchema>;

/** A micro-benchmark row: what was measured, its value, and the baseline from the same run it is compared with. */
export const microResultSchema = z.object({
  /** What one call does, for example 'pool.getStream()'. */
  name: z.string(),
  /** The unit of `value` and `baseline`: 'ns' per call, 'µs' per call, 'ms' in all, 'GB/s', or '%' of one CPU core. */
  unit: z.enum(['ns', 'µs', 'ms', 'GB/s', '%']),
  /** The library's figure, in `unit`. */
  value: sampleSchema,
  /** The baseline's name, for example 'cuStreamCreate+cuStreamDestroy (C++ loop)'. */
  baselineName: z.string().optional(),
  /** The baseline's figure from the same run, in `unit`. */
  baseline: sampleSchema.optional(),
  /** value / baseline for costs (lower is better), baseline / value inverted for throughput; see `better`. */
  ratio: amount.optional(),
  /** Whether a ratio below 1 ('lower') or above 1 ('higher') is better. */
  better: z.enum(['lower', 'higher']).optional(),
  /** The target in words, for example '≤ 50 ns and ≥ 80× cheaper than create+destroy'. */
  target: z.string().optional(),
  /** Whether the target was met, when there is one. */
  met: z.boolean().optional(),
});
export type MicroResult = z.output<typeof microResultSchema>;

/** One group's outcome: its rows, or why there are none. */
export const microGroupResultSchema = z.object({
  /** The concept: pool, stream, memory, kernel, graph or peer. */
  name: z.string(),
  /** 'ok': ran; 'missing': the module or its export is not in this build; 'failed': it threw (see `message`);
   * 'skipped': this machine cannot run it, `message` says why (the peer group on fewer than two GPUs). */
  status: z.enum(['ok', 'missing', 'failed', 'skipped']),
  /** Why the group did not run, or how it failed. */
  message: z.string().optional(),
  /** Its rows, in print order; empty unless `status` is 'ok'. */
  results: z.array(microResultSchema),
});
export type MicroGroupResult = z.output<typeof microGroupResultSchema>;

/** Everything `bench micro --json` prints. */
export const microReportSchema = z.object({
  schema: z.literal(MICRO_SCHEMA),
  environment: environmentSchema,
  /** Every group, in print order (the pool group runs last but prints first). */
  groups: z.array(microGroupResultSchema),
});
export type MicroReport = z.output<typeof microReportSchema>;
