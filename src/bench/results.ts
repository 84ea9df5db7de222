// The executor benchmark's results: what `bench --json` prints (schema documented in README.md, "The executor
// benchmark's JSON"), derived from the batches' records.
import type { Environment } from './environment.js';
import type { PhaseTimes } from './calibrate.js';
import { summarize, type Sample } from './harness.js';
import type { BatchResult } from './batch.js';
import type { Mode } from './modes.js';

/** The phases of a task in order, as the timeline and the phase table name them. */
export const PHASES = ['copy-in', 'kernel', 'copy-out'] as const;

/** The `schema` value of `bench --json` output; bumped when a field changes meaning or goes away. */
export const BENCH_SCHEMA = 'cuda-stream-pool/bench/1';

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
  modes: Mode[];
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
  /** True with --timeline: every task also recorded 4 timing events, read back after it completed. */
  timeline: boolean;
}

/** One mode's results over its runs. */
export interface ModeResult {
  mode: Mode;
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
  /** tasks × max(phase alone) / wall time, over the runs: 1 means the busiest engine never idled. */
  overlapFraction: Sample;
  /** Tasks verified against the CPU reference, over all runs (tasks × runs when all went well). */
  verifiedTasks: number;
  /** Distinct streams the tasks ran on in the last run. */
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

/** Summarizes one mode's runs; each run is the batches of every thread. `speedupOverLegacy` is filled in by
 * {@link addSpeedups} once every mode ran. */
export function summarizeMode(mode: Mode, runs: BatchResult[][], tasks: number, partitionBytes: number, boundMs: number): ModeResult {
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
    overlapFraction: summarize(wallMs.map((ms) => boundMs / ms)),
    verifiedTasks: latencies.length,
    streams: new Set(last.flatMap((b) => b.records.map((r) => r.streamId))).size,
  };
}

/** Fills in each mode's speedup over legacy (median tasks/s ratio), when legacy ran. */
export function addSpeedups(modes: ModeResult[]): void {
  const legacy = modes.find((m) => m.mode === 'legacy');
  for (const m of modes) m.speedupOverLegacy = legacy ? m.tasksPerSecond.median / legacy.tasksPerSecond.median : null;
}

/** The timeline's data, embedded as JSON in the HTML page (`<script type="application/json" id="timeline-data">`). */
export interface TimelineData {
  schema: 'cuda-stream-pool/timeline/1';
  phases: typeof PHASES;
  modes: TimelineMode[];
}

/** One mode's last run: a row per stream, a bar per phase of each task that ran on it. */
export interface TimelineMode {
  mode: Mode;
  wallMs: number;
  rows: TimelineRow[];
}

/** One stream of a mode's timeline, with the tasks that ran on it in start order. */
export interface TimelineRow {
  /** The stream's driver id (cuStreamGetId), as a decimal string. */
  streamId: string;
  label: string;
  tasks: TimelineTask[];
}

/** One task of a timeline row: its three phase bars. */
export interface TimelineTask {
  task: number;
  /** 0: the main thread; 1..: a worker. */
  thread: number;
  /** One bar per phase, in phase order; times in ms from the run's first timing origin. */
  bars: { phase: (typeof PHASES)[number]; startMs: number; endMs: number }[];
}

function threadName(thread: number): string {
  return thread === 0 ? 'main thread' : `worker ${thread}`;
}

/** The timeline of one mode's run: GPU event times of each thread, shifted by the host time between the threads'
 * timing origins (the events of different threads cannot be compared directly; the host clocks agree to a few µs). */
export function timelineOf(mode: Mode, batches: BatchResult[]): TimelineMode {
  const zero = Math.min(...batches.map((b) => b.originEpochMs));
  const rows = new Map<string, TimelineRow>();
  for (const batch of batches) {
    const shift = batch.originEpochMs - zero;
    for (const record of batch.records) {
      const key = mode === 'per-thread' ? `${record.streamId}/${record.thread}` : record.streamId;
      let row = rows.get(key);
      if (!row) {
        const label =
          mode === 'legacy'
            ? `legacy stream (id ${record.streamId})`
            : mode === 'per-thread'
              ? `per-thread stream of the ${threadName(record.thread)} (id ${record.streamId})`
              : `stream ${record.streamId}`;
        row = { streamId: record.streamId, label, tasks: [] };
        rows.set(key, row);
      }
      const m = record.marks.map((t) => t + shift);
      row.tasks.push({
        task: record.task,
        thread: record.thread,
        bars: PHASES.map((phase, i) => ({ phase, startMs: m[i]!, endMs: m[i + 1]! })),
      });
    }
  }
  const sorted = [...rows.values()];
  const firstStart = (row: TimelineRow) => Math.min(...row.tasks.map((t) => t.bars[0]!.startMs));
  sorted.sort((a, b) => firstStart(a) - firstStart(b));
  for (const row of sorted) row.tasks.sort((a, b) => a.bars[0]!.startMs - b.bars[0]!.startMs);
  const wallMs = Math.max(...batches.map((b) => b.endEpochMs)) - Math.min(...batches.map((b) => b.startEpochMs));
  return { mode, wallMs, rows: sorted };
}
