// One mode's last run as a timeline: its tasks grouped into a row per stream, and the engine occupancy (how many
// copy-ins, kernels and copy-outs were in flight at each moment). The HTML page and the trace file both draw this.
import type { ResultMode } from './modes.js';
import { PHASES } from './results.js';
import type { ModeResult, TaskPhaseTimes } from './schema.js';

/** One stream of a mode's timeline and the tasks that ran on it, in start order. */
export interface StreamRow {
  /** The stream's driver id (cuStreamGetId), as a decimal string. */
  streamId: string;
  label: string;
  /** Time the row had a task in any phase, over the span of the run: 0 to 1. */
  busyFraction: number;
  tasks: TaskPhaseTimes[];
}

/** How busy one phase kind (one engine) was over the span of a run. */
export interface PhaseOccupancy {
  phase: (typeof PHASES)[number];
  /** Time with at least one phase of this kind in flight, ms. */
  busyMs: number;
  /** busyMs over the span: 0 to 1. */
  busyFraction: number;
  /** The time-weighted mean of the number in flight over the span. */
  meanInFlight: number;
  /** The most in flight at once. */
  peakInFlight: number;
  /** Idle intervals (none of this kind in flight) of positive length within the span. */
  gaps: number;
  /** Their total length, ms (span − busyMs). */
  idleMs: number;
}

/** The number of each phase kind in flight, as a step function: from `timesMs[i]` until `timesMs[i + 1]`,
 * `inFlight[p][i]` phases of kind `PHASES[p]` run. `timesMs` are the distinct times at which a phase started or
 * ended, ascending; after the last one nothing runs. */
export interface OccupancySteps {
  timesMs: number[];
  inFlight: [number[], number[], number[]];
}

/** One mode's last run, ready to draw. Times in ms from the run's timing origin. */
export interface ModeTimeline {
  mode: ResultMode;
  /** First copy-in start and last copy-out end of the run, ms. */
  spanStartMs: number;
  spanEndMs: number;
  rows: StreamRow[];
  steps: OccupancySteps;
  /** One per phase, in phase order. */
  occupancy: PhaseOccupancy[];
}

function rowLabel(mode: ResultMode, task: TaskPhaseTimes): string {
  if (mode === 'legacy') return `legacy stream (id ${task.streamId})`;
  if (mode === 'per-thread') return `${task.thread === 0 ? 'main thread' : `worker ${task.thread}`}'s stream (id ${task.streamId})`;
  return `stream ${task.streamId}`;
}

/** The step function of the phases in flight: +1 at each phase's start, −1 at its end, applied together per time. */
export function occupancySteps(tasks: readonly TaskPhaseTimes[]): OccupancySteps {
  const changes: { timeMs: number; phase: number; delta: number }[] = [];
  for (const task of tasks) {
    for (let p = 0; p < PHASES.length; p++) {
      changes.push({ timeMs: task.marksMs[p]!, phase: p, delta: 1 }, { timeMs: task.marksMs[p + 1]!, phase: p, delta: -1 });
    }
  }
  changes.sort((a, b) => a.timeMs - b.timeMs);
  const steps: OccupancySteps = { timesMs: [], inFlight: [[], [], []] };
  const current = [0, 0, 0];
  for (let i = 0; i < changes.length; ) {
    const timeMs = changes[i]!.timeMs;
    for (; i < changes.length && changes[i]!.timeMs === timeMs; i++) current[changes[i]!.phase]! += changes[i]!.delta;
    steps.timesMs.push(timeMs);
    for (let p = 0; p < PHASES.length; p++) steps.inFlight[p as 0 | 1 | 2].push(current[p]!);
  }
  return steps;
}

/** The occupancy of phase `p` over [spanStartMs, spanEndMs], from the step function. */
function occupancyOf(steps: OccupancySteps, p: number, spanStartMs: number, spanEndMs: number): PhaseOccupancy {
  const counts = steps.inFlight[p as 0 | 1 | 2];
  const spanMs = spanEndMs - spanStartMs;
  let busyMs = 0;
  let weighted = 0;
  let peak = 0;
  let gaps = 0;
  let idleSince: number | undefined = spanStartMs;
  for (let i = 0; i < steps.timesMs.length; i++) {
    const at = steps.timesMs[i]!;
    const next = i + 1 < steps.timesMs.length ? steps.timesMs[i + 1]! : spanEndMs;
    const count = counts[i]!;
    peak = Math.max(peak, count);
    busyMs += count > 0 ? next - at : 0;
    weighted += count * (next - at);
    if (count > 0 && idleSince !== undefined) {
      if (at > idleSince) gaps++;
      idleSince = undefined;
    } else if (count === 0 && idleSince === undefined) idleSince = at;
  }
  if (idleSince !== undefined && spanEndMs > idleSince) gaps++;
  return {
    phase: PHASES[p]!,
    busyMs,
    busyFraction: spanMs > 0 ? busyMs / spanMs : 0,
    meanInFlight: spanMs > 0 ? weighted / spanMs : 0,
    peakInFlight: peak,
    gaps,
    idleMs: spanMs - busyMs,
  };
}

/** Time covered by at least one of `intervals` ([start, end] pairs, ms). */
function unionMs(intervals: [number, number][]): number {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  let total = 0;
  let end = Number.NEGATIVE_INFINITY;
  for (const [s, e] of sorted) {
    if (e <= end) continue;
    total += e - Math.max(s, end);
    end = e;
  }
  return total;
}

/** The timeline of a mode's last run. @throws `RangeError` when the mode holds no phase times (`lastRunTasks` null or
 * empty). */
export function modeTimeline(result: ModeResult): ModeTimeline {
  const tasks = result.lastRunTasks;
  if (!tasks || tasks.length === 0) throw new RangeError(`mode ${result.mode} holds no phase times (lastRunTasks is ${tasks ? 'empty' : 'null'})`);
  // A loop, not Math.min(...spread): a spread of 130,000 tasks overflows the call stack.
  let spanStartMs = Infinity;
  let spanEndMs = -Infinity;
  for (const task of tasks) {
    spanStartMs = Math.min(spanStartMs, task.marksMs[0]);
    spanEndMs = Math.max(spanEndMs, task.marksMs[3]);
  }
  const spanMs = spanEndMs - spanStartMs;
  // The per-thread default streams of different threads may share an id; their rows are kept apart by thread.
  const rowsByKey = new Map<string, StreamRow>();
  for (const task of tasks) {
    const key = result.mode === 'per-thread' ? `${task.streamId}/${task.thread}` : task.streamId;
    let row = rowsByKey.get(key);
    if (!row) {
      row = { streamId: task.streamId, label: rowLabel(result.mode, task), busyFraction: 0, tasks: [] };
      rowsByKey.set(key, row);
    }
    row.tasks.push(task);
  }
  const rows = [...rowsByKey.values()];
  for (const row of rows) {
    row.tasks.sort((a, b) => a.marksMs[0] - b.marksMs[0]);
    row.busyFraction = spanMs > 0 ? unionMs(row.tasks.map((t) => [t.marksMs[0], t.marksMs[3]])) / spanMs : 0;
  }
  rows.sort((a, b) => a.tasks[0]!.marksMs[0] - b.tasks[0]!.marksMs[0]);
  const steps = occupancySteps(tasks);
  return {
    mode: result.mode,
    spanStartMs,
    spanEndMs,
    rows,
    steps,
    occupancy: PHASES.map((_, p) => occupancyOf(steps, p, spanStartMs, spanEndMs)),
  };
}
