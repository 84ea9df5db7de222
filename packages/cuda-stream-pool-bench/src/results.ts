// The executor benchmark's results: what `bench --json` prints, derived from the batches' records, and the reading
// of a saved file. Its shape and types are defined in schema.ts.
import type * as z from 'zod';

import { summarize } from './harness.js';
import type { Mode } from './modes.js';
import { printable } from './printable.js';
import { BENCH_SCHEMA, benchResultSchema, type BenchResult, type DeviceModeResult, type ModeResult, type PhaseTimes, type TaskPhaseTimes } from './schema.js';
import type { BatchResult } from './task.js';

/** The phases of a task in order, as the timeline and the phase table name them. */
export const PHASES = ['copy-in', 'kernel', 'copy-out'] as const;

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
  const batches = runs.flat();
  const orderWaits = batches.reduce((sum, b) => sum + b.orderWaits, 0);
  const orderWaitMs = batches.reduce((sum, b) => sum + b.orderWaitMs, 0);
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
    ...(mode === 'native' ? {} : { orderWaits: { perTask: orderWaits / (tasks * runs.length), msPerRun: orderWaitMs / runs.length } }),
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
      if (typeof issue.input === 'number' && !Number.isFinite(issue.input)) return `${at} is beyond the range of a float64 (read as ${issue.input}), not a finite number`;
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
 * error (control characters it quotes escaped), binary content (a NUL byte), or a schema of another version. */
export function parseBenchResults(text: string, source: string): BenchResult {
  const fail = (what: string): never => {
    throw new ResultsFileError(`${source} is not a cuda-stream-pool bench results file: ${what}.`);
  };
  const nul = text.indexOf('\u0000');
  if (nul >= 0) return fail(`it holds binary data, not JSON text (a NUL byte at character ${nul})`);
  let value: unknown;
  try {
    value = JSON.parse(text.replace(/^\uFEFF/, '')); // an editor's byte-order mark is not part of the JSON
  } catch (error) {
    // The syntax error quotes the text around it, which may hold control characters: shown escaped.
    return fail(`its JSON does not parse (${printable((error as Error).message.replace(/\n/g, '\\n'))})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail('it is not a JSON object');
  const schema = (value as { schema?: unknown }).schema;
  if (typeof schema === 'string' && schema !== BENCH_SCHEMA && schema.startsWith('cuda-stream-pool/bench/'))
    fail(`its schema is ${JSON.stringify(schema)}, and this version reads ${JSON.stringify(BENCH_SCHEMA)} (run the benchmark again with this version)`);
  const checked = benchResultSchema.safeParse(value, { reportInput: true });
  if (!checked.success) fail(describeIssue(checked.error.issues[0]!));
  return value as BenchResult;
}
